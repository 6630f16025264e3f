package engine

import (
	"math"
	"testing"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// binomialOK reports whether k successes in n trials lie in the 99.9%
// normal-approximation interval of Binomial(n, p).
func binomialOK(k, n int, p float64) (bool, float64, float64) {
	mean := float64(n) * p
	half := 3.29 * math.Sqrt(float64(n)*p*(1-p))
	return math.Abs(float64(k)-mean) <= half, mean - half, mean + half
}

func TestRandomLossBinomial(t *testing.T) {
	const n = 200000
	for _, p := range []float64{0.1, 1, 5, 10, 50} {
		m := newLossModel(spec.Loss{Kind: spec.LossRandom, P: units.Percent(p)}, newPRNG(42))
		r := newPRNG(7)
		k := 0
		for i := 0; i < n; i++ {
			if m.event(r) {
				k++
			}
		}
		if ok, lo, hi := binomialOK(k, n, p/100); !ok {
			t.Errorf("loss %g%%: %d of %d lost, want within [%.0f, %.0f]", p, k, n, lo, hi)
		}
	}
}

// TestPipelineLossBinomial runs loss through a whole pipeline on the
// virtual clock.
func TestPipelineLossBinomial(t *testing.T) {
	for _, s := range []string{"loss 1%", "delay 5ms loss 3%", "loss 10% | tbf rate 1gbit burst 64kb limit 1mb"} {
		sp := mustParse(t, s)
		res, err := Simulate(SimConfig{Impairment: spec.PipelineImpairment(sp), Packets: 100000, PPS: 10000, Size: 500, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		p := StationaryLoss(sp.Stages[0].(*spec.Netem).Loss)
		if ok, lo, hi := binomialOK(int(res.Drops.Loss), 100000, p); !ok {
			t.Errorf("%s: %d lost, want [%.0f, %.0f]", s, res.Drops.Loss, lo, hi)
		}
		if res.Drops.Queue != 0 || res.PacketsOut+res.Drops.Loss != 100000 {
			t.Errorf("%s: out %d + loss %d, queue drops %d", s, res.PacketsOut, res.Drops.Loss, res.Drops.Queue)
		}
	}
}

// lossRuns draws n loss events and returns the loss rate and mean length
// of runs of consecutive losses.
func lossRuns(m *lossModel, r *prng, n int) (rate, meanBurst float64) {
	lost, bursts, run := 0, 0, 0
	for i := 0; i < n; i++ {
		if m.event(r) {
			lost++
			run++
			continue
		}
		if run > 0 {
			bursts++
			run = 0
		}
	}
	if run > 0 {
		bursts++
	}
	return float64(lost) / float64(n), float64(lost) / float64(bursts)
}

func TestGilbertElliott(t *testing.T) {
	const n = 2000000
	cases := []struct {
		name      string
		l         spec.Loss
		rate      float64
		burst     float64 // analytic mean burst length, 0: not checked
		tolerance float64 // relative
	}{
		// Simple Gilbert: loss iff bad; bad runs are geometric, mean 1/r.
		{"gilbert p=1% r=10%", spec.Loss{Kind: spec.LossGE, GP: 1, GR: 10, GH: 100, GK: 0}, 1.0 / 11, 10, 0.03},
		{"gilbert p=5% r=50%", spec.Loss{Kind: spec.LossGE, GP: 5, GR: 50, GH: 100, GK: 0}, 5.0 / 55, 2, 0.03},
		// Gilbert-Elliott with losses in both states: pi_bad = p/(p+r).
		{"ge p=5% r=40% 1-h=80% 1-k=1%", spec.Loss{Kind: spec.LossGE, GP: 5, GR: 40, GH: 80, GK: 1},
			40.0/45*0.01 + 5.0/45*0.8, 0, 0.03},
	}
	for _, c := range cases {
		m := newLossModel(c.l, newPRNG(11))
		rate, burst := lossRuns(&m, newPRNG(12), n)
		if math.Abs(rate-c.rate)/c.rate > c.tolerance {
			t.Errorf("%s: loss %.5f, want %.5f", c.name, rate, c.rate)
		}
		if got := StationaryLoss(c.l); math.Abs(got-c.rate) > 1e-12 {
			t.Errorf("%s: StationaryLoss %.6f, want %.6f", c.name, got, c.rate)
		}
		if c.burst != 0 && math.Abs(burst-c.burst)/c.burst > c.tolerance {
			t.Errorf("%s: mean burst %.3f, want %.3f", c.name, burst, c.burst)
		}
	}
}

// fourStateAnalytic solves the stationary distribution of the 4-state
// chain by Gaussian elimination (independently of the engine's power
// iteration) and derives the loss rate and mean loss-run length: runs
// entering state 4 last one packet, runs entering state 3 last
// 1/(p31+p32) packets on average.
func fourStateAnalytic(l spec.Loss) (rate, burst float64) {
	p13, p31, p32, p23, p14 := l.P13.Prob(), l.P31.Prob(), l.P32.Prob(), l.P23.Prob(), l.P14.Prob()
	// Transition matrix P[i][j], states 1..4 at 0..3.
	P := [4][4]float64{
		{1 - p13 - p14, 0, p13, p14},
		{0, 1 - p23, p23, 0},
		{p31, p32, 1 - p31 - p32, 0},
		{1, 0, 0, 0},
	}
	// (P^T - I) pi = 0 with the last equation replaced by sum(pi) = 1.
	var a [4][5]float64
	for i := 0; i < 4; i++ {
		for j := 0; j < 4; j++ {
			a[i][j] = P[j][i]
		}
		a[i][i]--
	}
	a[3] = [5]float64{1, 1, 1, 1, 1}
	for col := 0; col < 4; col++ {
		piv := col
		for r := col + 1; r < 4; r++ {
			if math.Abs(a[r][col]) > math.Abs(a[piv][col]) {
				piv = r
			}
		}
		a[col], a[piv] = a[piv], a[col]
		for r := 0; r < 4; r++ {
			if r != col {
				f := a[r][col] / a[col][col]
				for k := col; k < 5; k++ {
					a[r][k] -= f * a[col][k]
				}
			}
		}
	}
	var pi [4]float64
	for i := range pi {
		pi[i] = a[i][4] / a[i][i]
	}
	rate = pi[2] + pi[3]
	entries4 := pi[0] * p14
	entries3 := pi[0]*p13 + pi[1]*p23
	burst = (entries4*1 + entries3/(p31+p32)) / (entries4 + entries3)
	return rate, burst
}

func TestFourStateLoss(t *testing.T) {
	const n = 2000000
	for _, l := range []spec.Loss{
		{Kind: spec.LossState, P13: 1, P31: 30, P32: 10, P23: 20, P14: 0.5},
		{Kind: spec.LossState, P13: 5, P31: 95}, // iproute2 defaults: Bernoulli-like bursts
		{Kind: spec.LossState, P13: 2, P31: 20, P32: 40, P23: 5, P14: 1},
	} {
		want, wantBurst := fourStateAnalytic(l)
		m := newLossModel(l, newPRNG(21))
		rate, burst := lossRuns(&m, newPRNG(22), n)
		if math.Abs(rate-want)/want > 0.03 {
			t.Errorf("%+v: loss %.5f, want %.5f", l, rate, want)
		}
		if math.Abs(burst-wantBurst)/wantBurst > 0.03 {
			t.Errorf("%+v: mean burst %.3f, want %.3f", l, burst, wantBurst)
		}
		if got := StationaryLoss(l); math.Abs(got-want) > 1e-6 {
			t.Errorf("%+v: StationaryLoss %.6f, want %.6f", l, got, want)
		}
	}
}

// lag1 is the lag-1 autocorrelation of xs.
func lag1(xs []float64) float64 {
	var mean float64
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	var num, den float64
	for i, x := range xs {
		den += (x - mean) * (x - mean)
		if i > 0 {
			num += (x - mean) * (xs[i-1] - mean)
		}
	}
	return num / den
}

func TestCorrelationLag1(t *testing.T) {
	const n = 200000
	// get_crandom is an AR(1) process: lag-1 autocorrelation = rho.
	for _, rho := range []float64{0, 25, 50, 90} {
		r := newPRNG(5)
		c := newCorrelated(units.Percent(rho), r)
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = float64(c.next(r))
		}
		if got := lag1(xs); math.Abs(got-rho/100) > 0.015 {
			t.Errorf("correlation %g%%: lag-1 autocorrelation %.4f, want %.2f", rho, got, rho/100)
		}
	}
	// Correlated delay: the delays' lag-1 autocorrelation follows the
	// configured correlation (Gaussian copula: rho for the normal table,
	// 6/pi*asin(rho/2) for uniform) while their spread stays the
	// configured one; uncorrelated stays near 0.
	uni := func(rho float64) float64 { return 6 / math.Pi * math.Asin(rho/2) }
	for _, c := range []struct {
		spec      string
		want, std float64
	}{
		{"delay 100ms 10ms limit 100000", 0, 10 / math.Sqrt(3)},
		{"delay 100ms 10ms 75% limit 100000", uni(0.75), 10 / math.Sqrt(3)},
		{"delay 100ms 10ms 25% limit 100000", uni(0.25), 10 / math.Sqrt(3)},
		{"delay 100ms 10ms 50% distribution normal limit 100000", 0.5, 10},
		{"delay 100ms 10ms 90% distribution normal limit 100000", 0.9, 10},
	} {
		ds := delaysBySeq(t, c.spec, 100000, 10000)
		if got := lag1(ds); math.Abs(got-c.want) > 0.02 {
			t.Errorf("%s: lag-1 autocorrelation of delays %.4f, want %.3f", c.spec, got, c.want)
		}
		st := delayStats(append([]float64(nil), ds...))
		if math.Abs(st.Stddev-c.std)/c.std > 0.05 || math.Abs(st.Mean-100) > 0.3 {
			t.Errorf("%s: delay mean %.3f stddev %.3f, want 100 and %.3f", c.spec, st.Mean, st.Stddev, c.std)
		}
	}
	// Correlated loss: losses cluster (the indicator's lag-1
	// autocorrelation rises well above the uncorrelated ~0).
	ind := func(corr float64) float64 {
		m := newLossModel(spec.Loss{Kind: spec.LossRandom, P: 20, Corr: units.Percent(corr)}, newPRNG(9))
		r := newPRNG(10)
		xs := make([]float64, n)
		for i := range xs {
			if m.event(r) {
				xs[i] = 1
			}
		}
		return lag1(xs)
	}
	if a0, a75 := ind(0), ind(75); math.Abs(a0) > 0.01 || a75 < 0.15 {
		t.Errorf("loss 20%%: lag-1 autocorrelation %.4f uncorrelated (want ~0), %.4f at 75%% (want > 0.15)", a0, a75)
	}
}
