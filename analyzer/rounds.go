package analyzer

import (
	"math"
	"slices"
)

// Rounds: the data a direction carried in each of its round trips, the
// view T-RAT (Zhang et al., SIGCOMM 2002) classes a transfer from. A round
// is one handshake RTT of the capture's clock starting with a data
// segment: wherever the capture was taken, a window's flight leaves (or
// arrives) within one, and the next flight one round trip later. The bytes
// of the first maxRounds rounds are kept, which is all a slow start of a
// few hundred segments takes; every round is classed by itself, and runs
// of one class make the transfer's periods.

// maxRounds is how many round trips of a direction are recorded.
const maxRounds = 32

// roundLog holds the first rounds of one direction and the periods of all
// of them. It is per-packet state (in dirAnalysis, reset with it): about
// 400 bytes, nothing allocated.
type roundLog struct {
	bytes   [maxRounds]uint32 // new data per round (saturating)
	resent  uint32            // bit i: round i carried a re-sent segment
	last    int32             // index of the last round with data (-1: none)
	started bool

	// The round being filled, and the one before it.
	cur                int64
	curBytes, prevSent int64
	curResent          bool
	curWin             int64 // the largest window the receiver offered to release it
	// nextWin: the largest window offered by ACKs that release the next
	// round's data. lag is the capture point's round trip to the data's
	// sender: an ACK passing the capture point at t releases data that
	// passes it at t + lag (near the sender at once, near the receiver a
	// round trip later), so it bounds the round that data falls in.
	nextWin, lag, rtt int64
	curStart          int64 // when it started (ns, the capture's clock)
	first             int64 // the first data segment's time
	// rounds counts the rounds closed, windowRounds those that filled
	// the receiver's window.
	rounds, windowRounds int64
	lossSeen             bool
	periods              [maxPeriods]period
	nper                 int
}

// A period is a run of rounds of one class, from start to end (ns, the
// capture's clock).
type period struct {
	class      roundClass
	rounds     int32
	start, end int64
}

// roundClass is what one round shows by itself.
type roundClass uint8

const (
	roundSteady  roundClass = iota // none of the below: the direction's own limit
	roundIdle                      // nothing new in a whole round trip: the application
	roundLoss                      // a segment sent again (or the wait for its timeout)
	roundWindow                    // the round filled the receiver's window
	roundGrowing                   // a quarter more than the round before, nothing lost yet
)

// maxPeriods bounds the periods kept per direction; later rounds join the
// last one (Periods says so).
const maxPeriods = 48

// roundGrowthStep: a round carrying this much more than the one before,
// before any loss, is the window still opening (slow start grows 1.5-2x).
const roundGrowthStep = 1.25

// add records a data segment at time t (ns) carrying newBytes never sent
// before (resent: it re-sent or filled space), with the round length rtt
// (ns; 0: unknown, nothing recorded), the first data segment's time and
// the capture point's round trip to the data's sender (lag, ns; 0 where
// unknown: the capture taken at the sender).
func (r *roundLog) add(t, first, rtt, lag, newBytes int64, resent bool) {
	if rtt <= 0 {
		return
	}
	r.rtt, r.lag = rtt, min(max(lag, 0), rtt)
	if !r.started {
		r.started, r.last, r.curStart, r.first = true, -1, first, first
	}
	// Rounds float with the data: a round starts with the first segment
	// one round trip or more after the round before started, so a flight
	// is not cut in two by a boundary (T-RAT's flights); a silence of k
	// round trips leaves k-1 empty rounds.
	if d := t - r.curStart; d >= rtt {
		next := r.cur + d/rtt
		r.close(next, resent, t, rtt)
		r.curStart = t
	}
	i := r.cur
	r.curBytes += newBytes
	r.curResent = r.curResent || resent
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
	// Flat is the length of the longest run of consecutive full rounds
	// after the first that stayed within a quarter of the run's first: a
	// plateau, whatever its level (a window reached, a buffer held, a
	// bottleneck's rate after slow start's overshoot), and PlateauBytes
	// its median round.
	Flat         int   `json:"plateau_rounds"`
	PlateauBytes int64 `json:"plateau_bytes"`
	// WindowRounds of ClassedRounds round trips (all of them, not only
	// the first 32) carried 80 % or more of the window the receiver
	// offered during them: held by the receive window.
	WindowRounds  int `json:"window_rounds"`
	ClassedRounds int `json:"classed_rounds"`
}

