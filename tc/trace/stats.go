package trace

import (
	"time"
)

// Stats summarises a trace's capacity over one period.
type Stats struct {
	PeriodMs      uint32  `json:"period_ms"`
	Opportunities int     `json:"opportunities"`
	Bytes         int64   `json:"bytes"`
	MeanBps       float64 `json:"mean_bps"`
	// MinBps and MaxBps are the smallest and largest capacity of a
	// one-second window (the last window, when shorter, scaled to its
	// length); PerSecondBps lists every window for a period of up to
	// MaxPerSecond seconds, and is empty for a longer one (its length
	// would follow the time the trace spans, not its lines).
	MinBps       float64   `json:"min_bps"`
	MaxBps       float64   `json:"max_bps"`
	PerSecondBps []float64 `json:"per_second_bps"`
	// IdleShare is the share of the period's milliseconds that hold no
	// opportunity.
	IdleShare float64 `json:"idle_share"`
}

// MaxPerSecond is the longest period, in seconds, whose every second
// Stats.PerSecondBps lists: one day.
const MaxPerSecond = 86400

// Summarize computes t's Stats, in time proportional to t's opportunities
// (not to its period). Time runs modulo the period, so the
// opportunities at the period itself count in millisecond 0 of the next
// loop, as a looping trace delivers them.
func Summarize(t *Trace) Stats {
	period := uint32(t.Period() / time.Millisecond)
	st := Stats{PeriodMs: period, Opportunities: len(t.Times), Bytes: t.Bytes()}
	if period == 0 {
		return st
	}
	st.MeanBps = float64(st.Bytes) * 8 / (float64(period) / 1e3)
	steps := CapacitySteps(t, time.Second)
	for i, s := range steps {
		if i == 0 || s.Bps < st.MinBps {
			st.MinBps = s.Bps
		}
		if s.Bps > st.MaxBps {
			st.MaxBps = s.Bps
		}
	}
	if period <= MaxPerSecond*1000 {
		st.PerSecondBps = Capacity(t, time.Second)
	}
	busy := 0
	var prev uint32
	for i, ms := range t.Times {
		m := ms % period
		if i == 0 || m != prev {
			busy++
		}
		prev = m
	}
	// The opportunity at the period folds onto millisecond 0, which may
	// have been counted already.
	if len(t.Times) > 1 && t.Times[0] == 0 {
		busy--
	}
	st.IdleShare = 1 - float64(busy)/float64(period)
	return st
}

// Step is a stretch [Start, End) of a trace's period over which the
// capacity per window (CapacitySteps) is Bps.
type Step struct {
	Start, End time.Duration
	Bps        float64
}

// CapacitySteps is Capacity as steps: consecutive windows of equal
// capacity (the idle ones of a long outage) are one Step, so the result
// has at most about two steps per opportunity and takes time proportional
// to the opportunities, whatever the period. The steps cover the period.
func CapacitySteps(t *Trace, bin time.Duration) []Step {
	period := int64(t.Period() / time.Millisecond)
	binMs := int64(bin / time.Millisecond)
	if period == 0 || binMs <= 0 {
		return nil
	}
	n := (period + binMs - 1) / binMs
	width := func(i int64) int64 {
		if i == n-1 && period%binMs != 0 {
			return period % binMs
		}
		return binMs
	}
	var steps []Step
	add := func(from, to int64, bps float64) { // windows [from, to)
		if from >= to {
			return
		}
		end := min(to*binMs, period)
		if k := len(steps) - 1; k >= 0 && steps[k].Bps == bps {
			steps[k].End = time.Duration(end) * time.Millisecond
			return
		}
		steps = append(steps, Step{Start: time.Duration(from*binMs) * time.Millisecond, End: time.Duration(end) * time.Millisecond, Bps: bps})
	}
	// Times are sorted; an opportunity at t counts in window
	// ((t-1) mod period) / bin, so those at 0 go to the last window and
	// the others are in order.
	atZero := 0
	for atZero < len(t.Times) && t.Times[atZero] == 0 {
		atZero++
	}
	next := int64(0) // first window not yet emitted
	for i := atZero; i < len(t.Times); {
		w := (int64(t.Times[i]) - 1) / binMs
		count := 0
		for i < len(t.Times) && (int64(t.Times[i])-1)/binMs == w {
			count++
			i++
		}
		if w == n-1 {
			count += atZero
			atZero = 0
		}
		add(next, w, 0)
		add(w, w+1, float64(count)*OpportunityBytes*8/(float64(width(w))/1e3))
		next = w + 1
	}
	if atZero > 0 { // cannot happen: the period itself is an opportunity in the last window
		add(next, n-1, 0)
		add(n-1, n, float64(atZero)*OpportunityBytes*8/(float64(width(n-1))/1e3))
		next = n
	}
	add(next, n, 0)
	return steps
}

// Capacity is the trace's capacity in bits per second over consecutive
// windows of width bin across one period: an opportunity at t ms counts
// in the window holding the millisecond (t-1, t], time running modulo the
// period. The last window, when shorter than bin, is scaled to its
// length.
func Capacity(t *Trace, bin time.Duration) []float64 {
	steps := CapacitySteps(t, bin)
	if steps == nil {
		return nil
	}
	binMs := int64(bin / time.Millisecond)
	period := int64(t.Period() / time.Millisecond)
	out := make([]float64, (period+binMs-1)/binMs)
	for _, st := range steps { // bin-aligned, covering the period
		for w := int64(st.Start/time.Millisecond) / binMs; w*binMs < int64(st.End/time.Millisecond); w++ {
			out[w] = st.Bps
		}
	}
	return out
}
