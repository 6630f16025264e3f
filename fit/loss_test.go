package fit

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/analyzer/decode"
)

// TestSpuriousResendsAreNoLoss: near the sender, a re-send the receiver
// reports as a duplicate (a D-SACK below its cumulative ACK: the send
// before it arrived, the ACK came late) is no loss; a re-send it does
// not report is one. So is a re-send of data already acknowledged when
// it left (the analyzer's spurious retransmission).
func TestSpuriousResendsAreNoLoss(t *testing.T) {
	const mss = 1000
	ms := time.Millisecond
	f := &flow{mss: mss, base: 20 * ms, isn: 1}
	data := func(i int, at time.Duration, fl analyzer.PacketFlags) record {
		return record{t: at, seq: uint32(1 + i*mss), payload: mss, aflags: fl, karn: -1, inflight: -1}
	}
	for i := range 20 {
		f.data = append(f.data, data(i, time.Duration(i)*ms, 0))
	}
	f.data = append(f.data,
		data(5, 40*ms, analyzer.Retransmission),         // an RTO's re-send: the ACK was late
		data(10, 45*ms, analyzer.FastRetransmission),    // a real loss
		data(2, 50*ms, analyzer.SpuriousRetransmission)) // already acknowledged
	ack := func(at time.Duration, upto int, sack ...decode.SACKBlock) record {
		r := record{t: at, ack: uint32(1 + upto*mss), flags: decode.FlagACK, karn: -1, nsack: len(sack)}
		copy(r.sack[:], sack)
		return r
	}
	f.acks = []record{
		ack(30*ms, 10),
		ack(60*ms, 10, decode.SACKBlock{Left: 1 + 5*mss, Right: 1 + 6*mss}, decode.SACKBlock{Left: 1 + 11*mss, Right: 1 + 20*mss}),
		ack(70*ms, 20),
	}
	runs, sent, _ := f.losses("sender")
	if len(runs) != 1 || runs[0].segs != 1 || sent != 21 {
		t.Errorf("runs %+v, %d sent: want the one real loss (segment 10) of 21 segments", runs, sent)
	}
	if n := len(f.dsacks()); n != 1 {
		t.Errorf("%d D-SACKs, want 1", n)
	}
	if del := f.delivered(); len(del) == 0 || del[len(del)-1].v != 20*mss {
		t.Errorf("delivered %v, want %d at the end", del, 20*mss)
	}
}

// TestTailDropsAreCongestionLosses: a bottleneck's overflows cluster
// (slow start's overshoot drops several segments of one window apart,
// within two round trips) and meet the queue at its level every time;
// independent losses do neither. The cluster marks the runs as tail
// drops, and the runs later met at the cluster's queue level too; runs
// spread at random over the same segments, at any queue, stay random.
func TestTailDropsAreCongestionLosses(t *testing.T) {
	ms := time.Millisecond
	f := &flow{mss: 1000, base: 10 * ms, theta: ms}
	// 10,000 segments over 2 s, a queue sample every 2 ms.
	for i := range 10000 {
		f.data = append(f.data, record{t: time.Duration(i) * 200 * time.Microsecond, karn: -1, inflight: -1})
	}
	for i := range 1000 {
		f.queue = append(f.queue, sample{t: time.Duration(i) * 2 * ms, v: time.Duration(i%7) * 400 * time.Microsecond})
	}
	var runs []lossRun
	for i := range 6 { // the overshoot: six runs in 12 ms
		runs = append(runs, lossRun{t: 100*ms + time.Duration(i)*2*ms, segs: 2, queue: 3 * ms})
	}
	for _, at := range []int{400, 800, 1200, 1600} { // the sawtooth's tops
		runs = append(runs, lossRun{t: time.Duration(at) * ms, segs: 3, queue: 2500 * time.Microsecond})
	}
	f.clusteredDrops(runs, 10000, f.queueAt)
	for i, r := range runs {
		if !r.full {
			t.Errorf("run %d (%v, queue %v) not a tail drop", i, r.t, r.queue)
		}
	}
	// Random: 20 single runs over the transfer, at whatever queue.
	var rnd []lossRun
	for i := range 20 {
		at := time.Duration(37+i*97) * ms
		rnd = append(rnd, lossRun{t: at, segs: 1, queue: f.queueAt(at)})
	}
	f.clusteredDrops(rnd, 10000, f.queueAt)
	for i, r := range rnd {
		if r.full {
			t.Errorf("random run %d (%v, queue %v) taken for a tail drop", i, r.t, r.queue)
		}
	}
	// Offloaded: 500 records of 20 segments. Five independent losses in
	// 40 ms are what 0.5 % gives over its 800 segments (4), not a cluster
	// (as 5 of its 40 records would be).
	g := &flow{mss: 1000, base: 10 * ms, theta: ms}
	for i := range 500 {
		g.data = append(g.data, record{t: time.Duration(i) * 4 * ms, payload: 20 * 1000, karn: -1, inflight: -1})
	}
	var burst []lossRun
	for i := range 5 {
		burst = append(burst, lossRun{t: 100*ms + time.Duration(i)*4*ms, segs: 1, queue: -1})
	}
	for i := range 45 {
		burst = append(burst, lossRun{t: time.Duration(200+i*39) * ms, segs: 1, queue: -1})
	}
	g.clusteredDrops(burst, 10000, g.queueAt)
	for i, r := range burst {
		if r.full {
			t.Errorf("offloaded: random run %d (%v) taken for a tail drop", i, r.t)
		}
	}
}

