package analyzer

import (
	"math"
	"math/bits"
)

// histogram is a streaming distribution of non-negative integer samples
// (microseconds, bytes) with bounded memory: log-linear buckets with 64
// sub-buckets per power of two (values below 64 are exact), so any quantile
// it reports is within 1.6 % of a true sample value. Memory grows with the
// logarithm of the spread of the samples, never with their number: only
// the buckets between the lowest and the highest used are allocated, on
// first use, so that short connections stay small.
//
// Only the Karn RTT needs a mean and deviation (tcptrace's avg and
// stdev): it adds its samples through addMoments, which keeps the sums
// too; the others (several per packet) leave them at zero.
type histogram struct {
	counts   []uint32 // counts[i] is bucket lo+i
	lo       int
	n        uint64
	sum      float64
	sumSq    float64
	min, max uint64
}

const histSubBits = 6

func histIndex(v uint64) int {
	if v < 1<<histSubBits {
		return int(v)
	}
	e := bits.Len64(v) - 1 // e >= histSubBits
	sub := (v >> uint(e-histSubBits)) & (1<<histSubBits - 1)
	return (e-histSubBits+1)<<histSubBits + int(sub)
}

// histValue is the midpoint of bucket i.
func histValue(i int) float64 {
	if i < 1<<histSubBits {
		return float64(i)
	}
	e := i>>histSubBits + histSubBits - 1
	sub := uint64(i & (1<<histSubBits - 1))
	lo := (1<<histSubBits | sub) << uint(e-histSubBits)
	width := uint64(1) << uint(e-histSubBits)
	return float64(lo) + float64(width-1)/2
}

// add counts v. The growth of the buckets, and with it the first sample
// (which sets min), is apart: several histograms take a sample per packet.
func (h *histogram) add(v uint64) {
	// One unsigned comparison checks both ends of the allocated buckets
	// (and lets the compiler drop the bounds check of the increment).
	j := uint(histIndex(v) - h.lo)
	if j >= uint(len(h.counts)) {
		h.addGrow(v)
		return
	}
	h.counts[j]++
	h.min, h.max = min(h.min, v), max(h.max, v)
	h.n++
}

// addGrow is add for a value outside the allocated buckets, the first one
// included: buckets are allocated only once a histogram has a sample, so
// add's branch never sees n == 0.
func (h *histogram) addGrow(v uint64) {
	i := histIndex(v)
	h.grow(i)
	h.counts[i-h.lo]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	h.max = max(h.max, v)
	h.n++
}

// addMoments is add that also keeps the sums behind mean and stdev.
func (h *histogram) addMoments(v uint64) {
	h.add(v)
	f := float64(v)
	h.sum += f
	h.sumSq += f * f
}

// grow widens the allocated buckets to cover bucket i, with slack on the
// side it grew so that a drifting distribution reallocates rarely.
func (h *histogram) grow(i int) {
	if len(h.counts) == 0 {
		h.lo = max(0, i-2)
		if cap(h.counts) >= 8 {
			h.counts = h.counts[:cap(h.counts)] // reused (reset)
			clear(h.counts)
		} else {
			h.counts = make([]uint32, 8)
		}
		return
	}
	slack := max(8, len(h.counts)/2)
	lo, hi := h.lo, h.lo+len(h.counts)
	if i < lo {
		lo = max(0, i-slack)
	} else {
		hi = i + 1 + slack
	}
	c := make([]uint32, hi-lo)
	copy(c[h.lo-lo:], h.counts)
	h.counts, h.lo = c, lo
}

// reset empties h, keeping a small bucket array for reuse.
func (h *histogram) reset() {
	c := h.counts[:0]
	if cap(c) > 256 {
		c = nil
	}
	*h = histogram{counts: c}
}

func (h *histogram) mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// stdev is the population standard deviation, as tcptrace reports it.
func (h *histogram) stdev() float64 {
	if h.n < 2 {
		return 0
	}
	m := h.mean()
	v := h.sumSq/float64(h.n) - m*m
	if v < 0 {
		return 0
	}
	return math.Sqrt(v)
}

// quantile returns the value at quantile q (0..1), clamped to the exact
// minimum and maximum.
func (h *histogram) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += uint64(c)
		if seen >= rank {
			v := histValue(h.lo + i)
			return math.Min(math.Max(v, float64(h.min)), float64(h.max))
		}
	}
	return float64(h.max)
}

// fractionAtLeast is the share of samples >= v (bucket resolution).
func (h *histogram) fractionAtLeast(v uint64) float64 {
	if h.n == 0 {
		return 0
	}
	var c uint64
	for i := max(histIndex(v)-h.lo, 0); i < len(h.counts); i++ {
		c += uint64(h.counts[i])
	}
	return float64(c) / float64(h.n)
}
