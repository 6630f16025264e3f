package engine

import (
	"math"

	"github.com/wanlab/wanlab/tc/netemdist"
	"github.com/wanlab/wanlab/tc/spec"
)

// distScale is NETEM_DIST_SCALE: table entries are value*8192.
const distScale = netemdist.Scale

// distTable is the table tc would load for d (netemdist.Table).
func distTable(d spec.Distribution) []int16 { return netemdist.Table(d) }

// tabledist mirrors sch_netem.c tabledist(): mu plus sigma times a value
// drawn from table (uniform in [mu-sigma, mu+sigma) without a table),
// with the kernel's fixed-point rounding. The kernel takes sigma as s32
// (jitter above 2.147 s wraps there); here it is 64-bit.
func tabledist(mu, sigma int64, c *correlated, r *prng, table []int16) int64 {
	if sigma == 0 {
		return mu
	}
	rnd := c.next(r)
	if sigma < 0 {
		sigma = -sigma
	}
	if table == nil {
		return int64(uint64(rnd)%uint64(2*sigma)) + mu - sigma
	}
	return scaled(mu, sigma, int64(table[rnd%uint32(len(table))]))
}

// scaled is tabledist's fixed-point mu + sigma*t/distScale for the table
// value t, rounded as the kernel rounds it.
func scaled(mu, sigma, t int64) int64 {
	x := (sigma % distScale) * t
	if x >= 0 {
		x += distScale / 2
	} else {
		x -= distScale / 2
	}
	return x/distScale + (sigma/distScale)*t + mu
}

// tabledistCorrelated is tabledist for a correlated delay: the same
// fixed-point arithmetic, with the table index (or the uniform offset)
// taken from the correlated uniform value u in [0, 1) instead of a modulo
// (see delayCorrelation).
func tabledistCorrelated(mu, sigma int64, u float64, table []int16) int64 {
	if sigma == 0 {
		return mu
	}
	if sigma < 0 {
		sigma = -sigma
	}
	if table == nil {
		return int64(u*float64(2*sigma)) + mu - sigma
	}
	return scaled(mu, sigma, int64(table[int(u*float64(len(table)))]))
}

// tableMoments returns the mean and standard deviation of the values a
// table yields per unit sigma (uniform: mean 0, stddev 1/sqrt(3)).
func tableMoments(d spec.Distribution) (mean, stddev float64) {
	t := distTable(d)
	if t == nil {
		return 0, 1 / math.Sqrt(3)
	}
	var s, s2 float64
	for _, v := range t {
		f := float64(v) / distScale
		s += f
		s2 += f * f
	}
	n := float64(len(t))
	mean = s / n
	return mean, math.Sqrt(s2/n - mean*mean)
}
