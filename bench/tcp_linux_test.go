package bench

import (
	"context"
	"testing"
	"time"

	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/lab"
)

// TestBulkWireRateThroughProxy sends TCP bulk through the proxy with the
// spec of the issue-7 finding (a 100 ms delay ahead of a 50 mbit tbf,
// whose queue is smaller than the path's window, so slow start ends in a
// burst of losses). What reaches the receiver's link over the second half
// must not exceed the tbf rate: the TCP figure the bench reports against
// the rate is the wire, not the receiver's reads (which over a window
// move by the data held out of order behind a loss at its ends, +12 % here
// before the fix).
func TestBulkWireRateThroughProxy(t *testing.T) {
	testenv.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := newEnv(ctx, Config{}, lab.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	p, err := e.openPath(ctx, PathProxyOffload)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	const rate = 50e6
	if err := p.Set("delay 100ms | tbf rate 50mbit burst 50kb limit 500kb", ""); err != nil {
		t.Fatal(err)
	}
	const dur = 3 * time.Second
	r, err := tcpBulk(ctx, e.lab, false, 1, dur, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("goodput %.2f Mbit/s, wire %.2f Mbit/s, held at the half %d B, at the end %d B",
		r.Steady/1e6, r.Wire/1e6, r.HeldHalf, r.HeldEnd)
	// The bound is the tbf's: rate over the span plus one burst (50 kB
	// in at least 1.5 s at 6.25 MB/s: 0.53 %), so 1 %. The span is timed
	// around the counter reads (tcpBulk), so a loaded machine's late
	// timer or slow reader lowers the figure instead of raising it; the
	// lower bound only says the path carried the transfer at all.
	if r.Wire > rate*1.01 || r.Wire < rate/2 {
		t.Errorf("IP bytes at the receiver's link: %.3f Mbit/s over the second half, want ≤ 50.5 (the tbf rate) and well above 0", r.Wire/1e6)
	}
}