// TestSmoothDelayAloneMakesNoTailDrops: a delay that rises and falls
// smoothly is a bottleneck's queue or a host's scheduling; with no
// bottleneck rate measured, random losses, which meet it as often as any
// segment does, stay random, while runs that all met its top (an
// overflow at the buffer's depth) are tail drops.
func TestSmoothDelayAloneMakesNoTailDrops(t *testing.T) {
	ms := time.Millisecond
	f := &flow{mss: 1000, base: 10 * ms, theta: ms, qRho: 0.9, qmax: 12 * ms}
	for i := range 10000 {
		f.data = append(f.data, record{t: time.Duration(i) * 200 * time.Microsecond, karn: -1, inflight: -1})
	}
	// 0-12 ms, smoothly, with a period of 200 ms.
	wave := func(t time.Duration) time.Duration {
		return time.Duration(6 * (1 - math.Cos(2*math.Pi*float64(t)/float64(200*ms))) * float64(ms))
	}
	for i := range 1000 {
		at := time.Duration(i) * 2 * ms
		f.queue = append(f.queue, sample{t: at, v: wave(at)})
	}
	var rnd, top []lossRun
	for i := range 20 {
		at := time.Duration(37+i*97) * ms
		rnd = append(rnd, lossRun{t: at, segs: 1 + i%3, queue: f.queueAt(at)})
	}
	for i := range 8 {
		at := time.Duration(100+i*200) * ms // the wave's tops
		top = append(top, lossRun{t: at, segs: 2, queue: f.queueAt(at)})
	}
	f.smoothQueueDrops(rnd, f.queueAt)
	for i, r := range rnd {
		if r.full {
			t.Errorf("random run %d (%v, queue %v) taken for a tail drop", i, r.t, r.queue)
		}
	}
	f.smoothQueueDrops(top, f.queueAt)
	for i, r := range top {
		if !r.full {
			t.Errorf("run %d at the queue's top (%v, queue %v) not a tail drop", i, r.t, r.queue)
		}
	}
	// With a bottleneck's rate measured, the queue is one: the runs at
	// half the median run's queue or more are its drops.
	f.rate = 20e6
	f.smoothQueueDrops(rnd, f.queueAt)
	n := 0
	for _, r := range rnd {
		if r.full {
			n++
		}
	}
	if n == 0 {
		t.Error("with a bottleneck's rate, no run at the queue's level was taken for a tail drop")
	}
}