// plateauSpread is how far a plateau's rounds stray from its first: a
// quarter, as a window's flight varies against the rounds' boundaries.
const plateauSpread = 0.25

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
	rp := Ramp{Rounds: n, InitialBytes: int64(r.bytes[0]), WindowRounds: int(r.windowRounds), ClassedRounds: int(r.rounds)}
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
	// The longest plateau, over single rounds and, where a flight comes
	// in two bursts a round trip apart (a window drained by alternating
	// ACKs: 52 and 13 KB by turns for a 64 KiB flight), over pairs of
	// rounds: the flight per round trip is what holds flat.
	var pairs [maxRounds / 2]uint32
	for k := range min(full/2, len(pairs)) {
		pairs[k] = r.bytes[2*k] + r.bytes[2*k+1]
	}
	rp.Flat, rp.PlateauBytes = plateau(r.bytes[1:full], 1)
	if rp.Flat < plateauRounds {
		if f, b := plateau(pairs[1:max(full/2, 1)], 2); f > rp.Flat {
			rp.Flat, rp.PlateauBytes = f, b
		}
	}
	resentBefore := r.resent & (1<<uint(max(first, 0)+1) - 1)
	rp.Growing = n <= maxRounds && first >= full-2 && resentBefore == 0
	return rp
}

// plateau finds the longest run of values (each the bytes of per rounds)
// that stay within plateauSpread of the run's first, and returns the
// rounds after the first it spans and its median per round (32 values at
// most: a few hundred comparisons).
func plateau(v []uint32, per int) (rounds int, perRound int64) {
	for i := range v {
		base := float64(v[i])
		if base == 0 {
			continue
		}
		j := i + 1
		for j < len(v) && math.Abs(float64(v[j])-base) <= plateauSpread*base {
			j++
		}
		if run := (j - i - 1) * per; run > rounds {
			rounds = run
			m := slices.Clone(v[i:j])
			slices.Sort(m)
			perRound = int64(m[len(m)/2]) / int64(per)
		}
	}
	return rounds, perRound
}

// window records a window the receiver offered (bytes) in an ACK that
// passed the capture point at t (ns): it bounds the round its released
// data passes the capture point in (nextWin).
func (r *roundLog) window(t, w int64) {
	if r.started && t+r.lag >= r.curStart+r.rtt {
		r.nextWin = max(r.nextWin, w)
		return
	}
	r.curWin = max(r.curWin, w)
}

// close ends the round being filled and any empty ones up to round next
// (whose first segment re-sent data if resentNext: the empty rounds were
// the wait for a retransmission timeout, not the application's).
func (r *roundLog) close(next int64, resentNext bool, nextT, rtt int64) {
	c := roundSteady
	switch {
	case r.curResent:
		c = roundLoss
	case r.curBytes == 0:
		c = roundIdle
	case r.curWin > 0 && float64(r.curBytes) >= windowReached*float64(r.curWin):
		c = roundWindow
	case !r.lossSeen && r.prevSent > 0 && float64(r.curBytes) >= roundGrowthStep*float64(r.prevSent):
		c = roundGrowing
	}
	r.lossSeen = r.lossSeen || r.curResent
	if c == roundWindow {
		r.windowRounds++
	}
	r.rounds++
	end := min(r.curStart+rtt, nextT)
	r.push(c, 1, r.curStart, end)
	if empty := next - r.cur - 1; empty > 0 {
		c = roundIdle
		if resentNext {
			c = roundLoss
		}
		r.rounds += empty
		r.push(c, empty, end, nextT)
	}
	if r.curBytes > 0 {
		r.prevSent = r.curBytes
	}
	r.cur, r.curBytes, r.curResent, r.curWin, r.nextWin = next, 0, false, r.nextWin, 0
}

