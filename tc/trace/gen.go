package trace

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/wanlab/wanlab/units"
)

// Segment is a stretch of constant capacity for Steps (Rate 0: no
// opportunities).
type Segment struct {
	Rate     units.Rate
	Duration time.Duration
}

// Constant is a trace of rate for d: round(rate·d / 1500 B) opportunities
// spread evenly, the k-th of n at round(k·d/n) ms, so the last falls on d
// and the period is d.
func Constant(rate units.Rate, d time.Duration) (*Trace, error) {
	return Steps([]Segment{{Rate: rate, Duration: d}})
}

// Steps is a trace of consecutive constant segments, each spread as
// Constant does within its own milliseconds. When the last segment holds
// no opportunity (a rate of 0 at the end), one opportunity marks the end
// of the period, as the format needs its last line to be the period.
func Steps(segs []Segment) (*Trace, error) {
	if len(segs) == 0 {
		return nil, errors.New("no segments")
	}
	t := &Trace{}
	var start int64 // ms
	for i, s := range segs {
		ms := int64(s.Duration / time.Millisecond)
		if s.Duration%time.Millisecond != 0 || ms <= 0 {
			return nil, fmt.Errorf("segment %d: duration %s: want whole milliseconds above 0", i+1, s.Duration)
		}
		if start+ms > MaxPeriod {
			return nil, fmt.Errorf("segment %d: the trace would last beyond %d ms", i+1, MaxPeriod)
		}
		n := int64(math.Round(s.Rate.BytesPerSecond() * float64(ms) / 1e3 / OpportunityBytes))
		if n < 0 || int64(len(t.Times))+n > MaxOpportunities {
			return nil, fmt.Errorf("segment %d: %s for %s is more than %d opportunities in all", i+1, s.Rate, s.Duration, MaxOpportunities)
		}
		for k := int64(1); k <= n; k++ {
			at := start + int64(math.Round(float64(k)*float64(ms)/float64(n)))
			t.Times = append(t.Times, uint32(at))
		}
		start += ms
	}
	if len(t.Times) == 0 || int64(t.Times[len(t.Times)-1]) != start {
		if len(t.Times) == MaxOpportunities {
			return nil, fmt.Errorf("more than %d opportunities", MaxOpportunities)
		}
		t.Times = append(t.Times, uint32(start))
	}
	return t, t.Check()
}

// OnOff is a trace that alternates on (rate) for on and off (nothing) for
// off, starting on, for d in all (cut at d). See Steps for the end.
func OnOff(rate units.Rate, on, off, d time.Duration) (*Trace, error) {
	if on <= 0 || off <= 0 || d <= 0 {
		return nil, errors.New("on, off and duration must be above 0")
	}
	var segs []Segment
	for left := d; left > 0; {
		for _, s := range []Segment{{rate, on}, {0, off}} {
			s.Duration = min(s.Duration, left)
			if s.Duration > 0 {
				segs = append(segs, s)
				left -= s.Duration
			}
		}
	}
	return Steps(segs)
}

// Markov describes the cellular-like trace Cellular generates: capacity
// jumps between Levels rates spaced geometrically from Min to Max. In a
// level, the holding time is exponential with mean Hold; then the chain
// moves one level up or down with equal probability (reflecting at the
// ends), or, with probability Outage, drops into an outage of exponential
// mean OutageLen with no opportunities, after which it returns to the
// level it left. Within a level, opportunities arrive as a Poisson
// process of the level's rate divided by 1500 bytes, which gives the
// bursty millisecond pattern of measured cellular traces. The same Seed
// gives the same trace.
type Markov struct {
	Min, Max  units.Rate
	Levels    int
	Hold      time.Duration
	Outage    float64 // probability per transition, 0-1
	OutageLen time.Duration
	Duration  time.Duration
	Seed      uint64
}

// DefaultMarkov is `wanlab trace cellular`'s defaults: 8 levels from
// 1mbit to 24mbit, 500 ms mean holding time, a 2 % chance of a 300 ms
// mean outage at each transition, 30 s.
var DefaultMarkov = Markov{Min: 1_000_000, Max: 24_000_000, Levels: 8, Hold: 500 * time.Millisecond,
	Outage: 0.02, OutageLen: 300 * time.Millisecond, Duration: 30 * time.Second, Seed: 1}

// Cellular generates m's trace. See Steps for the end.
func Cellular(m Markov) (*Trace, error) {
	switch {
	case m.Levels < 1:
		return nil, errors.New("levels: want at least 1")
	case m.Min <= 0 || m.Max < m.Min:
		return nil, fmt.Errorf("rates %s-%s: want 0 < min <= max", m.Min, m.Max)
	case m.Hold <= 0 || m.OutageLen <= 0:
		return nil, errors.New("hold and outage length must be above 0")
	case !(m.Outage >= 0 && m.Outage <= 1):
		return nil, fmt.Errorf("outage %g: want a probability 0-1", m.Outage)
	case m.Duration < time.Millisecond || m.Duration/time.Millisecond > MaxPeriod:
		return nil, fmt.Errorf("duration %s: want 1ms to %d ms", m.Duration, MaxPeriod)
	}
	rng := rand.New(rand.NewPCG(m.Seed, 0x7472616365)) // "trace"
	levels := make([]float64, m.Levels)                // opportunities per ms
	for i := range levels {
		r := m.Min.BytesPerSecond()
		if m.Levels > 1 {
			r *= math.Pow(m.Max.BytesPerSecond()/m.Min.BytesPerSecond(), float64(i)/float64(m.Levels-1))
		}
		levels[i] = r / 1e3 / OpportunityBytes
	}
	end := float64(m.Duration / time.Millisecond)
	t := &Trace{}
	level := rng.IntN(m.Levels)
	now := 0.0 // ms
	for now < end {
		hold := rng.ExpFloat64() * float64(m.Hold) / float64(time.Millisecond)
		stop := min(now+hold, end)
		// Poisson arrivals at levels[level] per ms in [now, stop).
		for at := now + rng.ExpFloat64()/levels[level]; at < stop; at += rng.ExpFloat64() / levels[level] {
			if len(t.Times) == MaxOpportunities {
				return nil, fmt.Errorf("more than %d opportunities: shorten the duration", MaxOpportunities)
			}
			t.Times = append(t.Times, uint32(at)+1) // milliseconds 1..end
		}
		now = stop
		if rng.Float64() < m.Outage {
			now += rng.ExpFloat64() * float64(m.OutageLen) / float64(time.Millisecond)
			continue
		}
		switch {
		case m.Levels == 1:
		case level == 0:
			level = 1
		case level == m.Levels-1:
			level--
		case rng.IntN(2) == 0:
			level--
		default:
			level++
		}
	}
	last := uint32(end)
	for len(t.Times) > 0 && t.Times[len(t.Times)-1] > last {
		t.Times = t.Times[:len(t.Times)-1]
	}
	if len(t.Times) == 0 || t.Times[len(t.Times)-1] != last {
		t.Times = append(t.Times, last)
	}
	return t, t.Check()
}
