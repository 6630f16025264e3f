package proxy

import (
	"context"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/proxy/device"
)

// TestDelayLimitWarnedAtStartAndOnSet: a delay whose limit cannot hold a
// link's load is warned about at start and when a change brings it, once
// per spec, and no longer once the limit holds it.
func TestDelayLimitWarnedAtStartAndOnSet(t *testing.T) {
	fa := device.NewFake("fa", 1500, 8, 256)
	fb := device.NewFake("fb", 1500, 8, 256)
	p, err := New(context.Background(), [2]device.Device{fa, fb}, Options{
		Ifaces: [2]string{"eth-a", "eth-b"},
		Specs:  mustSpecs(t, [2]string{"delay 20ms", "delay 20ms | tbf rate 100mbit burst 32kb limit 1mb"}),
		Seed:   1, HasSeed: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	w := p.Warnings()
	if len(w["eth-a"]) != 1 || !strings.Contains(w["eth-a"][0], "write 'limit 1667' or more") || len(w["eth-b"]) != 0 {
		t.Fatalf("warnings at start %q: want eth-a's delay limit only", w)
	}
	if err := p.SetSpec("eth-b", "delay 300ms | tbf rate 100mbit burst 32kb limit 1mb"); err != nil {
		t.Fatal(err)
	}
	if w := p.Warnings()["eth-b"]; len(w) != 1 || !strings.Contains(w[0], "write 'limit 2500' or more") {
		t.Fatalf("warnings after set %q: want the limit that holds 300 ms at 100mbit", w)
	}
	if err := p.SetSpec("eth-a", "delay 20ms limit 1667"); err != nil {
		t.Fatal(err)
	}
	if w := p.Warnings()["eth-a"]; len(w) != 0 {
		t.Fatalf("warnings with the suggested limit: %q", w)
	}
}
