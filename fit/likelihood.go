package fit

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// The data direction's bottleneck by replay likelihood, for a capture
// taken near the sender (where its sends are the path's input exactly).
//
// Model. The capture's own sends, cut into wire segments (replaySends),
// go through `tbf rate R burst b(R) limit B` on tc/engine's virtual
// clock (replay), b(R) = max(2 ms of R, 32 KiB) (likBurstTime,
// likBurstMin). Each segment's first ACK comes back a constant mu after
// it leaves the bucket (the round trip without the queue and the
// receiver's usual ACK delay; the delay and any split of it between the
// directions is a shift that mu takes). The alternative has no bucket:
// each ACK mu after its send, no drop.
//
// Observations: t_i, when the first ACK holding segment i (sent once)
// came back (the flow's covers), i = 1..N_t; y_j, whether wire segment j
// of a first send had its bytes sent again for a loss (the fit's walk of
// the re-sends), j = 1..N_f. Predictions: d_i(R, B), segment i's
// departure from the bucket (its send without one); z_j, the bucket
// dropped segment j.
//
// Noise. e_i = t_i - d_i - mu are independent Laplace(0, s): delayed
// ACKs, the hosts' timing and a jitter the model lacks give heavy tails,
// which a Gaussian would let dominate. y_j differs from z_j with a slip
// probability eps, independently: a loss the bucket does not make, or a
// drop the capture did not see. At the nuisance parameters' maxima (mu^
// the median of t_i - d_i, s^ the mean of |t_i - d_i - mu^| but at least
// likTimeGrain, eps^ = m / N_f with m the segments where y and z
// differ):
//
//	log L(R, B) = w T + w_d D
//	T = -N_t (ln(2 s^) + 1)
//	D = m ln(eps^) + (N_f - m) ln(1 - eps^)   (0 where m = 0)
//
// A segment the model drops has no d_i: s^ is taken over the others and
// T still counts N_t (each missing one given the mean log density of
// the rest), so that models are scored on the same data. The weight w =
// (1 - rho) / (1 + rho) tempers the timing for the residuals' lag-1
// autocorrelation rho (at the best rate with the buffer open, and held
// for the whole search): N samples of an AR(1) series carry about w N
// independent ones' information, and a queue the model misses leaves
// residuals that are anything but independent. The weight w_d tempers
// the drops the same way: an overflow drops a run of segments together,
// so the capture's loss episodes (lost segments within a round trip of
// each other), not its segments, are the independent draws: w_d is the
// episodes per lost segment.
//
// Structure. The bucket (k = 5: R, B, mu, s, eps) against none (k = 3)
// by BIC on the effective sample n = w N_t: the bucket is claimed where
// 2 (log L1 - log L0) > 2 ln(n). B is fitted with R but not claimed (it
// trades off against the assumed burst b(R)).
//
// Search and intervals. R ranges from half the sends' mean rate to a
// quarter octave above the best the path delivered over four round trips
// (a bottleneck is what limited the delivery); B from two packets to
// twice the largest flight (the open buffer: nothing dropped). R on a
// grid likRateStep apart with the buffer open (for w), then a joint grid
// likRateFine by likBufferStep apart (the surface has several peaks: a
// wrong buffer's drops leave the queue off, which a slightly wrong rate
// partly makes up for), then coordinate ascent from its best, golden
// sections on log B and log R in turn. Each interval is the set where
// log L(R^, B^) - log L <= 1.92 (chi2 with one degree of freedom at 95
// %) of the profile likelihood, found by bisection on each side, the
// other parameter re-maximized near its estimate (within a grid step:
// where the ridge runs farther, the interval is narrower than the full
// profile's). An interval that reaches the
// search's edge is open: that parameter is not claimed. The cost is at
// most about likEvals replays of at most likPacketBudget/likEvals sends
// each (the capture's first ones beyond).

