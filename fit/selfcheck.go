package fit

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// SelfCheck is how well the fit's own answer reproduces its capture: the
// capture's sends replayed through the fitted specs in tc/engine on a
// virtual clock (seed replaySeed), compared with what the capture saw
// (docs/fit.md, "The self-check"). JSON names are a contract.
type SelfCheck struct {
	// Sends says where the replayed sends came from and how far they
	// can be trusted; Segments counts the wire segments replayed, Cut
	// says the fit's packet budget stopped the replay before the end.
	Sends    string `json:"sends"`
	Segments int    `json:"segments_replayed"`
	Cut      bool   `json:"cut,omitempty"`
	Seed     uint64 `json:"seed"`
	// Compared is "ack" (near the sender or in the middle: when the
	// first ACK holding each segment sent once came back) or "arrival"
	// (near the receiver: when each segment arrived). ErrorP50Ms and
	// ErrorP95Ms are the median and 95th percentile of |predicted -
	// captured| over the Timed segments the model delivered.
	// BaseErrorMs is |the lowest predicted time - the lowest captured|,
	// each from its segment's send over the same segments: the path's
	// delay without its queue, what the round trip's claim stands on.
	Compared    string  `json:"compared"`
	Timed       int     `json:"timed_segments"`
	ErrorP50Ms  float64 `json:"error_p50_ms"`
	ErrorP95Ms  float64 `json:"error_p95_ms"`
	BaseErrorMs float64 `json:"base_error_ms"`
	// LossesCaptured counts the capture's losses: near the sender, the
	// first sends whose data was sent again; elsewhere, the re-sends that
	// arrived (each stands for a send the path lost). Spurious re-sends
	// are not losses. LossesExplained counts those the model dropped:
	// near the sender, the lost sends the engine dropped, plus its random
	// drops of other segments (a random loss stands for the capture's
	// by count, not by which segment), at most LossesCaptured; elsewhere,
	// all the engine's drops, at most LossesCaptured. ModelDrops counts
	// the records the engine dropped.
	LossesCaptured     int      `json:"losses_captured"`
	LossesExplained    int      `json:"losses_explained"`
	LossExplainedShare *float64 `json:"loss_explained_share"`
	ModelDrops         int      `json:"model_drops"`
	// RateGap is the largest difference between the captured and the
	// predicted in-order bytes over time (the cumulative ACK near the
	// sender, the arrivals near the receiver), as a share of the bytes
	// captured.
	RateGap float64 `json:"rate_gap"`
	// Unexplained lists the measures outside their tolerance and the
	// parameters withheld for each.
	Unexplained []Unexplained `json:"unexplained"`
	// Unchecked says why no replay ran (empty: it ran).
	Unchecked string `json:"unchecked,omitempty"`
}

// Unexplained is a part of the capture the fitted answer does not
// reproduce: the measure, its value and tolerance, and the parameters
// withheld because they depend on it.
type Unexplained struct {
	Measure   string   `json:"measure"`
	Value     float64  `json:"value"`
	Tolerance float64  `json:"tolerance"`
	Withheld  []string `json:"withheld"`
}

// The self-check's tolerances.
const (
	// timingShare and timingFloor bound the base error and the median
	// timing error: a quarter of the model's round trip, and 2 ms for
	// the hosts' own timing (a scheduler's wakeup, a timer tick), which
	// no path models. A capture put at the wrong end errs by a round trip.
	timingShare = 0.25
	timingFloor = 2 * time.Millisecond
	// tailShare and tailFloor bound the 95th percentile: half the round
	// trip, and Linux's least delayed-ACK timeout (TCP_DELACK_MIN, 40
	// ms): a receiver holds some ACKs that long, and the path model does
	// not model the receiver.
	tailShare = 0.5
	tailFloor = 40 * time.Millisecond
	// lossJudged is the fewest captured losses the share explained is
	// judged on: with fewer, the seeded draw of a random loss stage that
	// fits them alone falls under half of them too often (Poisson(10)
	// under 5 is 3 %).
	lossJudged = 10
	// lossExplainedMin is the share of the captured losses the model
	// must explain: at least half.
	lossExplainedMin = 0.5
	// rateGapMax is the largest gap between the rate curves allowed, as a
	// share of the bytes: Pantheon's criterion for an emulator's rate,
	// 15 % (Yan et al., USENIX ATC 2018).
	rateGapMax = 0.15
)

// What each measure's claims are: the parameters withheld when it fails.
var (
	baseClaims  = []string{"rtt_ms", "jitter_ms"}
	queueClaims = []string{"buffer_bytes", "burst_bytes", "delay_limit_packets"}
	tailClaims  = []string{"jitter_ms", "buffer_bytes", "burst_bytes", "delay_limit_packets"}
	lossClaims  = []string{"loss_percent", "gemodel_p_percent", "gemodel_r_percent", "congestion_losses", "buffer_bytes", "delay_limit_packets"}
	rateClaims  = []string{"rate_bps", "burst_bytes", "buffer_bytes"}
)

