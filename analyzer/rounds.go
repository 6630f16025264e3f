package analyzer

// Rounds: the data a direction carried in each of its first round trips,
// the view T-RAT (Zhang et al., SIGCOMM 2002) classes a transfer from. A
// round is one handshake RTT of the capture's clock from the first data
// segment: wherever the capture was taken, a window's flight leaves (or
// arrives) within one, and the next flight one round trip later. The first
// maxRounds rounds are kept, which is all a slow start of a few hundred
// segments takes; a longer transfer is judged by its counters.

// maxRounds is how many round trips of a direction are recorded.
const maxRounds = 32

// roundLog holds the first rounds of one direction. It is per-packet state
// (in dirAnalysis, reset with it): 132 bytes, nothing allocated.
type roundLog struct {
	bytes   [maxRounds]uint32 // new data per round (saturating)
	resent  uint32            // bit i: round i carried a re-sent segment
	last    int32             // index of the last round with data (-1: none)
	started bool
}

// add records a data segment at time t (ns) carrying newBytes never sent
// before (resent: it re-sent or filled space), with the round length rtt
// (ns; 0: unknown, nothing recorded) and the first data segment's time.
func (r *roundLog) add(t, first, rtt, newBytes int64, resent bool) {
	if rtt <= 0 {
		return
	}
	if !r.started {
		r.started, r.last = true, -1
	}
	i := (t - first) / rtt
	if i < 0 {
		return
	}
	if i < maxRounds {
		r.bytes[i] = uint32(min(int64(r.bytes[i])+newBytes, 1<<32-1))
		if resent {
			r.resent |= 1 << uint(i)
		}
	}
	r.last = int32(min(i, 1<<30))
}

// Ramp is what the first rounds show of a direction's window opening.
type Ramp struct {
	// Rounds is the number of round trips the data took (the last one
	// partial), 0 when no round could be timed (no handshake).
	Rounds int `json:"rounds"`
	// InitialBytes is what the first round carried: the initial window
	// (or the first write, when that was smaller).
	InitialBytes int64 `json:"initial_window_bytes"`
	// PeakBytes is the most one round carried, in round PeakRound
	// (0-based), among the recorded ones.
	PeakBytes int64 `json:"peak_round_bytes"`
	PeakRound int   `json:"peak_round"`
	// Growing: the transfer ended while the rounds still grew (the peak
	// among the last full rounds), with nothing re-sent before it.
	Growing bool `json:"still_growing"`
	// Flat is the number of rounds after the peak's first reach that
	// stayed within a quarter of it: a plateau.
	Flat int `json:"plateau_rounds"`
}

// rampGrowth is the share of the peak a round must reach to count as at
// the peak: rounds of an ACK-clocked flight vary by a segment or two
// against the capture's round boundaries.
const rampGrowth = 0.85

// ramp summarises the rounds.
func (r *roundLog) ramp() Ramp {
	if !r.started || r.last < 0 {
		return Ramp{}
	}
	n := int(r.last) + 1
	rp := Ramp{Rounds: n, InitialBytes: int64(r.bytes[0])}
	full := min(n, maxRounds)
	if n > 1 && n <= maxRounds {
		full = n - 1 // the last round is partial: the data ran out in it
	}
	first := -1
	for i := 0; i < full; i++ {
		if b := int64(r.bytes[i]); b > rp.PeakBytes {
			rp.PeakBytes, rp.PeakRound = b, i
		}
	}
	for i := 0; i < full; i++ {
		if float64(r.bytes[i]) >= rampGrowth*float64(rp.PeakBytes) {
			if first < 0 {
				first = i
			}
		}
	}
	if first >= 0 {
		for i := first + 1; i < full; i++ {
			if float64(r.bytes[i]) >= 0.75*float64(rp.PeakBytes) {
				rp.Flat++
			}
		}
	}
	resentBefore := r.resent & (1<<uint(max(first, 0)+1) - 1)
	rp.Growing = n <= maxRounds && first >= full-2 && resentBefore == 0
	return rp
}
