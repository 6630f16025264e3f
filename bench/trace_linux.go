package bench

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/tc/trace"
)

// traceLabel names the trace row: a generated 3 s trace of 1 s steps.
const traceLabel = "trace steps 24/6/12mbit (1s each, 1500 B probes at 1.1 × the peak)"

// traceCase is the trace row's trace: three 1-second steps (24, 6 and
// 12 Mbit/s), generated, so every 100 ms window has a known capacity.
func traceCase(quick bool) (*trace.Trace, time.Duration, error) {
	tr, err := trace.Steps([]trace.Segment{{Rate: 24_000_000, Duration: time.Second},
		{Rate: 6_000_000, Duration: time.Second}, {Rate: 12_000_000, Duration: time.Second}})
	run := 6 * time.Second
	if quick {
		run = 3 * time.Second
	}
	return tr, run, err
}

// traceRows replays the trace through path p saturated by UDP and
// compares the bytes delivered in each 100 ms window with the trace's
// capacity in that window: the trace starts when the spec is set (the
// Swap), which the window grid takes as its origin.
func traceRows(ctx context.Context, l *lab.Lab, p path, lt latenessTaker, pname string, quick bool, runID uint64) ([]Measurement, error) {
	tr, dur, err := traceCase(quick)
	if err != nil {
		return nil, err
	}
	text := (&spec.Trace{Name: "steps", Times: tr.Times}).String()
	peak := 0.0
	for _, c := range trace.Capacity(tr, 100*time.Millisecond) {
		peak = max(peak, c)
	}
	const size = 1500
	pps := 1.1 * peak / 8 / size
	if err := p.Set(text, ""); err != nil {
		return nil, fmt.Errorf("%s: trace: %w", pname, err)
	}
	origin := time.Now().UnixNano() // the trace's millisecond 0, within the Set call's return
	cfg := probeConfig{PPS: pps, Count: int(pps * dur.Seconds()), IPLen: size, Drain: 300 * time.Millisecond, RunID: runID}
	if lt != nil {
		lt.TakeLateness()
	}
	run, err := udpProbe(ctx, l, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: trace: %w", pname, err)
	}
	if lt != nil {
		late := lt.TakeLateness()
		run.late = &late
	}
	if len(run.arrivals) == 0 || len(run.sends) == 0 {
		return nil, fmt.Errorf("%s: trace: no probe arrived", pname)
	}
	// Windows from 300 ms after the first send (the queue has built up)
	// to the last send: the link is saturated in all of them.
	const win = int64(100 * time.Millisecond)
	first := (run.sends[0] + int64(300*time.Millisecond) - origin + win - 1) / win
	last := (run.sends[len(run.sends)-1]-origin)/win - 1
	if last < first {
		return nil, fmt.Errorf("%s: trace: run too short", pname)
	}
	got := make([]int64, last-first+1)
	for _, a := range run.arrivals {
		// An opportunity at t ms carries (t-1, t]; the forwarding after
		// it takes well under 0.5 ms.
		k := (a.rx - int64(500*time.Microsecond) - origin) / win
		if a.rx-int64(500*time.Microsecond) >= origin && k >= first && k <= last {
			got[k-first] += int64(a.ipLen)
		}
	}
	capw := trace.Capacity(tr, 100*time.Millisecond)
	var sumGot, sumWant int64
	worst, worstK := 0.0, int64(0)
	within := 0
	for i, g := range got {
		k := first + int64(i)
		want := int64(math.Round(capw[int(k)%len(capw)] * 0.1 / 8))
		sumGot += g
		sumWant += want
		if d := math.Abs(float64(g - want)); d > worst {
			worst, worstK = d, k
		}
		if math.Abs(float64(g-want)) <= size {
			within++
		}
	}
	total := measured(traceLabel, pname, "trace bytes", "MB", float64(sumWant)/1e6, float64(sumGot)/1e6)
	total = total.withTarget("±1 %", math.Abs(total.Error) <= 0.01*total.Configured)
	total.Note = fmt.Sprintf("%d windows of 100 ms from %.1f s to %.1f s after the trace started", len(got), float64(first*win)/1e9, float64((last+1)*win)/1e9)
	w := measured(traceLabel, pname, "trace window max |err|", "B", 0, worst)
	w = w.withTarget("≤ 1 packet (1500 B)", worst <= size)
	w.Note = fmt.Sprintf("%d of %d windows within one packet; the worst at %.1f s", within, len(got), float64(worstK*win)/1e9)
	if l := run.late; l != nil {
		w.Note += fmt.Sprintf("; %d of %d packets written ≥ 1 ms after their departure", l.Late1ms, l.Packets)
	}
	return []Measurement{total, w}, nil
}