// likelihood's constants.
const (
	// likPacketBudget bounds the packets replayed over one fit's search:
	// the engine replays about four million packets a second here, so
	// 4-11 s a fit.
	likPacketBudget = 40_000_000
	// likEvals bounds the replays one search takes (1,500-1,900 on the
	// kept grid runs: the joint grid, golden sections, the profile's
	// bisections): the packet budget is shared between them.
	likEvals = 2000
	// likMinTimed is the fewest timed segments a bucket is fitted on.
	likMinTimed = 200
	// likRateStep and likBufferStep are the coarse grids' steps
	// (ratios): an eighth and a half octave.
	likRateStep   = 1.090507733 // 2^(1/8)
	likBufferStep = 1.414213562 // 2^(1/2)
	// likRounds is the coordinate ascent's rounds; likRateFine the joint
	// grid's rate step (1/32 octave: the likelihood's peak in the rate
	// is a few per cent wide).
	likRounds   = 2
	likRateFine = 1.021897149 // 2^(1/32)
	// likRateSteps bounds the joint grid's rates (two octaves at
	// likRateFine), and so the search's cost, whatever the rates' range.
	likRateSteps = 64
	// likRateSpan is how far above the sends' mean rate the rate grid
	// reaches where no delivery rate was measured.
	likRateSpan = 64
	// likPeakReach is how far above the best delivery rate over four
	// round trips the rate grid reaches: a quarter octave, the grid's
	// coarse step twice (a bucket's busy stretches deliver its rate).
	likPeakReach = 1.189207115
	// likTolerance is the golden sections' stopping width on the log
	// scale: 0.2 %.
	likTolerance = 0.002
	// likMaxRho caps the lag-1 autocorrelation w is computed from, so
	// that the timing keeps some weight (w >= 0.005).
	likMaxRho = 0.99
	// likBurstTime and likBurstMin make the bucket's burst b(R): 2 ms of
	// the rate, 32 KiB at least (the lab grid's buckets, a common tbf
	// set-up: enough for a TSO super-segment and a timer tick at the
	// rates where a tick's worth is less).
	likBurstTime = 2 * time.Millisecond
	likBurstMin  = 32 * units.KiB
	// likTimeGrain floors the timing scale s: a capture's timestamp grain
	// and a host's interrupt coalescing, about 50 us, below which ACK
	// times carry no information.
	likTimeGrain = 50e-6
	// likChi2Half95 is half the 95 % quantile of chi2 with one degree of
	// freedom: the profile interval's drop in log L.
	likChi2Half95 = 1.92
)

// bucketFit is the bucket the replay likelihood fitted.
type bucketFit struct {
	// Bucket says the bucket won the BIC comparison.
	Bucket bool
	// Rate (bits/s) and Buffer (bytes, tbf's limit) with their 95 %
	// profile intervals; RateOpen, BufferOpen say the interval reached
	// the search's edge (the parameter is not identified).
	Rate, RateLo, RateHi       float64
	Buffer, BufferLo, BufferHi float64
	RateOpen, BufferOpen       bool
	// LogL0 and LogL1 are the tempered log likelihoods of no bucket and
	// of the bucket at its maximum; Weight is w, Timed N_t, Firsts N_f.
	LogL0, LogL1 float64
	Weight       float64
	Timed        int
	Firsts       int
	// Sends counts the sends replayed, Evals the replays.
	Sends, Evals int
	// Drops are the send times of the first sends' segments the bucket
	// drops at its maximum, in send order.
	Drops []time.Duration
	// Why says what was fitted, or why nothing was.
	Why string
}

// bucketLik holds what one capture's likelihood is evaluated on.
type bucketLik struct {
	sends []send
	nrec  int
	mss   int
	timed []timedAck // in the ACKs' order
	// first and lost say, by send, it is a piece of a first send, and
	// one the capture lost (its bytes were sent again for a loss).
	first, lost []bool
	// dropWeight tempers the drops' term: the loss episodes per lost
	// segment.
	dropWeight float64
	resid      []float64 // scratch: residuals, reused by every evaluation
	sorted     []float64 // scratch: the same, sorted
	evals      int
}

// timedAck is a segment sent once and when its first ACK came.
type timedAck struct {
	rec      int
	sent, at time.Duration
}

// likScore is one evaluation: the untempered log likelihood and what it
// is made of.
type likScore struct {
	timing, drops float64 // the two terms of log L, untempered
	rho           float64 // the residuals' lag-1 autocorrelation
	rp            *replayed
}

// logL is the score with the timing term tempered by w and the drops'
// by wd.
func (s likScore) logL(w, wd float64) float64 { return w*s.timing + wd*s.drops }

