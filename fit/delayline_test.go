package fit

import (
	"strings"
	"testing"
	"time"
)

// lineFlow is a transfer seen near the receiver through a delay line of
// 25 ms (50 ms round trips): each round's flight of flights[k] segments
// arrives at one segment per gap from the round's start; lost[k] of the
// round's segments, from its end, never arrive, and the run shows when
// the next round's first segment comes above the hole.
func lineFlow(flights, lost []int, gap time.Duration) (*flow, []lossRun) {
	f := &flow{mss: 1000, ipFact: 1, base: 50 * time.Millisecond, isn: 1}
	var runs []lossRun
	seq := 0
	for k, n := range flights {
		round := time.Duration(k) * f.base
		if k > 0 && lost[k-1] > 0 {
			runs = append(runs, lossRun{t: round, segs: lost[k-1], before: -1, queue: -1})
		}
		for i := range n - lost[k] {
			f.data = append(f.data, record{t: round + time.Duration(i)*gap, seq: uint32(1 + seq*1000), payload: 1000, karn: -1, inflight: -1})
			seq++
		}
		seq += lost[k]
	}
	return f, runs
}

// TestDelayLineOverflows: a flight that grows into a 1,000-packet delay
// line loses its tail each time the line holds 1,000 segments, with no
// queue: the line's limit, tail drops. Runs at one level that is the
// line's usual one (a window-limited flight a bursty channel hits) or at
// levels apart (random) are not; a line that came near netem's default
// without overflowing gets room in the spec.
func TestDelayLineOverflows(t *testing.T) {
	const d = 25 * time.Millisecond
	// CUBIC's sawtooth: three overflows, four round trips apart.
	saw := []int{600, 800, 1000, 1200, 700, 800, 900, 1100, 770, 870, 970, 1070, 750}
	over := make([]int, len(saw))
	for k, n := range saw {
		over[k] = max(n-1000, 0)
	}
	f, runs := lineFlow(saw, over, 20*time.Microsecond)
	line := f.delayLineDrops(runs, "receiver", d)
	if !line.limit.Known() || line.limit.Value != 1000 || line.spec != 1000 || line.limit.Samples != 3 {
		t.Fatalf("overflows at 1,000: %+v, spec limit %d; want 1000 from 3 episodes", line.limit, line.spec)
	}
	for _, r := range runs {
		if !r.full || !r.line {
			t.Errorf("run %+v: not taken for the line's overflow", r)
		}
	}

	// At a long round trip the recovery's round loses its tail too, a
	// round after the overflow, and the sawtooth overflows again two
	// rounds later: three episodes of two runs, not one chain.
	long := []int{600, 800, 1000, 1200, 900, 700, 1100, 800, 700, 1150, 800, 700}
	longLost := []int{0, 0, 0, 200, 100, 0, 100, 50, 0, 150, 40, 0}
	f, runs = lineFlow(long, longLost, 20*time.Microsecond)
	if line := f.delayLineDrops(runs, "receiver", d); !line.limit.Known() || line.limit.Value != 1000 || line.limit.Samples != 3 {
		t.Errorf("overflows two rounds after each recovery: %+v; want 1000 from 3 episodes", line.limit)
	}

	// A window-limited flight of 800 a round, spread over it: 400 in the
	// line all along; a bursty channel takes 4 segments three times, three
	// round trips apart.
	steady := []int{800, 800, 800, 800, 800, 800, 800, 800, 800}
	burst := []int{0, 4, 0, 0, 4, 0, 0, 4, 0}
	f, runs = lineFlow(steady, burst, f.base/800)
	if line := f.delayLineDrops(runs, "receiver", d); line.limit.Known() || line.spec != 0 || !strings.Contains(line.limit.Unknown, "no limit it overflowed") {
		t.Errorf("bursty loss at a window's level: %+v, spec limit %d; want none", line.limit, line.spec)
	}
	for _, r := range runs {
		if r.full {
			t.Errorf("run %+v taken for a tail drop", r)
		}
	}

	// Runs at levels far apart: no one limit.
	f, runs = lineFlow([]int{400, 700, 1000, 300, 900}, []int{10, 0, 10, 0, 10}, 20*time.Microsecond)
	if line := f.delayLineDrops(runs, "receiver", d); line.limit.Known() {
		t.Errorf("runs at 390, 990 and 290: %+v; want no limit", line.limit)
	}

	// No loss, 960 segments in the line at most: room in the spec.
	f, runs = lineFlow([]int{500, 960, 900}, []int{0, 0, 0}, 20*time.Microsecond)
	if line := f.delayLineDrops(runs, "receiver", d); line.limit.Known() || line.spec != 1440 {
		t.Errorf("no overflow, 960 at most: %+v, spec limit %d; want unknown and 1440", line.limit, line.spec)
	}
}
