package engine

import (
	"fmt"
	"math"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// What a correlated netem probability really gives.
//
// netem tests "loss P CORR" (and duplicate, corrupt, reorder) as
// P >= get_crandom(), where get_crandom keeps X(n) = (1-rho)*U(n) +
// rho*X(n-1) with U uniform on [0, 1) (sch_netem.c; random.go mirrors it).
// X is not uniform: it is a weighted sum of uniforms, whose stationary law
// has mean 1/2 and variance (1-rho)/(1+rho)/12, so for P < 1/2 the event
// X <= P is much rarer than P. "loss 10% 50%" drops about 0.11 % of
// packets, not 10 % (tc-netem(8) calls random-loss correlation deprecated
// for this). The functions here compute that long-run value, so simulate,
// the proxy and kernel apply can say it next to the typed one.

// CorrelatedProbability returns the long-run share of netem's correlated
// tests "p >= get_crandom()" that come out true, with p and corr as
// probabilities in [0, 1]. It is the stationary P(X <= p), computed from
// the law of X (stationaryCDF).
func CorrelatedProbability(p, corr float64) float64 {
	switch {
	case p <= 0 || math.IsNaN(p):
		return 0
	case p >= 1:
		return 1
	}
	rho := kernelRho(corr)
	if rho == 0 {
		return p
	}
	if rho >= 1 {
		// X never moves from its first value: over runs the share is p,
		// within one run it is 0 or 1.
		return p
	}
	return stationaryCDF(rho, p)
}

// kernelRho is the weight get_crandom gives the previous value: (rho+1)/2^32
// with rho = rint(corr*UINT32_MAX), as iproute2 and sch_netem.c compute it.
func kernelRho(corr float64) float64 {
	c := probU32(units.Percent(corr * 100))
	if c == 0 {
		return 0
	}
	return (float64(c) + 1) / (1 << 32)
}

// ReorderedShare returns the long-run share of packets netem reorders with
// "reorder p corr gap G": a test is made only once G-1 packets have gone
// in order since the last reordered one, and it succeeds with q =
// CorrelatedProbability(p, corr); each success is followed by G-1 packets
// in order, so the share is q / (1 + (G-1)*q).
func ReorderedShare(p, corr float64, gap uint32) float64 {
	q := CorrelatedProbability(p, corr)
	if gap <= 1 {
		return q
	}
	return q / (1 + float64(gap-1)*q)
}

// stationaryCDF returns P(X <= x) for X = sum over k of (1-rho)*rho^k*U(k),
// the stationary law of get_crandom's recurrence.
//
// The CDF is kept at the points of a grid on [0, 1], piecewise linear in
// between; the terms are added one by one, largest first (convolving with
// a uniform on [0, c] is a moving average of the CDF over a window c,
// computed exactly for a piecewise-linear CDF from its running integral).
// Terms narrower than an eighth of a grid step only shift the law by half
// their sum, which is applied at the end. For rho close to 1 the law is a
// sum of very many small terms and the normal law of the same mean and
// variance is used.
func stationaryCDF(rho, x float64) float64 {
	if rho >= 0.995 {
		sd := math.Sqrt((1 - rho) / (1 + rho) / 12)
		return 0.5 * math.Erfc(-(x-0.5)/(sd*math.Sqrt2))
	}
	const n = 1 << 13
	const h = 1.0 / n
	F := make([]float64, n+1)
	G := make([]float64, n+1)
	I := make([]float64, n+1) // I[j] = integral of F over [0, j*h]
	c := 1 - rho
	for j := range F {
		F[j] = math.Min(float64(j)*h/c, 1)
	}
	// integral of F from 0 to x, F piecewise linear, F = 1 beyond 1.
	intF := func(x float64) float64 {
		if x <= 0 {
			return 0
		}
		if x >= 1 {
			return I[n] + (x - 1)
		}
		i := int(x / h)
		if i >= n {
			i = n - 1
		}
		s := x - float64(i)*h
		return I[i] + F[i]*s + (F[i+1]-F[i])*s*s/(2*h)
	}
	for {
		c *= rho
		if c < h/8 {
			break
		}
		for j := 1; j <= n; j++ {
			I[j] = I[j-1] + h*(F[j-1]+F[j])/2
		}
		for j := 0; j <= n; j++ {
			b := float64(j) * h
			G[j] = (intF(b) - intF(b-c)) / c
		}
		F, G = G, F
	}
	tail := c / (1 - rho) // the sum of the terms not added
	y := x - tail/2
	switch {
	case y <= 0:
		return 0
	case y >= 1:
		return 1
	}
	i := int(y / h)
	if i >= n {
		return F[n]
	}
	s := (y - float64(i)*h) / h
	return math.Max(0, math.Min(1, F[i]+(F[i+1]-F[i])*s))
}

// DelayLag1 returns the lag-1 autocorrelation of consecutive delays that
// wanlab's netem gives "delay D JITTER CORR [distribution DIST]": its
// Gaussian copula (delayCorrelation) keeps the configured correlation for
// a normal table and changes it for the others. It is measured on a quick
// seeded run of the engine's own draw (200,000 delays): the answer is the
// same on every call.
func DelayLag1(corr float64, dist spec.Distribution) float64 {
	if corr <= 0 {
		return 0
	}
	const samples = 200_000
	const sigma = 1_000_000 // 1 ms of jitter, in ns: far above the table's rounding
	r := newPRNG(1)
	dc := newDelayCorrelation(units.Percent(corr*100), r)
	table := distTable(dist)
	var prev, sx, sy, sxx, syy, sxy float64
	for i := 0; i <= samples; i++ {
		v := float64(tabledistCorrelated(0, sigma, dc.uniform(r), table))
		if i > 0 {
			sx += prev
			sy += v
			sxx += prev * prev
			syy += v * v
			sxy += prev * v
		}
		prev = v
	}
	m := float64(samples)
	cov := sxy/m - (sx/m)*(sy/m)
	vx := sxx/m - (sx/m)*(sx/m)
	vy := syy/m - (sy/m)*(sy/m)
	if vx <= 0 || vy <= 0 {
		return 0
	}
	return cov / math.Sqrt(vx*vy)
}

// Realized is a netem parameter whose effect differs from what it says.
type Realized struct {
	Param      string  `json:"param"`      // "loss", "duplicate", "corrupt", "reorder", "delay correlation"
	Configured float64 `json:"configured"` // the typed probability (or correlation), in [0, 1]
	Corr       float64 `json:"corr"`       // the typed correlation
	Realized   float64 `json:"realized"`   // what the engine and the kernel realize
	// Warn is set when the realized value is 5 % of the configured one or
	// more away from it.
	Warn bool `json:"warn"`
	// Advice names what gives the likely intent.
	Advice string `json:"advice,omitempty"`
}

// Note is the text for the configured column: "10% (50% correlation:
// about 0.11% realized)".
func (r Realized) Note() string {
	if r.Param == "delay correlation" {
		return units.Sprintf("%s (lag-1 about %.3g realized)", fmtPct(r.Configured), r.Realized)
	}
	return fmt.Sprintf("%s (%s correlation: about %s realized)", fmtPct(r.Configured), fmtPct(r.Corr), fmtPct(r.Realized))
}

// Warning is the one-line warning for r.
func (r Realized) Warning() string {
	if r.Param == "delay correlation" {
		return units.Sprintf("delay correlation %s gives consecutive delays a lag-1 correlation of about %.3g with this distribution",
			fmtPct(r.Configured), r.Realized)
	}
	w := fmt.Sprintf("%s %s %s realizes about %s, not %s: netem's correlation (get_crandom) lowers the probability it is given",
		r.Param, fmtPct(r.Configured), fmtPct(r.Corr), fmtPct(r.Realized), fmtPct(r.Configured))
	if r.Advice != "" {
		w += "; " + r.Advice
	}
	return w + "; check with wanlab simulate"
}

func fmtPct(p float64) string { return units.Sprintf("%.3g%%", 100*p) }

// RealizedOf lists the correlated probabilities of the netem stages of s
// whose realized value differs from the typed one by 5 % or more (Warn),
// and the delay correlations whose realized lag-1 correlation differs by
// as much. Uncorrelated parameters are not listed.
func RealizedOf(s *spec.Spec) []Realized {
	if s == nil {
		return nil
	}
	var out []Realized
	for _, st := range s.Stages {
		n, ok := st.(*spec.Netem)
		if !ok {
			continue
		}
		out = append(out, netemRealized(n)...)
	}
	return out
}

func netemRealized(n *spec.Netem) []Realized {
	var out []Realized
	add := func(param string, p, corr units.Percent, realized float64, advice func(p, c float64) string) {
		if corr.Prob() <= 0 || p.Prob() <= 0 {
			return
		}
		r := Realized{Param: param, Configured: p.Prob(), Corr: corr.Prob(), Realized: realized}
		r.Warn = math.Abs(realized-r.Configured) >= 0.05*r.Configured
		if r.Warn && advice != nil {
			r.Advice = advice(r.Configured, r.Corr)
		}
		out = append(out, r)
	}
	if n.Loss.Kind == spec.LossRandom {
		add("loss", n.Loss.P, n.Loss.Corr, CorrelatedProbability(n.Loss.P.Prob(), n.Loss.Corr.Prob()), lossAdvice)
	}
	add("duplicate", n.Duplicate, n.DuplicateCorr, CorrelatedProbability(n.Duplicate.Prob(), n.DuplicateCorr.Prob()), typedFor)
	add("corrupt", n.Corrupt, n.CorruptCorr, CorrelatedProbability(n.Corrupt.Prob(), n.CorruptCorr.Prob()), typedFor)
	if n.Latency > 0 {
		add("reorder", n.Reorder, n.ReorderCorr, ReorderedShare(n.Reorder.Prob(), n.ReorderCorr.Prob(), n.Gap),
			func(p, c float64) string { return typedForReorder(p, c, n.Gap) })
	}
	if n.Jitter != 0 && n.DelayCorr.Prob() > 0 {
		c := n.DelayCorr.Prob()
		lag := DelayLag1(c, n.Dist)
		out = append(out, Realized{Param: "delay correlation", Configured: c, Corr: c, Realized: lag,
			Warn: math.Abs(lag-c) >= 0.05*c})
	}
	return out
}

// lossAdvice names the Gilbert model that gives loss p in bursts: the
// two-state Markov chain with the same mean and lag-1 correlation c has
// P(loss | no loss) = p(1-c) and P(no loss | loss) = (1-p)(1-c), and mean
// burst length 1/r.
func lossAdvice(p, c float64) string {
	gp, gr := p*(1-c), (1-p)*(1-c)
	s := units.Sprintf("for %s loss in bursts of about %.2g packets use 'loss gemodel %s %s' (p = %s, r = %s)",
		fmtPct(p), 1/gr, fmtPct(gp), fmtPct(gr), fmtPct(gp), fmtPct(gr))
	if typed := typedFor(p, c); typed != "" {
		s += "; " + typed
	}
	return s
}

// typedFor says which probability to type, with the same correlation, to
// realize p, when one exists.
func typedFor(p, c float64) string {
	q, ok := invert(func(x float64) float64 { return CorrelatedProbability(x, c) }, p)
	if !ok {
		return "no probability realizes it with this correlation: drop the correlation"
	}
	return fmt.Sprintf("to realize %s with %s correlation, write %s", fmtPct(p), fmtPct(c), fmtPct(q))
}

func typedForReorder(p, c float64, gap uint32) string {
	q, ok := invert(func(x float64) float64 { return ReorderedShare(x, c, gap) }, p)
	if !ok {
		return "no probability realizes it with this correlation: drop the correlation"
	}
	return fmt.Sprintf("to realize %s with %s correlation, write %s", fmtPct(p), fmtPct(c), fmtPct(q))
}

// invert finds x in [0, 1] with f(x) = y for an increasing f, by bisection
// to a relative precision of 0.1 %.
func invert(f func(float64) float64, y float64) (float64, bool) {
	if f(1) < y*(1-1e-3) {
		return 0, false
	}
	lo, hi := 0.0, 1.0
	for range 40 {
		mid := (lo + hi) / 2
		if f(mid) < y {
			lo = mid
		} else {
			hi = mid
		}
		if hi-lo < 1e-4*y {
			break
		}
	}
	return math.Round(hi*1e5) / 1e5, true
}

// Warnings returns the one-line warnings for s (Realized.Warning of each
// entry with Warn).
func Warnings(s *spec.Spec) []string {
	var w []string
	for _, r := range RealizedOf(s) {
		if r.Warn {
			w = append(w, r.Warning())
		}
	}
	return w
}

// WarningsOfClasses returns the warnings of every leaf of a class tree,
// each prefixed with the leaf's id; a plain pipeline's are its own.
func WarningsOfClasses(cs *spec.Classes) []string {
	if s, plain := cs.Pipeline(); plain {
		return Warnings(s)
	}
	var w []string
	for _, c := range cs.LeafClasses() {
		for _, line := range Warnings(c.Spec) {
			w = append(w, "leaf "+c.ID+": "+line)
		}
	}
	return w
}