// TestLongRunsAfterAFullQueueAreTailDrops: a buffer of a fraction of the
// bandwidth-delay product overflows once or twice in slow start, too few
// runs to cluster; its runs are long (a burst of consecutive segments)
// and a smooth queue held at its top just before them: tail drops. Long
// runs of a bursty channel with no queue before them, and short runs
// after a full queue, are not (other rules judge those).
func TestLongRunsAfterAFullQueueAreTailDrops(t *testing.T) {
	ms := time.Millisecond
	f := &flow{mss: 1000, base: 50 * ms, theta: 5 * ms, qRho: 0.9}
	// The queue: nil, then rising to 12 ms from 1.0 s to 1.1 s and held
	// there to 1.2 s, then nil again; a sample every 2 ms.
	for i := range 1000 {
		at := time.Duration(i) * 2 * ms
		var q time.Duration
		switch {
		case at >= 1000*ms && at < 1100*ms:
			q = (at - 1000*ms) * 12 / 100
		case at >= 1100*ms && at < 1200*ms:
			q = 12 * ms
		}
		f.queue = append(f.queue, sample{at + f.base + q, q})
		f.queueSent = append(f.queueSent, sample{at, q})
	}
	run := func(at time.Duration, segs int) lossRun {
		r := lossRun{t: at, segs: segs}
		r.before, r.beforeAge = f.queueBefore(at)
		return r
	}
	runs := []lossRun{
		run(1150*ms, 8), // the overflow: a long run, the queue full before it
		run(300*ms, 6),  // a bursty channel's long run, no queue
		run(1160*ms, 1), // one segment: not by this rule
		run(1500*ms, 4), // after the queue drained
	}
	f.longRunDrops(runs, "receiver")
	for i, want := range []bool{true, false, false, false} {
		if runs[i].full != want {
			t.Errorf("run %d (%v, %d segments, queue before %v): tail drop %v, want %v", i, runs[i].t, runs[i].segs, runs[i].before, runs[i].full, want)
		}
	}
	// A lone spike of a host's is no queue that held.
	f.queueSent[700].v = 30 * ms
	spike := []lossRun{run(f.queueSent[700].t+ms, 5)}
	f.longRunDrops(spike, "receiver")
	if spike[0].full {
		t.Errorf("a long run after a one-sample spike (queue before %v) taken for a tail drop", spike[0].before)
	}
}

// TestReorderingCountsTheSegmentsSentAhead: near the receiver, a segment
// netem sends ahead of its delay line arrives above a hole that the
// segments it overtook fill within three quarters of a round trip: one reordered
// segment (netem's share), as deep as the segments it overtook, and no
// loss; two sent ahead together are two. A hole filled a round trip
// later is a loss.
func TestReorderingCountsTheSegmentsSentAhead(t *testing.T) {
	const mss = 1000
	ms := time.Millisecond
	f := &flow{mss: mss, base: 20 * ms, isn: 1}
	var order []int
	for i := range 1000 {
		order = append(order, i)
	}
	ahead := func(at, by, n int) { // segments at..at+n-1 arrive before the by before them
		seg := append([]int(nil), order[at:at+n]...)
		copy(order[at-by+n:at+n], order[at-by:at])
		copy(order[at-by:], seg)
	}
	for k := 1; k <= 8; k++ {
		ahead(k*100, 10, 1)
	}
	ahead(950, 10, 2)
	for i, seg := range order {
		f.data = append(f.data, record{t: time.Duration(i) * 100 * time.Microsecond, seq: uint32(1 + seg*mss), payload: mss, karn: -1, inflight: -1})
	}
	// A loss: segment 520's first send never came; its re-send, 30 ms later.
	for i := range f.data {
		if f.data[i].seq == 1+520*mss {
			f.data[i].t += 30 * ms
		}
	}
	slices.SortStableFunc(f.data, func(a, b record) int { return cmp.Compare(a.t, b.t) })
	runs, sent, reordered := f.losses("receiver")
	if len(reordered) != 10 {
		t.Errorf("%d reordered segments (%v), want 10", len(reordered), reordered)
	}
	for _, d := range reordered {
		if d != 10 {
			t.Errorf("reordered depth %v segments, want 10", d)
		}
	}
	if len(runs) != 1 || runs[0].segs != 1 || sent != 1000 {
		t.Errorf("runs %+v, %d sent: want one lost segment of 1000", runs, sent)
	}
}

// TestLongRunsAtTheLinksRateAreTailDrops: with a bottleneck's rate
// measured, a long run that the link delivered at its rate just before
// is an overflow, however few queue samples show it; the same run after
// the link went idle is not (by this rule).
func TestLongRunsAtTheLinksRateAreTailDrops(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name  string
		until time.Duration // ACKs at the rate until then
		from  time.Duration // and none from 900 ms until then
		want  bool
	}{
		{"at the rate", 2 * time.Second, 0, true},
		{"after an idle", 900 * ms, 0, false},
		// A burst after a pause overflows a small buffer with nothing
		// delivered before it; the link then runs at its rate.
		{"a burst after a pause", 2 * time.Second, time.Second, true},
	} {
		f := &flow{mss: 1000, ipFact: 1, base: 50 * ms, theta: 5 * ms, rate: 10e6, isn: 1}
		n := 0
		for i := 0; time.Duration(i)*800*time.Microsecond < c.until; i++ {
			at := time.Duration(i) * 800 * time.Microsecond
			if at >= 900*ms && at < c.from {
				continue
			}
			n++
			f.acks = append(f.acks, record{t: at, ack: uint32(1 + n*1000), flags: decode.FlagACK, karn: -1})
		}
		runs := []lossRun{{t: time.Second, segs: 5, before: -1, beforeAge: -1}, {t: time.Second + 10*ms, segs: 1, before: -1, beforeAge: -1}}
		f.longRunDrops(runs, "receiver")
		if runs[0].full != c.want || runs[1].full {
			t.Errorf("%s: long run a tail drop %v (want %v), single one %v (want false)", c.name, runs[0].full, c.want, runs[1].full)
		}
	}
}

