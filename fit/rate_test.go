package fit

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer/decode"
)

// synthFlow is a transfer through a 20 Mbit/s path with a 20 ms round
// trip whose RTT rises 4-12 ms above its base (smoothly) for 2 s: the
// ACKs every 1000-byte segment, as gap(i) spaces them; the flight of each
// segment as flight(i, queue) gives it.
func synthFlow(gap func(i int) time.Duration, flight func(i int, q time.Duration) int64) *flow {
	const mss = 1000
	ms := time.Millisecond
	f := &flow{mss: mss, ipFact: 1, base: 20 * ms, kmin: 20 * ms, theta: 2 * ms, isn: 1}
	t := 10 * ms
	for i := 0; t < 2*time.Second; i++ {
		q := 8*ms + time.Duration(4*math.Sin(float64(t)/float64(300*ms))*float64(ms))
		sent := t - f.base - q
		f.data = append(f.data, record{t: sent, seq: uint32(1 + i*mss), payload: mss, karn: -1, inflight: flight(i, q)})
		f.acks = append(f.acks, record{t: t, ack: uint32(1 + (i+1)*mss), flags: decode.FlagACK, karn: f.base + q})
		f.karn = append(f.karn, sample{t, f.base + q})
		f.queue = append(f.queue, sample{t, q})
		t += gap(i)
	}
	f.qmax, f.qShare, f.qRho = 12*ms, 1, 0.99
	return f
}

// TestRateNeedsABottlenecksEvidence: a queue that held while the ACKs
// came at one rate, with the RTT growing with the flight, is a
// bottleneck's, and its rate is claimed; the same rise in the RTT with
// the ACKs now held, now released together (a host that was not
// scheduled), or near the sender with the RTT apart from the flight, is
// no bottleneck: the rate is unknown, "at least" what the path carried.
func TestRateNeedsABottlenecksEvidence(t *testing.T) {
	const R = 20e6
	tick := time.Duration(1000 * 8 / R * 1e9) // one segment at R
	steady := func(int) time.Duration { return tick }
	// The flight a bottleneck holds: the path's bandwidth-delay product
	// and the queue.
	bdpFlight := func(_ int, q time.Duration) int64 { return int64((20*time.Millisecond + q).Seconds() * R / 8) }
	rng := rand.New(rand.NewPCG(1, 2))
	other := func(int, time.Duration) int64 { return 40000 + rng.Int64N(40000) }
	// Stalls: the ACKs of up to 16 ms come at once, at the same mean rate.
	var stallGap []time.Duration
	for len(stallGap) < 6000 {
		n := 1 + rng.IntN(40)
		for range n - 1 {
			stallGap = append(stallGap, 5*time.Microsecond)
		}
		stallGap = append(stallGap, time.Duration(n)*tick)
	}
	stalls := func(i int) time.Duration { return stallGap[i] }
	// Slow start's overshoot: the segments a full buffer dropped count as
	// in flight until the sender learns of them, ten times the flight
	// over the first 5 % of the samples.
	overshoot := func(i int, q time.Duration) int64 {
		if i < 250 {
			return 10 * bdpFlight(i, q)
		}
		return bdpFlight(i, q)
	}

	for _, c := range []struct {
		name   string
		f      *flow
		where  string
		claim  bool
		reason string
	}{
		{"a bottleneck near the sender", synthFlow(steady, bdpFlight), "sender", true, ""},
		{"a bottleneck near the receiver", synthFlow(steady, other), "receiver", true, ""},
		{"a bottleneck after slow start's overshoot", synthFlow(steady, overshoot), "sender", true, ""},
		{"stalled ACKs", synthFlow(stalls, bdpFlight), "sender", false, "no one rate"},
		{"stalled ACKs near the receiver", synthFlow(stalls, other), "receiver", false, "no one rate"},
		{"the RTT apart from the flight", synthFlow(steady, other), "sender", false, "not with the data in flight"},
		{"a queue too short to pin the rate", shortQueue(rng), "receiver", false, "more than 5 % either way"},
		// A host stalled 12 ms every 200 segments, the link idle and
		// the RTT's samples high all along: a quarter of the intervals
		// deliver less, the least a fraction of the rate.
		{"stalls with the link idle", synthFlow(func(i int) time.Duration {
			if i%200 == 199 {
				return 12 * time.Millisecond
			}
			return tick
		}, bdpFlight), "receiver", false, "while the link idled"},
	} {
		p := c.f.bottleneckRate(c.where)
		switch {
		case c.claim && (!p.Known() || math.Abs(p.Value/R-1) > 0.03):
			t.Errorf("%s: rate %+v, want %v within 3 %%", c.name, p, R)
		case !c.claim && p.Known():
			t.Errorf("%s: rate %+v claimed, want unknown", c.name, p)
		case !c.claim && (!strings.Contains(p.Unknown, c.reason) || !strings.Contains(p.Unknown, "at least")):
			t.Errorf("%s: %q, want %q and an \"at least\"", c.name, p.Unknown, c.reason)
		}
	}
}

