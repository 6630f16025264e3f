package binom

import (
	"math"
	"testing"
)

// TestWilson: the interval's ends at no successes and at all of them are
// exact, and a value in between is the textbook one (k=10, n=100:
// 0.0552-0.1744 at 95 %).
func TestWilson(t *testing.T) {
	for _, n := range []int{1, 7, 1000, 74211} {
		if lo, hi := Wilson(0, n, Z95); lo != 0 || hi <= 0 || hi >= 1 {
			t.Errorf("0 of %d: [%g, %g], want [0, h) with 0 < h < 1", n, lo, hi)
		}
		if lo, hi := Wilson(n, n, Z95); hi != 1 || lo <= 0 || lo >= 1 {
			t.Errorf("%d of %d: [%g, %g], want (l, 1]", n, n, lo, hi)
		}
	}
	if lo, hi := Wilson(10, 100, Z95); math.Abs(lo-0.0552) > 1e-4 || math.Abs(hi-0.1744) > 1e-4 {
		t.Errorf("10 of 100: [%.4f, %.4f], want [0.0552, 0.1744]", lo, hi)
	}
	if lo, hi := Wilson(3, 0, Z95); lo != 0 || hi != 1 {
		t.Errorf("no trials: [%g, %g], want [0, 1]", lo, hi)
	}
}

// TestTail: the binomial tail against sums done by hand, and its ends.
func TestTail(t *testing.T) {
	for _, c := range []struct {
		n, k int
		p    float64
		want float64
	}{
		{10, 0, 0.3, 1},
		{10, 11, 0.3, 0},
		{5, 0, 0, 1},
		{5, 1, 0, 0},
		{5, 5, 1, 1},
		{3, 2, 0.5, 0.5},           // (3 + 1) / 8
		{4, 3, 0.1, 0.0037},        // 4·0.001·0.9 + 0.0001
		{10, 1, 0.1, 0.6513215599}, // 1 - 0.9^10
	} {
		if got := Tail(c.n, c.k, c.p); math.IsNaN(got) || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Tail(%d, %d, %g) = %v, want %v", c.n, c.k, c.p, got, c.want)
		}
	}
}
