package bench

import (
	"slices"
	"time"

	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/spec"
)

// replayResult is what the spec does, on a virtual clock, to packets
// arriving exactly when the run sent its probes.
type replayResult struct {
	DelayP50, DelayP99 time.Duration
	// Reordered is the share of the packets out that left ahead of an
	// earlier arrival (engine.Simulate's definition).
	Reordered float64
	// Loss is the share of the packets in of which no copy came out.
	Loss float64
	// Duplicated is the share of extra copies among the packets that
	// came out at least once.
	Duplicated float64
}

// replay runs the probes' send times (ns, any epoch) through the spec's
// engine pipeline on a virtual clock: the model of a row, free of the
// sender's timing (a sender woken by 1 ms timers sends in trains, which
// jitter then reorders) and of any real-time error.
func replay(s *spec.Spec, sends []int64, ipLen int, seed uint64) (replayResult, error) {
	var res replayResult
	if len(sends) == 0 {
		return res, nil
	}
	pl, err := engine.NewPipeline(s, engine.Options{Direction: "model", Seed: seed})
	if err != nil {
		return res, err
	}
	pool := engine.NewPool(engine.Headroom + ipLen)
	tmpl := engine.UDPPacket(ipLen, 0)
	// Zero means "unstamped" to the engine: start the clock at 1 s.
	base := sends[0] - int64(time.Second)
	delays := make([]float64, 0, len(sends))
	order := make([]uint64, 0, len(sends))
	// The engine numbers arrivals from 0 or 1; leave room for either.
	seen := make([]bool, len(sends)+2)
	unique := 0
	batch := make([]*engine.Packet, 0, 256)
	consume := func(ps []*engine.Packet) {
		for _, p := range ps {
			delays = append(delays, float64(p.Depart-p.Arrival))
			order = append(order, p.Seq)
			if p.Seq < uint64(len(seen)) && !seen[p.Seq] {
				seen[p.Seq] = true
				unique++
			}
			pool.Put(p)
		}
	}
	for _, t := range sends {
		now := t - base
		consume(pl.Dequeue(now, batch[:0]))
		p := pool.Get()
		p.SetLen(ipLen)
		copy(p.Data, tmpl)
		p.Arrival = now
		pl.Enqueue(p, now)
	}
	for {
		next, ok := pl.NextDeparture()
		if !ok {
			break
		}
		consume(pl.Dequeue(next, batch[:0]))
	}
	slices.Sort(delays)
	res.DelayP50 = time.Duration(quantile(delays, .5))
	res.DelayP99 = time.Duration(quantile(delays, .99))
	if len(order) > 0 {
		res.Reordered = float64(engine.Overtakers(order)) / float64(len(order))
	}
	res.Loss = 1 - float64(unique)/float64(len(sends))
	if unique > 0 {
		res.Duplicated = float64(len(order)-unique) / float64(unique)
	}
	return res, nil
}
