package engine

import (
	"crypto/md5"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/proxy/spec"
)

// TestDistTablesMatchIproute2 compares the generated tables with the
// output of iproute2's own generators: the digests are md5 of the values
// one per line, from
//
//	gcc -o normal netem/normal.c -lm && ./normal | grep -v '^#' | tr -s ' \n' '\n' | grep -v '^$' | md5sum
//
// (same for pareto.c and paretonormal.c, iproute2 at the mirrored HEAD).
func TestDistTablesMatchIproute2(t *testing.T) {
	want := map[spec.Distribution]struct {
		md5   string
		first []int16
	}{
		spec.DistNormal:       {"90f5b6f1d51630b48f13bfc0ba46787a", []int16{-32768, -28307, -26871, -25967}},
		spec.DistPareto:       {"5436748013ce8536c912dde45743c351", []int16{-5461, -5460, -5460, -5459}},
		spec.DistParetoNormal: {"3dd12db0dc906acc57a846cb8c8edaf4", []int16{-12305, -11171, -10812, -10586}},
	}
	for d, w := range want {
		tab := distTable(d)
		if len(tab) != distTableSize {
			t.Fatalf("%v: %d entries, want %d", d, len(tab), distTableSize)
		}
		var b strings.Builder
		for _, v := range tab {
			b.WriteString(strconv.Itoa(int(v)))
			b.WriteByte('\n')
		}
		sum := md5.Sum([]byte(b.String()))
		if got := hex.EncodeToString(sum[:]); got != w.md5 {
			t.Errorf("%v: table md5 %s, want %s (first values %v, want %v)", d, got, w.md5, tab[:4], w.first)
		}
	}
	if distTable(spec.DistUniform) != nil {
		t.Error("uniform must have no table (the kernel's built-in default)")
	}
}

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
