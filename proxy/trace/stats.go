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
	// length); PerSecondBps lists every window.
	MinBps       float64   `json:"min_bps"`
	MaxBps       float64   `json:"max_bps"`
	PerSecondBps []float64 `json:"per_second_bps"`
	// IdleShare is the share of the period's milliseconds that hold no
	// opportunity.
	IdleShare float64 `json:"idle_share"`
}

// Summarize computes t's Stats. Time runs modulo the period, so the
// opportunities at the period itself count in millisecond 0 of the next
// loop, as a looping trace delivers them.
func Summarize(t *Trace) Stats {
	period := uint32(t.Period() / time.Millisecond)
	st := Stats{PeriodMs: period, Opportunities: len(t.Times), Bytes: t.Bytes()}
	if period == 0 {
		return st
	}
	st.MeanBps = float64(st.Bytes) * 8 / (float64(period) / 1e3)
	st.PerSecondBps = Capacity(t, time.Second)
	for i, b := range st.PerSecondBps {
		if i == 0 || b < st.MinBps {
			st.MinBps = b
		}
		if b > st.MaxBps {
			st.MaxBps = b
		}
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

// Capacity is the trace's capacity in bits per second over consecutive
// windows of width bin across one period: an opportunity at t ms counts
// in the window holding the millisecond (t-1, t], time running modulo the
// period. The last window, when shorter than bin, is scaled to its
// length.
func Capacity(t *Trace, bin time.Duration) []float64 {
	period := int64(t.Period() / time.Millisecond)
	binMs := int64(bin / time.Millisecond)
	if period == 0 || binMs <= 0 {
		return nil
	}
	n := (period + binMs - 1) / binMs
	out := make([]float64, n)
	for _, ms := range t.Times {
		// An opportunity at t ms ends the millisecond (t-1, t]; the one
		// at 0 is the previous loop's last.
		m := (int64(ms) + period - 1) % period
		out[m/binMs] += OpportunityBytes * 8
	}
	for i := range out {
		w := binMs
		if i == len(out)-1 && period%binMs != 0 {
			w = period % binMs
		}
		out[i] /= float64(w) / 1e3
	}
	return out
}
