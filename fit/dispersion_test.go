package fit

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer/decode"
)

// trains is a transfer seen near the receiver: flights of n 1000-byte
// segments every round trip of 20 ms for 2 s, each segment arriving
// spaced(i) after the one before, ACKed as it arrives.
func trains(n int, spaced func(i int) time.Duration) *flow {
	f := &flow{mss: 1000, ipFact: 1, base: 20 * time.Millisecond, isn: 1}
	i := 0
	for round := time.Duration(0); round < 2*time.Second; round += f.base {
		t := round
		for range n {
			f.data = append(f.data, record{t: t, seq: uint32(1 + i*1000), payload: 1000, karn: -1, inflight: -1})
			f.acks = append(f.acks, record{t: t, ack: uint32(1 + (i+1)*1000), flags: decode.FlagACK, karn: -1})
			i++
			t += spaced(i)
		}
	}
	return f
}

// TestRateFromDispersion: segments a 20 Mbit/s bottleneck sent spaced
// by their size over its rate, in flights that fill it for a part of
// each round trip (no queue would show: a buffer far smaller than the
// path), give its rate; spacings drawn anew per segment (the hosts',
// no bottleneck) give none, nor one the path never came near carrying
// (a segment train at 20 Mbit/s in flights that fill a tenth of it). A
// band of a fifth of the pairs gives the rate where the path's best
// delivery agrees with it, none where the path carried more.
func TestRateFromDispersion(t *testing.T) {
	const R = 20e6
	pkt := time.Duration(1000 * 8 / R * 1e9)
	rng := rand.New(rand.NewPCG(3, 4))
	jittered := func(int) time.Duration { return pkt + time.Duration(rng.Int64N(int64(pkt/50))) - pkt/100 }
	for _, c := range []struct {
		name   string
		f      *flow
		claim  bool
		reason string
	}{
		{"a bottleneck's spacing", trains(40, jittered), true, ""},
		{"the hosts' spacing", trains(40, func(int) time.Duration { return time.Duration(rng.Int64N(int64(2 * pkt))) }), false, "no one spacing"},
		{"a spacing the path never carried", trains(5, jittered), false, "the hosts' spacing"},
		// Flights that fill 40 % of each round trip: the path carried 8
		// Mbit/s at its best, under half the band's rate, which nearly
		// every pair holds (a short buffer's drops kept the window
		// down); a fifth of it is no bottleneck's.
		{"a strong band the path carried 40 % of", trains(20, jittered), true, ""},
		{"a strong band the path carried 20 % of", trains(10, jittered), false, "under 1/3 of it"},
		// A fifth of the pairs a bottleneck's (a short queue that empties
		// often), at the rate the path carried at its best.
		{"a fifth at the rate carried", trains(40, func(i int) time.Duration {
			if i%5 == 0 {
				return jittered(i)
			}
			return pkt/5 + time.Duration(rng.Int64N(int64(8*pkt/5)))
		}), true, ""},
		// A fifth spaced at a third of the rate, in flights the path
		// carried at 16 Mbit/s: no bottleneck passes more than its rate.
		{"a fifth under the rate carried", trains(40, func(i int) time.Duration {
			if i%5 == 0 {
				return 3 * jittered(i)
			}
			return pkt/5 + time.Duration(rng.Int64N(int64(4*pkt/5)))
		}), false, "more than a bottleneck at this rate passes"},
	} {
		p := c.f.dispersionRate("receiver")
		why := p.Unknown
		switch {
		case c.claim && (!p.Known() || math.Abs(p.Value/R-1) > 0.01):
			t.Errorf("%s: rate %+v (%s), want %v within 1 %%", c.name, p, why, R)
		case !c.claim && p.Known():
			t.Errorf("%s: rate %+v claimed, want none", c.name, p)
		case !c.claim && !strings.Contains(why, c.reason):
			t.Errorf("%s: %q, want %q", c.name, why, c.reason)
		}
	}
}
