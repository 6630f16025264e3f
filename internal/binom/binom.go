// Package binom is the binomial proportion's confidence interval and
// tail that the fit, the bench and the reproductions share.
package binom

import "math"

// Z95 is the two-sided 95 % normal quantile, as the fit has always used it.
const Z95 = 1.96

// Wilson is the Wilson score interval of k successes in n trials at
// confidence z: probabilities in [0, 1], 0 at the low end exactly when k
// is 0 and 1 at the high end when k is n (where rounding would leave a
// trace of 1e-18 that a comparison with an observed 0 then fails); [0, 1]
// for no trials.
func Wilson(k, n int, z float64) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	p, nf := float64(k)/float64(n), float64(n)
	den := 1 + z*z/nf
	centre := (p + z*z/(2*nf)) / den
	half := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / den
	lo, hi = math.Max(0, centre-half), math.Min(1, centre+half)
	if k <= 0 {
		lo = 0
	}
	if k >= n {
		hi = 1
	}
	return lo, hi
}

// Tail is the chance of k or more successes in n trials of p: 1 for k of
// 0 or less, 0 for k above n, and exact at p of 0 and 1 (where the terms'
// logarithms would be infinite).
func Tail(n, k int, p float64) float64 {
	switch {
	case k <= 0:
		return 1
	case k > n || p <= 0:
		return 0
	case p >= 1:
		return 1
	}
	lc, _ := math.Lgamma(float64(n + 1))
	lp, lq := math.Log(p), math.Log1p(-p)
	s := 0.0
	for i := k; i <= n; i++ {
		a, _ := math.Lgamma(float64(i + 1))
		b, _ := math.Lgamma(float64(n - i + 1))
		s += math.Exp(lc - a - b + float64(i)*lp + float64(n-i)*lq)
	}
	return min(1, s)
}