// push appends n rounds of class c from time start to end (ns).
func (r *roundLog) push(c roundClass, n, start, end int64) {
	if r.nper > 0 {
		p := &r.periods[r.nper-1]
		if p.class == c || r.nper == maxPeriods {
			p.rounds = int32(min(int64(p.rounds)+n, 1<<30))
			p.end = end
			return
		}
	}
	r.periods[r.nper] = period{class: c, rounds: int32(min(n, 1<<30)), start: start, end: end}
	r.nper++
}

// Period is one stretch of a transfer held by one limit (Direction.Limits).
type Period struct {
	Limit   string  `json:"limit"`
	StartMs float64 `json:"start_ms"` // from the direction's first data segment
	EndMs   float64 `json:"end_ms"`
	Rounds  int     `json:"rounds"`
}

// minPeriodRounds: a period of fewer round trips is the round boundaries'
// noise (a flight straddling two rounds), joined to the one before.
const minPeriodRounds = 3

// maxListedPeriods bounds Limits; a transfer that alternates more often is
// summarised in its last period.
const maxListedPeriods = 16

// periods returns the rounds' periods, the steady ones named "" (the
// direction's own limit, known once it is diagnosed: see namePeriods).
// rtt is the round length (ns).
func (r *roundLog) periodList(rtt int64) []Period {
	if !r.started || rtt <= 0 {
		return nil
	}
	if r.curBytes > 0 || r.curResent {
		r.close(r.cur+1, false, r.curStart+rtt, rtt)
	}
	if r.nper < 2 {
		return nil
	}
	out := make([]Period, 0, r.nper)
	for _, p := range r.periods[:r.nper] {
		out = append(out, Period{Limit: p.class.limit(), StartMs: float64(p.start-r.first) / 1e6,
			EndMs: float64(p.end-r.first) / 1e6, Rounds: int(p.rounds)})
	}
	return out
}

// limit names the class ("" for steady rounds).
func (c roundClass) limit() string {
	switch c {
	case roundIdle:
		return LimitApplication
	case roundLoss:
		return LimitLoss
	case roundWindow:
		return LimitReceiveWindow
	case roundGrowing:
		return LimitSlowStart
	}
	return ""
}

// namePeriods names the steady periods by the direction's limit, joins
// periods under minPeriodRounds (a flight straddling two rounds) and
// neighbours of one limit, and returns the result only where two limits
// or more alternate (nil otherwise).
func namePeriods(ps []Period, steady string) []Period {
	var out []Period
	for _, p := range ps {
		if p.Limit == "" {
			p.Limit = steady
		}
		if n := len(out); n > 0 && (out[n-1].Limit == p.Limit || p.Rounds < minPeriodRounds || n == maxListedPeriods) {
			out[n-1].EndMs, out[n-1].Rounds = p.EndMs, out[n-1].Rounds+p.Rounds
			continue
		}
		out = append(out, p)
	}
	// A first period too short to stand joins the one after it.
	if len(out) > 1 && out[0].Rounds < minPeriodRounds {
		out[1].StartMs, out[1].Rounds = out[0].StartMs, out[1].Rounds+out[0].Rounds
		out = out[1:]
	}
	merged := out[:0]
	for _, p := range out {
		if n := len(merged); n > 0 && merged[n-1].Limit == p.Limit {
			merged[n-1].EndMs, merged[n-1].Rounds = p.EndMs, merged[n-1].Rounds+p.Rounds
			continue
		}
		merged = append(merged, p)
	}
	if len(merged) < 2 {
		return nil
	}
	return merged
}