// newBucketLik gathers the capture's sends (at most n), ACK times and
// losses.
func (f *flow) newBucketLik(n int) *bucketLik {
	sends, _, _ := f.replaySends("sender", 0, n)
	l := &bucketLik{sends: sends, nrec: len(f.data), mss: f.mss, first: make([]bool, len(sends)), lost: make([]bool, len(sends))}
	// The byte ranges sent again for a loss (the fit's walk of the
	// capture's re-sends), merged: a piece of a first send within one
	// was lost (a super-segment's other pieces were not).
	var again [][2]int64
	for _, s := range f.walkLosses("sender").lost {
		again = append(again, [2]int64{s.start, s.end})
	}
	slices.SortFunc(again, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	for i := 1; i < len(again); i++ {
		again[i][1] = max(again[i][1], again[i-1][1])
	}
	seg := int64(max(f.mss, minReplaySegment))
	replayed := make([]bool, len(f.data))
	pieces := make([]int64, len(f.data)) // pieces of each record seen so far
	for k, s := range sends {
		replayed[s.rec] = true
		r := f.data[s.rec]
		lo := f.off(r.seq) + pieces[s.rec]*seg
		pieces[s.rec]++
		if r.aflags&analyzer.AnyRetransmission != 0 {
			continue
		}
		l.first[k] = true
		hi := min(lo+seg, f.off(r.seq)+int64(r.payload))
		i := sort.Search(len(again), func(i int) bool { return again[i][1] > lo })
		l.lost[k] = i < len(again) && again[i][0] < hi
	}
	// The losses' design effect: one overflow drops a run of segments
	// together, so the episodes (lost segments sent within a round trip
	// of the one before), not the segments, are the independent draws
	// (Kish's design effect with the segments of an episode wholly
	// correlated).
	var lost, episodes int
	last := time.Duration(math.MinInt64 / 2)
	for k, s := range sends {
		if l.lost[k] {
			if lost++; s.t-last > f.base {
				episodes++
			}
			last = s.t
		}
	}
	l.dropWeight = 1
	if lost > 0 {
		l.dropWeight = float64(episodes) / float64(lost)
	}
	f.firstAcked(func(i int, sent, at time.Duration) {
		if replayed[i] {
			l.timed = append(l.timed, timedAck{i, sent, at})
		}
	})
	l.resid = make([]float64, 0, len(l.timed))
	l.sorted = make([]float64, 0, len(l.timed))
	return l
}

// bucketSpec is the data path with a bucket of rate R (bits/s) and limit
// B (bytes).
func (l *bucketLik) bucketSpec(rate, buffer float64) (*spec.Spec, error) {
	b := max(units.Size(units.Rate(rate).BytesPerSecond()*likBurstTime.Seconds()), likBurstMin)
	tbf := fmt.Sprintf("tbf rate %dbit burst %db limit %db", int64(rate), int64(b), max(int64(buffer), int64(2*(l.mss+52))))
	return spec.Parse(tbf)
}

// eval scores a bucket (rate > 0) or none (rate 0).
func (l *bucketLik) eval(rate, buffer float64) likScore {
	l.evals++
	var rp *replayed
	if rate > 0 {
		s, err := l.bucketSpec(rate, buffer)
		if err == nil {
			rp, err = replay(l.sends, l.nrec, s, nil)
		}
		if err != nil {
			return likScore{timing: math.Inf(-1)}
		}
	}
	l.resid = l.resid[:0]
	for _, t := range l.timed {
		d := t.sent // no bucket: the send itself
		if rp != nil {
			if d = rp.depart[t.rec]; d < 0 {
				continue
			}
		}
		l.resid = append(l.resid, (t.at - d).Seconds())
	}
	sc := likScore{rp: rp}
	if len(l.resid) == 0 {
		sc.timing = math.Inf(-1)
		return sc
	}
	l.sorted = append(l.sorted[:0], l.resid...)
	slices.Sort(l.sorted)
	mu := quantile(l.sorted, 0.5)
	var s, mean float64
	for _, e := range l.resid {
		s += math.Abs(e - mu)
		mean += e
	}
	s = max(s/float64(len(l.resid)), likTimeGrain)
	mean /= float64(len(l.resid))
	var c0, c1 float64
	for k, e := range l.resid {
		c0 += (e - mean) * (e - mean)
		if k > 0 {
			c1 += (e - mean) * (l.resid[k-1] - mean)
		}
	}
	if c0 > 0 {
		sc.rho = c1 / c0
	}
	sc.timing = -float64(len(l.timed)) * (math.Log(2*s) + 1)
	// The slips: first sends the capture lost and the model passed, or
	// the other way round.
	m, n := 0, 0
	for k, first := range l.first {
		if first {
			n++
			if l.lost[k] != (rp != nil && rp.pieceDropped[k]) {
				m++
			}
		}
	}
	if m > 0 && m < n {
		eps := float64(m) / float64(n)
		sc.drops = float64(m)*math.Log(eps) + float64(n-m)*math.Log1p(-eps)
	}
	return sc
}

// golden maximizes g over [lo, hi] (log scale) by golden-section search
// to likTolerance, and returns the argument and its value.
func golden(lo, hi float64, g func(float64) float64) (float64, float64) {
	const inv = 0.6180339887498949 // 1/phi
	a, b := lo, hi
	c, d := b-inv*(b-a), a+inv*(b-a)
	gc, gd := g(c), g(d)
	for b-a > likTolerance {
		if gc >= gd {
			b, d, gd = d, c, gc
			c = b - inv*(b-a)
			gc = g(c)
		} else {
			a, c, gc = c, d, gd
			d = a + inv*(b-a)
			gd = g(d)
		}
	}
	if gc >= gd {
		return c, gc
	}
	return d, gd
}

// gridMax evaluates g at lo, lo+step, ... up to hi (log scale), and
// returns the best point's neighbours (the bracket for a golden section)
// and the best point and value.
func gridMax(lo, hi, step float64, g func(float64) float64) (a, b, best, val float64) {
	val = math.Inf(-1)
	for x := lo; x <= hi+1e-9; x += step {
		if v := g(x); v > val {
			best, val = x, v
		}
	}
	return max(lo, best-step), min(hi, best+step), best, val
}

// edge finds by bisection the point between at (the maximum) and far
// where g falls to target; open says g stays above it up to far.
func edge(at, far, target float64, g func(float64) float64) (float64, bool) {
	if g(far) >= target {
		return far, true
	}
	in, out := at, far
	for math.Abs(out-in) > 4*likTolerance {
		mid := (in + out) / 2
		if g(mid) >= target {
			in = mid
		} else {
			out = mid
		}
	}
	return (in + out) / 2, false
}

// fitBucket fits the data direction's bottleneck by replay likelihood on
// at most budget packets (the fit's budget). Near the sender only.
func (f *flow) fitBucket(budget int) *bucketFit {
	l := f.newBucketLik(min(budget, likPacketBudget/likEvals))
	fit := &bucketFit{Sends: len(l.sends), Timed: len(l.timed)}
	for _, first := range l.first {
		if first {
			fit.Firsts++
		}
	}
	if len(l.timed) < likMinTimed {
		fit.Why = fmt.Sprintf("replay likelihood: %d segments timed by their ACKs, under %d", len(l.timed), likMinTimed)
		return fit
	}
	var bytes float64
	for _, s := range l.sends {
		bytes += float64(s.ip)
	}
	span := (l.sends[len(l.sends)-1].t - l.sends[0].t).Seconds()
	if span <= 0 {
		fit.Why = "replay likelihood: the sends span no time"
		return fit
	}
	mean := bytes * 8 / span
	// The open buffer: everything the sender had in flight, twice.
	open := 2 * max(float64(f.st.MaxInFlightBytes)*f.ipFact, float64(64*(f.mss+52)))
	// A bottleneck is what limited the delivery: its rate lies below the
	// best the path delivered over four round trips (peakRate), within
	// the grid's reach above it for that measure's error.
	peak := f.peakRate(f.delivered())
	if peak <= 0 {
		peak = mean * likRateSpan
	}
	rLo, rHi := math.Log(mean/2), math.Log(max(peak*likPeakReach, mean))
	const params = 2.0 // the bucket's parameters beyond none's
	bLo, bHi := math.Log(float64(2*(f.mss+52))), math.Log(open)

	cache := map[[2]float64]likScore{}
	score := func(lr, lb float64) likScore {
		k := [2]float64{lr, lb}
		if s, ok := cache[k]; ok {
			return s
		}
		s := l.eval(math.Exp(lr), math.Exp(lb))
		s.rp = nil // keep the cache small
		cache[k] = s
		return s
	}
	w := 1.0
	byRate := func(lb float64) func(float64) float64 {
		return func(lr float64) float64 { return score(lr, lb).logL(w, l.dropWeight) }
	}
	byBuffer := func(lr float64) func(float64) float64 {
		return func(lb float64) float64 { return score(lr, lb).logL(w, l.dropWeight) }
	}
	// The rate with the buffer open (no drop: the timing alone), and w
	// at its best.
	_, _, lr, _ := gridMax(rLo, rHi, math.Log(likRateStep), byRate(bHi))
	if rho := min(max(score(lr, bHi).rho, 0), likMaxRho); rho > 0 {
		w = (1 - rho) / (1 + rho)
	}
	// The surface has more than one peak (a wrong buffer's drops leave
	// the queue off, which a slightly wrong rate partly makes up for):
	// a grid over both first, then coordinate ascent from its best, the
	// buffer and the rate by turns, each refined by a golden section
	// within its best grid point's neighbours.
	lb, best := bHi, math.Inf(-1)
	// At most likRateSteps rates: the grid coarsens over a wide range.
	step := max(math.Log(likRateFine), (rHi-rLo)/likRateSteps)
	for x := rLo; x <= rHi+1e-9; x += step {
		for y := bLo; y <= bHi+1e-9; y += math.Log(likBufferStep) {
			if v := score(x, y).logL(w, l.dropWeight); v > best {
				lr, lb, best = x, y, v
			}
		}
	}
	for range likRounds {
		lb, _ = golden(max(bLo, lb-math.Log(likBufferStep)), min(bHi, lb+math.Log(likBufferStep)), byBuffer(lr))
		lr, best = golden(max(rLo, lr-step), min(rHi, lr+step), byRate(lb))
	}

	top := l.eval(math.Exp(lr), math.Exp(lb))
	none := l.eval(0, 0)
	fit.Weight, fit.LogL1, fit.LogL0 = w, best, none.logL(w, l.dropWeight)
	n := w * float64(len(l.timed))
	fit.Bucket = 2*(fit.LogL1-fit.LogL0) > params*math.Log(n)

	// The profiles: log L at each rate maximized over the buffer within
	// a grid step of its estimate, and at each buffer over the rate
	// within a fine grid step (the ridge the two trade off along).
	profileRate := func(x float64) float64 {
		_, v := golden(max(bLo, lb-math.Log(likBufferStep)), min(bHi, lb+math.Log(likBufferStep)), byBuffer(x))
		return v
	}
	profileBuffer := func(y float64) float64 {
		_, v := golden(max(rLo, lr-math.Log(likRateFine)), min(rHi, lr+math.Log(likRateFine)), byRate(y))
		return v
	}
	target := best - likChi2Half95
	rl, openLo := edge(lr, rLo, target, profileRate)
	rh, openHi := edge(lr, rHi, target, profileRate)
	// A buffer whose interval reaches either end of the search is not
	// identified: at two packets, the drops were no bucket's overflows.
	bl, bOpenLo := edge(lb, bLo, target, profileBuffer)
	bh, bOpenHi := edge(lb, bHi, target, profileBuffer)
	bOpen := bOpenLo || bOpenHi
	fit.Rate, fit.RateLo, fit.RateHi, fit.RateOpen = math.Exp(lr), math.Exp(rl), math.Exp(rh), openLo || openHi
	fit.Buffer, fit.BufferLo, fit.BufferHi, fit.BufferOpen = math.Exp(lb), math.Exp(bl), math.Exp(bh), bOpen
	if top.rp != nil {
		for k, first := range l.first {
			if first && top.rp.pieceDropped[k] {
				fit.Drops = append(fit.Drops, l.sends[k].t)
			}
		}
	}
	fit.Evals = l.evals
	verdict := "no bucket"
	if fit.Bucket {
		verdict = "a bucket"
	}
	interval := func(v, lo, hi float64, open bool, h func(float64) string) string {
		if open {
			return h(v) + " (its 95 % interval reaches the search's edge: not identified)"
		}
		return "[" + h(lo) + ", " + h(hi) + "]"
	}
	rateH := func(v float64) string { return units.Rate(v).Human() }
	sizeH := func(v float64) string { return units.Size(v).Human() }
	fit.Why = units.Sprintf("replay likelihood: the capture's %d sends replayed through tbf in tc/engine, scored on %d ACK times (Laplace, tempered by w = %.3g for their correlation) and %d first sends' losses (a slip each the model does not make, tempered by w_d = %.3g, the loss episodes per lost segment): %s by BIC (2 dlogL %.1f against %.0f ln(n) = %.1f); rate %s %s, limit %s %s (profile likelihood, 95 %%), %d drops; %d replays",
		len(l.sends), len(l.timed), w, fit.Firsts, l.dropWeight, verdict, 2*(fit.LogL1-fit.LogL0), params, params*math.Log(n),
		rateH(fit.Rate), interval(fit.Rate, fit.RateLo, fit.RateHi, fit.RateOpen, rateH),
		sizeH(fit.Buffer), interval(fit.Buffer, fit.BufferLo, fit.BufferHi, fit.BufferOpen, sizeH), len(fit.Drops), l.evals)
	return fit
}

// explains says the bucket dropped a send within reach of t: one
// overflow's drops fall within a round trip.
func (b *bucketFit) explains(t, reach time.Duration) bool {
	k := sort.Search(len(b.Drops), func(k int) bool { return b.Drops[k] >= t-reach })
	return k < len(b.Drops) && b.Drops[k] <= t+reach
}