// TestBufferFromOverflows: the buffer is the queue the data met just
// before each overflow, times the rate, when the queue's top the rest of
// the time agrees (or lies above it: a stall lifts that percentile).
// Unknown, a range: overflows that met far more than the queue otherwise
// held (a stalled host's backlog), or less than it held a twentieth of
// the time (samples that missed the top), or a level under four ticks
// of the receiver's timestamp clock that timed it.
func TestBufferFromOverflows(t *testing.T) {
	ms := time.Millisecond
	const rate = 100e6
	us := time.Microsecond
	for _, c := range []struct {
		name             string
		qmax, p95, level time.Duration
		tick             time.Duration
		known            bool
		// levels, when set, are the overflows' own (level is then the
		// truth), over a queue whose sawtooth tops at level 5 % of the
		// time, and that stalls lifted to 12 ms in 0.5 % of its samples
		// (qmax is then theirs).
		levels []time.Duration
		// stalls is how often the stalls lift the queue (one sample in
		// stalls; 0: 200).
		stalls int
	}{
		{"agree", 2500 * us, 2000 * us, 2600 * us, 0, true, nil, 0},
		{"a stall lifts the top", 8 * ms, 2000 * us, 2600 * us, 0, true, nil, 0},
		{"overflows met a stall", 2500 * us, 2000 * us, 7800 * us, 0, false, nil, 0},
		{"samples missed the top", 2500 * us, 2000 * us, 1200 * us, 0, false, nil, 0},
		{"under four ticks", 2500 * us, 2000 * us, 2600 * us, ms, false, nil, 0},
		{"four ticks", 10 * ms, 9 * ms, 10 * ms, ms, true, nil, 0},
		{"stalls timed most overflows", 13500 * us, 2000 * us, 2600 * us, 0, true, []time.Duration{2600 * us, 2600 * us, 2600 * us, 12 * ms, 12500 * us, 13 * ms, 13500 * us}, 0},
		{"stalls timed two of three", 12500 * us, 2000 * us, 2400 * us, 0, false, []time.Duration{2400 * us, 12 * ms, 12500 * us}, 0},
		// A busy core: the stalls lift one sample in twenty, so their
		// level is one the queue reached too; the three overflows' levels
		// lie five times apart (the lab, 2026-12-04: 137 KiB claimed for
		// 31 KiB).
		{"stalls often, levels apart", 12500 * us, 2000 * us, 2400 * us, 0, false, []time.Duration{2400 * us, 12 * ms, 12500 * us}, 20},
	} {
		f := &flow{mss: 1448, ipFact: 1, base: 10 * ms, rate: rate, rateLo: 0.99 * rate, rateHi: 1.01 * rate, qmax: c.qmax, qp95: c.p95, qTick: c.tick, qLeg: "data to ACK"}
		var drops []lossRun
		levels := c.levels
		if levels == nil {
			levels = []time.Duration{c.level, c.level, c.level, c.level, c.level}
		} else {
			every := c.stalls
			if every == 0 {
				every = 200
			}
			for i := range 1000 {
				q := time.Duration(i%20) * c.level / 19
				if i%every == 7 {
					q = 12 * ms
				}
				f.queue = append(f.queue, sample{time.Duration(i) * ms, q})
			}
		}
		for i, l := range levels {
			drops = append(drops, lossRun{t: time.Duration(100+300*i) * ms, segs: 4, full: true, before: l, beforeAge: ms})
		}
		p := f.bufferSize(20, drops)
		want := c.level.Seconds()*rate/8 + 2*1448
		top := c.qmax.Seconds()*rate/8 + 2*1448
		switch {
		case p.Known() != c.known:
			t.Errorf("%s: known %v (%+v), want %v", c.name, p.Known(), p, c.known)
		case c.known && math.Abs(p.Value/want-1) > 0.01:
			t.Errorf("%s: buffer %.0f, want %.0f", c.name, p.Value, want)
		case !c.known && (p.Low > 1.01*top || p.High < 0.99*top || !strings.Contains(p.Unknown, "between")):
			// Each range holds the queue's top, the buffer's truth in
			// these cases.
			t.Errorf("%s: %+v, want a range about %.0f", c.name, p, top)
		}
	}
}

