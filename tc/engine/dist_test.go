package engine

import (
	"math"
	"testing"

	"github.com/wanlab/wanlab/tc/spec"
)

func TestNormalTableMoments(t *testing.T) {
	mean, std := tableMoments(spec.DistNormal)
	if math.Abs(mean) > 0.01 || math.Abs(std-1) > 0.01 {
		t.Errorf("normal table: mean %.4f stddev %.4f, want 0 and 1", mean, std)
	}
	mean, std = tableMoments(spec.DistUniform)
	if mean != 0 || math.Abs(std-1/math.Sqrt(3)) > 1e-12 {
		t.Errorf("uniform: mean %v stddev %v", mean, std)
	}
}

func TestTabledistRounding(t *testing.T) {
	// With a table value t and sigma s, tabledist returns
	// mu + round(s*t/8192) (rounding half away from zero as the kernel's
	// split computation does for these values).
	r := newPRNG(1)
	tab := []int16{8192, -8192, 4096, 0}
	c := correlated{}
	seen := map[int64]bool{}
	for i := 0; i < 1000; i++ {
		seen[tabledist(1000, 300, &c, r, tab)] = true
	}
	for _, v := range []int64{1300, 700, 1150, 1000} {
		if !seen[v] {
			t.Errorf("tabledist never returned %d; got %v", v, seen)
		}
	}
	if len(seen) != 4 {
		t.Errorf("tabledist returned %d distinct values, want 4: %v", len(seen), seen)
	}
	// Uniform: [mu-sigma, mu+sigma).
	for i := 0; i < 10000; i++ {
		v := tabledist(1000, 300, &c, r, nil)
		if v < 700 || v >= 1300 {
			t.Fatalf("uniform tabledist %d outside [700,1300)", v)
		}
	}
	if got := tabledist(5, 0, &c, r, tab); got != 5 {
		t.Errorf("sigma 0: got %d, want mu", got)
	}
}
