package engine

import (
	"math"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// batchInterval returns the mean of the indicator series and the half
// width of its 99.99 % interval by batch means: the outcomes of a
// correlated test are themselves correlated, so the plain binomial interval
// would be too narrow; the means of 100 batches of 10,000 are independent
// to a good approximation, and their spread gives the standard error.
func batchInterval(hit func() bool, n int) (mean, half float64) {
	const batches = 100
	per := n / batches
	var sum, sum2 float64
	for b := 0; b < batches; b++ {
		k := 0
		for i := 0; i < per; i++ {
			if hit() {
				k++
			}
		}
		m := float64(k) / float64(per)
		sum += m
		sum2 += m * m
	}
	mean = sum / batches
	sd := math.Sqrt(math.Max(0, sum2/batches-mean*mean))
	// 3.9 standard errors: 99.99 %. Plus one event in n: a share of
	// 1e-5 is 10 events, whose batch spread is mostly zeros.
	return mean, 3.9*sd/math.Sqrt(batches) + 1/float64(n)
}

// TestCorrelatedProbabilityMatchesTheRecurrence: the computed realized
// share lies within the statistical interval of a 10^6-draw run of the
// engine's get_crandom, over a grid of probabilities and correlations.
func TestCorrelatedProbabilityMatchesTheRecurrence(t *testing.T) {
	for _, p := range []float64{0.01, 0.05, 0.1, 0.2, 0.3, 0.45, 0.6} {
		for _, c := range []float64{0.1, 0.25, 0.5, 0.75, 0.9} {
			r := newPRNG(uint64(1000*p + 10*c))
			cr := newCorrelated(units.Percent(100*c), r)
			th := probU32(units.Percent(100 * p))
			mean, half := batchInterval(func() bool { return th >= cr.next(r) }, 1_000_000)
			got := CorrelatedProbability(p, c)
			if math.Abs(got-mean) > half {
				t.Errorf("p %g corr %g: computed %.6f, engine %.6f ± %.6f", p, c, got, mean, half)
			}
		}
	}
	if got := CorrelatedProbability(0.1, 0); got != 0.1 {
		t.Errorf("uncorrelated: %g", got)
	}
	if got := CorrelatedProbability(0.1, 0.5); math.Abs(got-0.00108) > 0.00005 {
		t.Errorf("loss 10%% 50%%: %g, want about 0.108%%", got)
	}
}

// TestSimulateRealizesTheComputedShare runs whole specs through the
// engine's pipeline (10^6 packets) and finds each computed share within the
// interval of what the pipeline did.
func TestSimulateRealizesTheComputedShare(t *testing.T) {
	if testing.Short() {
		t.Skip("three runs of 10^6 packets")
	}
	const n = 1_000_000
	for _, tc := range []struct {
		text  string
		param string
		count func(*SimResult) uint64
	}{
		{"loss 20% 50%", "loss", func(r *SimResult) uint64 { return r.Drops.Loss }},
		{"duplicate 30% 40%", "duplicate", func(r *SimResult) uint64 { return r.Duplicated }},
		{"delay 1ms reorder 25% 50% gap 3", "reorder", func(r *SimResult) uint64 { return r.Reordered }},
	} {
		sp, err := spec.Parse(tc.text)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Simulate(SimConfig{Impairment: spec.PipelineImpairment(sp), Packets: n, PPS: 10000, Size: 100, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		var want float64
		for _, z := range res.Realized {
			if z.Param == tc.param {
				want = z.Realized
			}
		}
		got := float64(tc.count(res)) / n
		// The outcomes come in short correlated runs: allow 6 binomial
		// standard errors (the batch-means test above checks the
		// formula tightly).
		sd := math.Sqrt(want * (1 - want) / n)
		if math.Abs(got-want) > 6*sd+2.0/n {
			t.Errorf("%s: pipeline %.5f, computed %.5f (sd %.5f)", tc.text, got, want, sd)
		}
		if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], tc.param) {
			t.Errorf("%s: warnings %q", tc.text, res.Warnings)
		}
	}
}

func TestReorderedShareWithGap(t *testing.T) {
	if got := ReorderedShare(1, 0, 5); math.Abs(got-0.2) > 1e-12 {
		t.Errorf("reorder 100%% gap 5: %g, want every 5th packet", got)
	}
	q := CorrelatedProbability(0.25, 0.5)
	if got := ReorderedShare(0.25, 0.5, 3); math.Abs(got-q/(1+2*q)) > 1e-12 {
		t.Errorf("gap 3: %g", got)
	}
}

// TestWarnings: a warning (with gemodel advice for loss) where the realized
// value is 5 % or more off, none for uncorrelated or weakly correlated
// probabilities, and the spec itself is not changed.
func TestWarnings(t *testing.T) {
	for text, want := range map[string][]string{
		"loss 10% 50%": {"loss 10% 50% realizes about 0.108%", "loss gemodel 5% 45%", "bursts of about 2.2 packets"},
		"duplicate 5% 50% reorder 10% 30% delay 1ms": {"duplicate 5% 50% realizes about 0.00162%", "reorder 10% 30% realizes about 1.15%"},
		"corrupt 40% 60%":                        {"corrupt 40% 60% realizes about"},
		"loss 10%":                               nil,
		"loss 10% 0.1%":                          nil,
		"loss 50% 90%":                           nil, // the law of X is symmetric about 1/2
		"delay 10ms 5ms 25% distribution normal": nil,
		"loss gemodel 1% 10%":                    nil,
	} {
		sp, err := spec.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		canon := sp.String()
		w := strings.Join(Warnings(sp), "\n")
		if want == nil && w != "" {
			t.Errorf("%q: unexpected warning %q", text, w)
		}
		for _, s := range want {
			if !strings.Contains(w, s) {
				t.Errorf("%q: warning %q lacks %q", text, w, s)
			}
		}
		if sp.String() != canon {
			t.Errorf("%q: spec changed to %q", text, sp.String())
		}
	}
}

// TestDelayLag1: the Gaussian copula keeps a normal table's correlation
// and lowers a uniform jitter's to 6/pi*asin(rho/2).
func TestDelayLag1(t *testing.T) {
	if got := DelayLag1(0.5, spec.DistNormal); math.Abs(got-0.5) > 0.02 {
		t.Errorf("normal: lag-1 %g, want 0.5", got)
	}
	want := 6 / math.Pi * math.Asin(0.25)
	if got := DelayLag1(0.5, spec.DistUniform); math.Abs(got-want) > 0.02 {
		t.Errorf("uniform: lag-1 %g, want %g", got, want)
	}
}

func TestSimulateShowsTheRealizedValue(t *testing.T) {
	sp, _ := spec.Parse("loss 10% 50%")
	res, err := Simulate(SimConfig{Impairment: spec.PipelineImpairment(sp), Packets: 1000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := res.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"10% (50% correlation: about 0.108% realized)", "warning: loss 10% 50% realizes about 0.108%"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("simulate output lacks %q:\n%s", s, b.String())
		}
	}
}