// TestBufferFromTheQueuesTop: with fewer than three overflows timed, the
// buffer is the queue's top times the rate where the queue held near it
// (its 95th percentile within a quarter of its 99.5th); a top far above
// what it held a twentieth of the time is a stall's wait (12.4 ms where
// a quarter of the bandwidth-delay product holds 2.5 ms at 100 Mbit/s,
// and the queue 1.5 ms), and the buffer a range.
func TestBufferFromTheQueuesTop(t *testing.T) {
	us := time.Microsecond
	const rate = 100e6
	for _, c := range []struct {
		name      string
		qmax, p95 time.Duration
		known     bool
	}{
		{"the queue held at its top", 2500 * us, 2200 * us, true},
		{"a stall's top", 12400 * us, 1500 * us, false},
	} {
		f := &flow{mss: 1448, ipFact: 1, base: 10 * time.Millisecond, rate: rate, rateLo: 0.99 * rate, rateHi: 1.01 * rate, qmax: c.qmax, qp95: c.p95, qLeg: "data to ACK"}
		drops := []lossRun{{t: time.Second, segs: 20, full: true, before: -1, beforeAge: -1}}
		p := f.bufferSize(20, drops)
		top := c.qmax.Seconds() * rate / 8
		switch {
		case p.Known() != c.known:
			t.Errorf("%s: known %v (%+v), want %v", c.name, p.Known(), p, c.known)
		case c.known && math.Abs(p.Value/top-1) > 0.01:
			t.Errorf("%s: buffer %.0f, want %.0f", c.name, p.Value, top)
		case !c.known && (p.Low > c.p95.Seconds()*rate/8 || p.High < top || !strings.Contains(p.Unknown, "between")):
			t.Errorf("%s: %+v, want a range from the 95th percentile to the top", c.name, p)
		}
	}
}

// TestBufferFromStaleSamples: overflow levels timed only by data sent
// more than a quarter of a round trip before the drops (near the
// receiver the echoes thin out in slow start) are what the buffer holds
// at the least: a filling queue rose since (105 ms sampled 99 ms before
// the drops at 200 ms, where the sender's side saw 201 ms).
func TestBufferFromStaleSamples(t *testing.T) {
	ms := time.Millisecond
	const rate = 100e6
	for _, age := range []time.Duration{10 * ms, 99 * ms} {
		f := &flow{mss: 1448, ipFact: 1, base: 200 * ms, rate: rate, rateLo: 0.99 * rate, rateHi: 1.01 * rate, qmax: 119 * ms, qp95: 100 * ms, qLeg: "ACK to data"}
		var drops []lossRun
		for i := range 8 {
			drops = append(drops, lossRun{t: 5*time.Second + time.Duration(i)*100*time.Microsecond, segs: 40, full: true, before: 105 * ms, beforeAge: age})
		}
		p := f.bufferSize(400, drops)
		least := 0.105*0.99*rate/8 + 2*1448
		switch fresh := age <= f.base/4; {
		case fresh && !p.Known():
			t.Errorf("sampled %v before: %+v, want a buffer claimed", age, p)
		case !fresh && (p.Known() || math.Abs(p.Low/least-1) > 0.01 || !strings.Contains(p.Unknown, "at least")):
			t.Errorf("sampled %v before: %+v, want at least %.0f", age, p, least)
		}
	}
}