// checkSelf replays the capture through out's specs, measures, and
// withholds the claims of each measure outside its tolerance and the
// claims the capture contradicts (contradictions).
func checkSelf(out *Result, f *flow, budget int) *SelfCheck {
	sc := &SelfCheck{Seed: replaySeed, Unexplained: []Unexplained{}}
	if len(out.Directions) < 2 || len(f.data) == 0 {
		sc.Unchecked = "no data to replay"
		return sc
	}
	d := &out.Directions[0]
	dataSpec, err1 := spec.Parse(d.Spec)
	ackSpec, err2 := spec.Parse(out.Directions[1].Spec)
	if err1 != nil || err2 != nil {
		sc.Unchecked = fmt.Sprintf("the fitted spec does not parse: %v", errorsOf(err1, err2))
		return sc
	}
	where := d.CapturedNear
	rtt := latency(dataSpec) + latency(ackSpec)
	beyond := false
	if toR, toS := f.st.CaptureToReceiverMs, f.st.CaptureToSenderMs; where != "receiver" && f.baseSrc != "karn" && toR+toS > 0 {
		// The sends and their ACKs were timed at the capture point: the
		// path replayed is its round trip to the receiver, that leg's
		// share of the base (all of it where the base is that leg alone).
		scaleLatency(dataSpec, toR/(toR+toS))
		scaleLatency(ackSpec, toR/(toR+toS))
		beyond = where != "sender"
	}
	sends, how, cut := f.replaySends(where, latency(dataSpec), budget)
	if beyond {
		how = "the data segments as captured (" + where + "): the replay runs the path beyond the capture point only (its round trip to the receiver)"
	}
	sc.Sends, sc.Segments, sc.Cut = how, len(sends), cut
	rp, err := replay(sends, len(f.data), dataSpec, ackSpec)
	if err != nil {
		sc.Unchecked = "the engine refused the fitted spec: " + err.Error()
		return sc
	}
	sc.timing(f, rp, where)
	sc.losses(f, rp, where)
	captured := sc.rates(f, rp, where)

	judge := func(measure string, value, tol float64, claims []string) {
		if value > tol {
			u := Unexplained{Measure: measure, Value: value, Tolerance: tol}
			u.Withheld = withhold(out, claims, units.Sprintf("withheld: the self-check's %s is %.3g, beyond %.3g: the fitted path does not reproduce the capture there", measure, value, tol))
			sc.Unexplained = append(sc.Unexplained, u)
		}
	}
	if sc.Timed > 0 {
		tol := msOf(max(timingFloor, time.Duration(timingShare*float64(rtt))))
		judge(sc.Compared+"_base_error_ms", sc.BaseErrorMs, tol, baseClaims)
		judge(sc.Compared+"_error_p50_ms", sc.ErrorP50Ms, tol, queueClaims)
		judge(sc.Compared+"_error_p95_ms", sc.ErrorP95Ms, msOf(max(tailFloor, time.Duration(tailShare*float64(rtt)))), tailClaims)
	}
	if sc.LossExplainedShare != nil && sc.LossesCaptured >= lossJudged {
		judge("loss_unexplained_share", 1-*sc.LossExplainedShare, 1-lossExplainedMin, lossClaims)
	}
	judge("rate_gap", sc.RateGap, rateGapMax, rateClaims)
	// The losses the capture shows: the self-check's, or the analyzer's
	// (re-sent or filling a hole, not spurious) where it counts more.
	lost := max(sc.LossesCaptured, f.st.ResentPackets+f.st.GapFills-f.st.SpuriousRetransmissions)
	for _, c := range contradictions(d, carriedBy(f, captured, rtt, lost)) {
		u := Unexplained{Measure: c.measure, Value: c.value, Tolerance: c.tolerance}
		u.Withheld = withhold(out, c.claims, c.reason)
		sc.Unexplained = append(sc.Unexplained, u)
	}
	return sc
}

// timing compares the predicted ACK (or arrival) times with the captured.
func (sc *SelfCheck) timing(f *flow, rp *replayed, where string) {
	var errs []float64
	lowCaptured, lowPredicted := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
	compare := func(sent, captured, predicted time.Duration) {
		errs = append(errs, msOf(absDur(predicted-captured)))
		lowCaptured, lowPredicted = min(lowCaptured, captured-sent), min(lowPredicted, predicted-sent)
	}
	if where == "receiver" {
		sc.Compared = "arrival"
		for i, r := range f.data {
			if rp.depart[i] >= 0 {
				compare(rp.sent[i], r.t, rp.depart[i])
			}
		}
	} else {
		sc.Compared = "ack"
		f.firstAcked(func(i int, sent, at time.Duration) {
			if rp.ackAt[i] >= 0 {
				compare(sent, at, rp.ackAt[i])
			}
		})
	}
	s := sorted(errs)
	sc.Timed = len(s)
	sc.ErrorP50Ms, sc.ErrorP95Ms = quantile(s, 0.5), quantile(s, 0.95)
	if sc.Timed > 0 {
		sc.BaseErrorMs = msOf(absDur(lowPredicted - lowCaptured))
	}
}

