package fit

import (
	"testing"
	"time"
)

// sawtooth is a sender's flight over time at a round trip of 20 ms: it
// grows by a segment a round trip and, at each loss, falls to beta of
// itself (the loss's reaction seen a round trip later, as a sender learns
// of it). The first event is slow start's end. It returns the flow and
// the loss runs.
func sawtooth(betas []float64) (*flow, []lossRun) {
	const mss = 1448
	ms := time.Millisecond
	f := &flow{mss: mss, base: 20 * ms}
	var runs []lossRun
	w, t := 100.0, time.Duration(0)
	lossAt := map[int]float64{}
	for k, b := range betas {
		lossAt[(k+1)*40] = b // every 40 round trips
	}
	for rt := 0; rt < 40*(len(betas)+1); rt++ {
		if b, ok := lossAt[rt]; ok {
			runs = append(runs, lossRun{t: t, segs: 1, queue: -1, full: true}) // a bottleneck's drops
			// The sender learns a round trip later: its flight holds
			// until then, then falls.
			for i := 0; i < 20; i++ {
				f.data = append(f.data, record{t: t + time.Duration(i)*ms, inflight: int64(w * mss), karn: -1})
			}
			t += 20 * ms
			w *= b
		}
		for i := 0; i < 20; i++ { // a segment a millisecond
			f.data = append(f.data, record{t: t + time.Duration(i)*ms, inflight: int64(w * mss), karn: -1})
		}
		t += 20 * ms
		w++
	}
	return f, runs
}

// TestCongestionControlSignature: the flight's fall across loss events
// names Reno (half), CUBIC (0.7) or a sender that holds it; slow start's
// end (the first event) does not count, and a mix is no signature.
func TestCongestionControlSignature(t *testing.T) {
	for _, c := range []struct {
		betas []float64
		want  string
		own   bool // the last run a loss of the path's own, not a full queue's
	}{
		{[]float64{0.3, 0.5, 0.5, 0.5}, "loss-based (reno)", false},
		{[]float64{0.3, 0.7, 0.7, 0.7}, "loss-based (cubic)", false},
		{[]float64{0.3, 1, 1, 1}, "model-based (bbr)", false},
		{[]float64{0.7, 0.5, 0.7, 0.95, 1}, "", false},
		{[]float64{0.5, 0.7}, "", false}, // one event after slow start's: not seen
		// A random loss among them: its reaction comes at whatever window
		// the sender had, and none is read.
		{[]float64{0.3, 0.7, 0.7, 0.7, 0.5}, "", true},
	} {
		f, runs := sawtooth(c.betas)
		if c.own {
			runs[len(runs)-1].full = false
		}
		got, why := f.congestionControl(runs)
		if got != c.want || why == "" {
			t.Errorf("betas %v: %q (%s), want %q", c.betas, got, why, c.want)
		}
	}
}

// TestProbeRTT: BBR's ProbeRTT (four segments in flight for 200 ms while
// sending, the receiver's window open) is found; the same flight with the
// receiver's window closed, or slow start after a timeout, is not.
func TestProbeRTT(t *testing.T) {
	const mss = 1448
	ms := time.Millisecond
	build := func(low func(i int) int64, win int64) *flow {
		f := &flow{mss: mss, base: 20 * ms}
		at := time.Duration(0)
		add := func(n int, step time.Duration, fl func(i int) int64) {
			for i := range n {
				f.data = append(f.data, record{t: at, inflight: fl(i), karn: -1})
				f.acks = append(f.acks, record{t: at, win: win})
				at += step
			}
		}
		high := func(int) int64 { return 100 * mss }
		add(200, ms, high)
		add(40, 5*ms, low)
		add(200, ms, high)
		return f
	}
	four := func(int) int64 { return 4 * mss }
	if p := build(four, 1<<20).probeRTT(); len(p) != 1 {
		t.Errorf("ProbeRTT: found %v, want one", p)
	}
	if p := build(four, 4*mss).probeRTT(); len(p) != 0 {
		t.Errorf("a closed receive window: found %v, want none", p)
	}
	// Slow start after a timeout, at a 20 ms round trip: 1, 2, 4, 8.
	ss := func(i int) int64 { return int64(1<<min(i/4, 5)) * mss }
	if p := build(ss, 1<<20).probeRTT(); len(p) != 0 {
		t.Errorf("slow start: found %v, want none", p)
	}
}