// TestReorderingIsNoJitter: an RTT spread with no correlation and some
// segments arriving ahead is a random delay per packet only if the
// reordering is as common as such a delay makes it at the segments'
// spacing. 1.2 % reordered 100 us apart, where +-1.5 ms would reorder
// nearly half, is segments sent ahead (netem's reorder); the same 5 ms
// apart, where the delay reorders none of its own, stays jitter.
func TestReorderingIsNoJitter(t *testing.T) {
	const mss = 1000
	ms := time.Millisecond
	for _, c := range []struct {
		spacing time.Duration
		jitter  bool
	}{{100 * time.Microsecond, false}, {5 * ms, true}} {
		f := &flow{mss: mss, base: 20 * ms, isn: 1}
		order := make([]int, 1000)
		for i := range order {
			order[i] = i
		}
		for k := 1; k <= 12; k++ { // segment 80k arrives before the one before it
			order[80*k-1], order[80*k] = order[80*k], order[80*k-1]
		}
		for i, seg := range order {
			f.data = append(f.data, record{t: time.Duration(i) * c.spacing, seq: uint32(1 + seg*mss), payload: mss, karn: -1, inflight: -1})
		}
		rng := rand.New(rand.NewPCG(3, 4))
		for i := range 200 {
			f.queue = append(f.queue, sample{t: time.Duration(i) * 5 * c.spacing, v: time.Duration(rng.Float64() * 3 * float64(ms))})
		}
		p := f.jitter("receiver")
		if p.Known() != c.jitter {
			t.Errorf("spacing %v: jitter %+v, want known %v", c.spacing, p, c.jitter)
		}
	}
}

// TestJitterFromOneWayDelays: near the receiver, a delay uniform in +-J
// per packet on the data's way comes out of the first segment of each
// tick of the sender's timestamp clock, within its interval; without one
// it is the sends' own spread.
func TestJitterFromOneWayDelays(t *testing.T) {
	const mss = 1000
	ms := time.Millisecond
	for _, j := range []time.Duration{0, 2 * ms} {
		rng := rand.New(rand.NewPCG(5, 6))
		f := &flow{mss: mss, base: 20 * ms, isn: 1}
		for i := range 5000 {
			sent := time.Duration(i) * 40 * time.Microsecond // 200 Mbit/s
			d := 10*ms + time.Duration((rng.Float64()*2-1)*float64(j))
			f.data = append(f.data, record{t: sent + d, seq: uint32(1 + i*mss), payload: mss, hasTS: true, tsval: uint32(1000 + sent/ms), karn: -1, inflight: -1})
		}
		slices.SortStableFunc(f.data, func(a, b record) int { return cmp.Compare(a.t, b.t) })
		p, ok := f.owdJitter()
		want := float64(j) / float64(ms)
		switch {
		case !ok:
			t.Errorf("jitter %v: not measured", j)
		case math.Abs(p.Value-want) > 0.15*want+0.1 || p.Low > want || p.High < want:
			t.Errorf("jitter %v: %+v, want %.2f ms within its interval", j, p, want)
		}
	}
}

// TestJitterFromEverySegmentsDelay: a sender too slow for three segments a
// tick of its clock (one every 2 ms) leaves owdJitter no differences; a
// delay uniform in +-20 ms comes out of every segment's one-way delay,
// and a queue's smooth rise does not.
func TestJitterFromEverySegmentsDelay(t *testing.T) {
	const mss = 1000
	ms := time.Millisecond
	for _, c := range []struct {
		name string
		d    func(i int, rng *rand.Rand) time.Duration
		want float64 // 0: none claimed
	}{
		{"jitter", func(_ int, rng *rand.Rand) time.Duration {
			return 100*ms + time.Duration((rng.Float64()*2-1)*float64(20*ms))
		}, 20},
		{"a queue", func(i int, _ *rand.Rand) time.Duration {
			return 100*ms + time.Duration(i%500)*100*time.Microsecond
		}, 0},
	} {
		rng := rand.New(rand.NewPCG(11, 12))
		f := &flow{mss: mss, base: 200 * ms, isn: 1}
		for i := range 3000 {
			sent := time.Duration(i) * 2 * ms
			f.data = append(f.data, record{t: sent + c.d(i, rng), seq: uint32(1 + i*mss), payload: mss, hasTS: true, tsval: uint32(1000 + sent/ms), karn: -1, inflight: -1})
		}
		slices.SortStableFunc(f.data, func(a, b record) int { return cmp.Compare(a.t, b.t) })
		p, ok := f.owdJitter()
		switch {
		case c.want == 0 && ok:
			t.Errorf("%s: jitter %+v claimed", c.name, p)
		case c.want > 0 && (!ok || math.Abs(p.Value-c.want) > 0.1*c.want || p.Low > c.want || p.High < c.want):
			t.Errorf("%s: jitter %+v (measured %v), want %.0f ms within 10 %% and its interval", c.name, p, ok, c.want)
		}
	}
}

