// Package binom is the binomial proportion's confidence interval that the
// fit, the bench and the reproductions share.
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