// shortQueue is a queue that held for 200 ms of the 2 s, 20 intervals of
// the rate's measure, with the ACKs' rate drawn anew every 10 ms within
// 20 % of R: their middle half within 15 % and an ACK's grain, and their
// mean R, but the median's 95 % interval 10 % either way (the grid's 18
// intervals at 1 Gbit/s and 10 ms gave 929 Mbit/s so, 846-1002).
func shortQueue(rng *rand.Rand) *flow {
	const R = 20e6
	tick := time.Duration(1000 * 8 / R * 1e9)
	var mult []float64
	f := synthFlow(func(i int) time.Duration {
		for len(mult) <= i/25 {
			mult = append(mult, 0.8+0.4*rng.Float64())
		}
		return time.Duration(float64(tick) / mult[i/25])
	}, func(_ int, q time.Duration) int64 { return int64((20*time.Millisecond + q).Seconds() * R / 8) })
	for i, q := range f.queue {
		if q.t < 500*time.Millisecond || q.t > 700*time.Millisecond {
			f.queue[i].v = 0
		}
	}
	return f
}

// TestRateFromACKsOfTwo: with an ACK every two segments an interval of
// the rate's measure holds a whole number of them (12 or 13 at 20 Mbit/s
// in 10 ms), and their median count is a whole ACK off the rate, 4 %;
// the rate is within 1 % all the same.
func TestRateFromACKsOfTwo(t *testing.T) {
	const R = 20e6
	tick := time.Duration(1000 * 8 / R * 1e9)
	f := synthFlow(func(int) time.Duration { return tick }, func(_ int, q time.Duration) int64 {
		return int64((20*time.Millisecond + q).Seconds() * R / 8)
	})
	var acks []record
	for i, a := range f.acks {
		if i%2 == 1 {
			acks = append(acks, a)
		}
	}
	f.acks = acks
	if p := f.bottleneckRate("receiver"); !p.Known() || math.Abs(p.Value/R-1) > 0.01 {
		t.Errorf("rate %+v, want %v within 1 %%", p, R)
	}
}

// TestRanks: ties share their mean rank, and a monotone relation has a
// rank correlation of 1 however far its values lie.
func TestRanks(t *testing.T) {
	if got, want := ranks([]float64{3, 1, 3, 2}), []float64{2.5, 0, 2.5, 1}; !slices.Equal(got, want) {
		t.Errorf("ranks %v, want %v", got, want)
	}
	xs, ys := []float64{1, 2, 3, 4, 1000}, []float64{10, 11, 12, 13, 14}
	if r := pearson(ranks(xs), ranks(ys)); math.Abs(r-1) > 1e-12 {
		t.Errorf("rank correlation %v, want 1", r)
	}
}

// TestRateThroughAHostsWakeups: at 1 Gbit/s a millisecond of a host's
// scheduling is a tenth of a 10 ms interval's ACKs. ACKs the capture's
// host takes in at wakeups up to 4 ms apart (2 ms on average) still show
// one rate, and it is claimed; wakeups up to 8 ms apart, a stall's, show
// no one rate.
func TestRateThroughAHostsWakeups(t *testing.T) {
	const R = 1e9
	tick := time.Duration(1000 * 8 / R * 1e9)
	for _, c := range []struct {
		hold  float64 // ms: the wakeups' spacing is uniform below it
		claim bool
	}{{4, true}, {8, false}} {
		rng := rand.New(rand.NewPCG(3, 4))
		f := synthFlow(func(int) time.Duration { return tick }, func(_ int, q time.Duration) int64 { return int64((20*time.Millisecond + q).Seconds() * R / 8) })
		wake := time.Duration(0)
		for i := range f.acks {
			for wake < f.acks[i].t {
				wake += time.Duration(rng.Float64() * c.hold * float64(time.Millisecond))
			}
			f.acks[i].t = wake
		}
		p := f.bottleneckRate("receiver")
		switch {
		case c.claim && (!p.Known() || math.Abs(p.Value/R-1) > 0.03):
			t.Errorf("wakeups up to %.0f ms apart: rate %+v, want %v within 3 %%", c.hold, p, R)
		case !c.claim && (p.Known() || !strings.Contains(p.Unknown, "no one rate")):
			t.Errorf("wakeups up to %.0f ms apart: rate %+v, want \"no one rate\"", c.hold, p)
		}
	}
}
