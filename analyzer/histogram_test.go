package analyzer

import (
	"math/rand/v2"
	"sort"
	"testing"
)

// TestHistogramSparse checks that the histogram, which allocates only the
// buckets between its lowest and highest sample, reports the quantiles a
// full bucket array gives, whichever way the samples drift.
func TestHistogramSparse(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, drift := range []int{-1, 0, 1} {
		var h histogram
		var vals []uint64
		v := int64(50_000)
		for i := 0; i < 5000; i++ {
			v += int64(drift)*int64(rng.IntN(40)) + int64(rng.IntN(201)) - 100
			v = max(v, 0)
			h.add(uint64(v))
			vals = append(vals, uint64(v))
		}
		sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
		for _, q := range []float64{0.01, 0.5, 0.99} {
			want := vals[int(q*float64(len(vals)))-1]
			wantMid := min(max(histValue(histIndex(want)), float64(vals[0])), float64(vals[len(vals)-1]))
			if got := h.quantile(q); got != wantMid {
				t.Errorf("drift %d: quantile %.2f = %v, want %v (sample %d)", drift, q, got, wantMid, want)
			}
		}
		med := vals[len(vals)/2]
		n := 0
		for _, v := range vals {
			if histIndex(v) >= histIndex(med) {
				n++
			}
		}
		if got, want := h.fractionAtLeast(med), float64(n)/float64(len(vals)); got != want {
			t.Errorf("drift %d: fractionAtLeast(median) = %.3f, want %.3f", drift, got, want)
		}
		if len(h.counts) > histIndex(vals[len(vals)-1])-histIndex(vals[0])+1+len(h.counts)/3+8 {
			t.Errorf("drift %d: %d buckets allocated for a spread of %d", drift, len(h.counts), histIndex(vals[len(vals)-1])-histIndex(vals[0])+1)
		}
	}
}