// TestLossFitFromRuns: the loss process from the runs left once the tail
// drops are out. A few long runs are no loss rate: a range, the model
// unknown, no loss stage. More runs of two than independent losses give,
// too few to call bursty, are a rate with no model.
func TestLossFitFromRuns(t *testing.T) {
	for _, c := range []struct {
		name    string
		counts  lossCounts
		model   string
		claimed bool
		spec    string
		why     string // for one not claimed
	}{
		{"none", lossCounts{sent: 10000}, "none", true, "", ""},
		{"a loss probe", lossCounts{segs: 2, runs: 2, longest: 1, sent: 10000}, "unknown", false, "", "too few for a loss process"},
		{"random", lossCounts{segs: 50, runs: 49, multi: 1, longest: 2, sent: 10000}, "random", true, "loss 0.5%", ""},
		{"bursty", lossCounts{segs: 200, runs: 60, multi: 40, longest: 9, sent: 10000}, "bursty", true, "loss gemodel ", ""},
		{"few runs", lossCounts{segs: 8, runs: 4, multi: 2, longest: 3, sent: 10000}, "unknown", true, "loss 0.08%", ""},
		{"few long runs", lossCounts{segs: 73, runs: 3, multi: 3, longest: 33, sent: 46000}, "unknown", false, "", "too few runs to tell"},
		// One long run beside a single loss: no random loss rate either
		// (the grid's delay line at 200 ms, 130 segments in 2 runs).
		{"a long run and a loss", lossCounts{segs: 130, runs: 2, multi: 1, longest: 129, sent: 46445}, "unknown", false, "", "the longest 129"},
		// A Gilbert channel at 200 ms seen over five runs (3 of them of
		// two or more, where independent losses give 0.06): no process.
		{"between random and bursty", lossCounts{segs: 12, runs: 5, multi: 3, longest: 4, sent: 931}, "unknown", true, "loss 1.29%", ""},
	} {
		lp := lossFit(c.counts, "receiver")
		p := lp.params["loss_percent"]
		switch {
		case lp.model != c.model:
			t.Errorf("%s: model %q, want %q", c.name, lp.model, c.model)
		case p.Known() != c.claimed || (p.Samples > 0) != c.claimed:
			t.Errorf("%s: loss %+v, want claimed %v", c.name, p, c.claimed)
		case !strings.HasPrefix(lp.spec, c.spec) || (c.spec == "" && lp.spec != ""):
			t.Errorf("%s: spec %q, want %q", c.name, lp.spec, c.spec)
		case !c.claimed && (p.Low != 0 || p.High <= p.Value || !strings.Contains(p.Unknown, c.why)):
			t.Errorf("%s: %+v, want a range from 0 and why", c.name, p)
		}
	}
}

// TestBufferNeedsTheRateCarried: overflows that met 12 ms behind a 100
// Mbit/s bottleneck size its buffer where the path carried its rate, and
// not where it carried a quarter of it at best (a rate from the packets'
// spacing alone: the delays were a slower host's too).
func TestBufferNeedsTheRateCarried(t *testing.T) {
	ms := time.Millisecond
	const rate = 100e6
	for _, c := range []struct {
		name    string
		carried float64 // bits/s
		known   bool
	}{{"at the rate", rate, true}, {"at a quarter of it", rate / 4, false}} {
		f := &flow{mss: 1448, ipFact: 1, base: 10 * ms, isn: 1, rate: rate, rateLo: 0.99 * rate, rateHi: 1.01 * rate,
			qmax: 12 * ms, qp95: 11 * ms, qLeg: "data to ACK"}
		per := int64(c.carried / 8 / 1000) // bytes a millisecond
		for i := range int64(500) {
			f.acks = append(f.acks, record{t: time.Duration(i) * ms, ack: uint32(1 + (i+1)*per), flags: decode.FlagACK, karn: -1})
		}
		var drops []lossRun
		for i := range 5 {
			drops = append(drops, lossRun{t: time.Duration(50+90*i) * ms, segs: 4, full: true, before: 12 * ms, beforeAge: ms})
		}
		p := f.bufferSize(20, drops)
		if p.Known() != c.known || (!c.known && !strings.Contains(p.Unknown, "under half the bottleneck's")) {
			t.Errorf("%s: %+v, want known %v", c.name, p, c.known)
		}
	}
}
