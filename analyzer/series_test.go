package analyzer

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestAccumulatorsMatchDirectAdds checks that a direction's series, fed
// through their accumulators, hold exactly the points they would hold had
// every sample been added to them directly (Series.AddRange): busy and
// sparse series side by side (a sparse one keeps narrow buckets while a
// busy one widens its own), series that start late, when the others'
// buckets are wide (a first retransmission: when the accumulators shared
// the narrowest bucket of the series that had points, such a series' first
// point took the start of a wide bucket as its time), gaps from
// microseconds to seconds, and budgets small enough that every
// busy series merges many times.
// Samples are whole numbers, as byte counts and sequence offsets are, so
// sums are exact in either order.
func TestAccumulatorsMatchDirectAdds(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		budget := 16 + rng.IntN(200)
		ds := newDirSeries(budget)
		var ref [numSeries]Series
		for i, sr := range ds.All() {
			ref[i] = newSeries(sr.Name, sr.Unit, budget)
		}
		// Each series gets a sample in a packet with its own probability:
		// some nearly always, some rarely.
		var prob [numSeries]float64
		var from [numSeries]int // the step a series takes its first sample from
		for i := range prob {
			prob[i] = []float64{0.95, 0.5, 0.05, 0.005}[rng.IntN(4)]
			if rng.IntN(3) == 0 {
				from[i] = rng.IntN(20000) // starts late, when the others' buckets have widened
			}
		}
		now := time.Duration(rng.Int64N(int64(time.Second)))
		for step := range 20000 {
			switch r := rng.Float64(); {
			case r < 0.6:
				now += time.Duration(rng.Int64N(int64(50 * time.Microsecond)))
			case r < 0.95:
				now += time.Duration(rng.Int64N(int64(2 * time.Millisecond)))
			default:
				now += time.Duration(rng.Int64N(int64(time.Second)))
			}
			ds.roll(now)
			for i := range prob {
				for step >= from[i] && rng.Float64() < prob[i] {
					lo := float64(rng.Int64N(1 << 40))
					hi := lo + float64(rng.Int64N(1<<16))
					ds.add(i, lo, hi)
					ref[i].AddRange(now, lo, hi)
					if rng.IntN(2) == 0 {
						break
					}
				}
			}
		}
		ds.flush()
		for i, sr := range ds.All() {
			want := &ref[i]
			if sr.Bucket != want.Bucket || len(sr.Points) != len(want.Points) {
				t.Fatalf("seed %d, series %s: bucket %v, %d points; direct adds: bucket %v, %d points",
					seed, sr.Name, sr.Bucket, len(sr.Points), want.Bucket, len(want.Points))
			}
			for k := range sr.Points {
				if sr.Points[k] != want.Points[k] {
					t.Fatalf("seed %d, series %s, point %d: %+v; direct adds: %+v", seed, sr.Name, k, sr.Points[k], want.Points[k])
				}
			}
		}
	}
}