// losses counts the captured losses and those the model explains.
func (sc *SelfCheck) losses(f *flow, rp *replayed, where string) {
	dropped := 0
	for i := range f.data {
		if rp.dropped[i] != 0 {
			dropped++
		}
	}
	sc.ModelDrops = dropped
	if where == "receiver" {
		for _, r := range f.data {
			if resent(r) {
				sc.LossesCaptured++
			}
		}
		sc.LossesExplained = min(sc.LossesCaptured, dropped)
	} else {
		// The first sends in offset order, to find the one whose data each
		// re-send carried again.
		var firsts []int
		for i, r := range f.data {
			if !resent(r) && r.aflags&analyzer.AnyRetransmission == 0 {
				firsts = append(firsts, i)
			}
		}
		sort.SliceStable(firsts, func(a, b int) bool { return f.off(f.data[firsts[a]].seq) < f.off(f.data[firsts[b]].seq) })
		lost := map[int]bool{}
		for _, r := range f.data {
			if !resent(r) {
				continue
			}
			o := f.off(r.seq)
			k := sort.Search(len(firsts), func(k int) bool { return f.off(f.data[firsts[k]].seq) > o }) - 1
			if k >= 0 {
				if fd := f.data[firsts[k]]; f.off(fd.seq)+int64(fd.payload) > o {
					lost[firsts[k]] = true
				}
			}
		}
		matched, random := 0, 0
		for i := range f.data {
			switch {
			case lost[i] && rp.dropped[i] != 0:
				matched++
			case !lost[i] && rp.dropped[i] == engine.DropLoss:
				random++
			}
		}
		sc.LossesCaptured = len(lost)
		sc.LossesExplained = min(sc.LossesCaptured, matched+random)
	}
	if sc.LossesCaptured > 0 {
		share := float64(sc.LossesExplained) / float64(sc.LossesCaptured)
		sc.LossExplainedShare = &share
	}
}

// rates measures the gap between the captured and the predicted rate
// curves, and returns the captured one. A segment the model dropped
// counts, in the predicted curve, as delivered when the capture had it
// delivered: the replay cannot re-send what the capture did not, so one
// drop would stall the whole in-order curve; the drops are the loss
// measure's.
func (sc *SelfCheck) rates(f *flow, rp *replayed, where string) []curvePoint {
	var top int64 // the replayed data's end: the curves compared up to it
	var arrived []delivery
	for i, r := range f.data {
		if rp.replayed[i] {
			top = max(top, f.off(r.seq)+int64(r.payload))
			arrived = append(arrived, delivery{r.t, f.off(r.seq), f.off(r.seq) + int64(r.payload)})
		}
	}
	var captured []curvePoint
	capturedAt := func(i int) time.Duration { return f.data[i].t }
	if where == "receiver" {
		captured = inOrder(arrived)
	} else {
		var cum int64
		for _, a := range f.acks {
			if o := min(f.off(a.ack), top); o > cum {
				cum = o
				captured = append(captured, curvePoint{a.t, cum})
			}
		}
		// The first cumulative ACK that covered the segment.
		capturedAt = func(i int) time.Duration {
			hi := f.off(f.data[i].seq) + int64(f.data[i].payload)
			k := sort.Search(len(captured), func(k int) bool { return captured[k].bytes >= hi })
			if k == len(captured) {
				return -1
			}
			return captured[k].t
		}
	}
	if len(captured) == 0 {
		return nil
	}
	var predicted []delivery
	for i, r := range f.data {
		if !rp.replayed[i] {
			continue
		}
		at := rp.ackAt[i]
		if where == "receiver" {
			at = rp.depart[i]
		}
		if rp.dropped[i] != 0 {
			at = capturedAt(i)
		}
		if at >= 0 {
			predicted = append(predicted, delivery{at, f.off(r.seq), f.off(r.seq) + int64(r.payload)})
		}
	}
	if total := captured[len(captured)-1].bytes; total > 0 {
		sc.RateGap = float64(curveGap(captured, inOrder(predicted))) / float64(total)
	}
	return captured
}

// scaleLatency scales the spec's netem delays by share.
func scaleLatency(s *spec.Spec, share float64) {
	for _, st := range s.Stages {
		if n, ok := st.(*spec.Netem); ok {
			n.Latency = time.Duration(float64(n.Latency) * share)
		}
	}
}

// latency is the spec's netem delay (its first netem stage's).
func latency(s *spec.Spec) time.Duration {
	for _, st := range s.Stages {
		if n, ok := st.(*spec.Netem); ok {
			return n.Latency
		}
	}
	return 0
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func errorsOf(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
