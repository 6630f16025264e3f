package engine

import (
	"math"
	"math/rand/v2"

	"github.com/wanlab/wanlab/units"
)

// prng is a stage's private random source. Every random decision of a stage
// draws from its own prng, in a fixed order, so a seed reproduces a run.
// (The kernel's netem likewise draws from one per-qdisc prng since Linux
// 6.3, when TCA_NETEM_PRNG_SEED appeared.)
type prng struct {
	pcg rand.PCG
	rng *rand.Rand // over pcg, for normal variates
}

func newPRNG(seed uint64) *prng {
	r := &prng{}
	r.pcg.Seed(seed, seed^0x9e3779b97f4a7c15)
	r.rng = rand.New(&r.pcg)
	return r
}

// u32 mirrors prandom_u32_state: a uniform 32-bit value.
func (r *prng) u32() uint32 { return uint32(r.pcg.Uint64() >> 32) }

// below returns a uniform value in [0, n) like the kernel's
// get_random_u32_below (multiply-shift, no modulo bias worth noting).
func (r *prng) below(n uint32) uint32 { return uint32((uint64(r.u32()) * uint64(n)) >> 32) }

// probU32 converts a percentage into netem's fixed-point probability, as
// iproute2's get_percent/set_percent do: rint(p * UINT32_MAX).
func probU32(p units.Percent) uint32 {
	f := p.Prob()
	switch {
	case f <= 0 || math.IsNaN(f):
		return 0
	case f >= 1:
		return math.MaxUint32
	}
	return uint32(math.RoundToEven(f * math.MaxUint32))
}

// correlated mirrors sch_netem.c's struct crndstate and get_crandom(): each
// value is a weighted mean of a fresh uniform value and the previous
// output, weight rho = correlation. With rho = 0 it is the plain prng.
type correlated struct {
	rho  uint32
	last uint32
}

// newCorrelated mirrors init_crandom: the first "previous value" is random.
func newCorrelated(corr units.Percent, r *prng) correlated {
	return correlated{rho: probU32(corr), last: r.u32()}
}

// next is get_crandom: answer = (value*(2^32-rho) + last*rho) >> 32 with
// rho+1, in 64-bit arithmetic exactly as the kernel computes it.
func (c *correlated) next(r *prng) uint32 {
	if c == nil || c.rho == 0 {
		return r.u32()
	}
	value := uint64(r.u32())
	rho := uint64(c.rho) + 1
	answer := (value*((1<<32)-rho) + uint64(c.last)*rho) >> 32
	c.last = uint32(answer)
	return c.last
}

// delayCorrelation draws the uniform values behind netem's delay.
//
// Without correlation it is the kernel's: a plain 32-bit value that
// tabledist reduces modulo the table size (or 2*jitter).
//
// With correlation the kernel's get_crandom value is useless here: its
// consecutive values differ by far more than the table size, so the
// modulo keeps only bits that are nearly independent and Linux's delay
// correlation has almost no effect (tc-netem(8): "This isn't a true
// statistical correlation, but an approximation"). wanlab instead runs a
// Gaussian AR(1) process z = rho*z + sqrt(1-rho^2)*e and maps Phi(z) onto
// the table (a Gaussian copula): each delay keeps exactly the configured
// distribution (same mean and stddev as uncorrelated) and consecutive
// delays have a lag-1 correlation of rho (normal tables) or
// 6/pi*asin(rho/2) (uniform), which is what the configured correlation
// asks for.
type delayCorrelation struct {
	rho  float64
	keep float64 // sqrt(1-rho^2)
	z    float64
}

func newDelayCorrelation(corr units.Percent, r *prng) delayCorrelation {
	rho := math.Min(math.Max(corr.Prob(), 0), 1)
	d := delayCorrelation{rho: rho, keep: math.Sqrt(1 - rho*rho)}
	if rho != 0 {
		d.z = r.rng.NormFloat64()
	}
	return d
}

// uniform returns the next correlated value in [0, 1).
func (d *delayCorrelation) uniform(r *prng) float64 {
	d.z = d.rho*d.z + d.keep*r.rng.NormFloat64()
	u := 0.5 * math.Erfc(-d.z/math.Sqrt2)
	if u >= 1 {
		u = math.Nextafter(1, 0)
	}
	return u
}
