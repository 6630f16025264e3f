package traffic

import (
	"context"
	"time"

	"github.com/wanlab/wanlab/units"
)

// pacer spaces a download's writes at a rate: write k of b bytes goes out
// when the bytes before it took their time at the rate, counted from the
// first write, so a late wake-up is made up by the next one and the
// average holds. The clock is a field, for tests.
type pacer struct {
	rate  units.Rate
	size  units.Size
	start time.Time
	sent  units.Size
	now   func() time.Time
}

func newPacer(rate units.Rate, size units.Size) *pacer {
	if size == 0 {
		size = DefaultWriteChunk
	}
	return &pacer{rate: rate, size: size, now: time.Now}
}

// chunk is the most one write may carry (0: no limit).
func (p *pacer) chunk() uint64 {
	if p.rate == 0 {
		return 0
	}
	return uint64(p.size)
}

// wait returns when a write of n bytes may go, or ctx's error.
func (p *pacer) wait(ctx context.Context, n int) error {
	if p.rate == 0 {
		return nil
	}
	if p.start.IsZero() {
		p.start = p.now()
	}
	due := p.start.Add(p.rate.TxTime(p.sent))
	p.sent += units.Size(n)
	d := due.Sub(p.now())
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// skip moves the schedule d later: time the application spent elsewhere,
// which the writes after it do not make up.
func (p *pacer) skip(d time.Duration) {
	if !p.start.IsZero() {
		p.start = p.start.Add(d)
	}
}
