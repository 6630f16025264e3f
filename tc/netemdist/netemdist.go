// Package netemdist generates netem's delay distribution tables (normal,
// pareto, paretonormal) exactly as iproute2's netem/normal.c, pareto.c and
// paretonormal.c print them into /usr/lib/tc/*.dist, so neither the engine
// nor the kernel encoder needs the files: one generator for both.
package netemdist

import (
	"math"
	"sync"

	"github.com/wanlab/wanlab/tc/spec"
)

// Scale is NETEM_DIST_SCALE: table entries are value*8192.
const Scale = 8192

// Size is the number of entries iproute2's generators print (TABLESIZE
// 16384, every fourth index).
const Size = 4096

const (
	distScale     = Scale
	distTableSize = Size
)

var (
	distOnce   sync.Once
	distTables [4][]int16 // indexed by spec.Distribution; uniform has none
)

// Table returns the table tc would load for d ("tc qdisc ... delay X Y
// distribution normal" reads /usr/lib/tc/normal.dist), or nil for uniform,
// the kernel's built-in default. The tables are generated once; callers
// must not change them.
func Table(d spec.Distribution) []int16 {
	distOnce.Do(func() {
		inv := normalInverseTable()
		distTables[spec.DistNormal] = normalTable(inv)
		distTables[spec.DistPareto] = paretoTable()
		distTables[spec.DistParetoNormal] = paretoNormalTable(inv)
	})
	if d <= spec.DistUniform || int(d) >= len(distTables) {
		return nil
	}
	return distTables[d]
}

// normalInverseTable mirrors the shared loop of normal.c and paretonormal.c:
// walk x from -10 to 10.05 in steps of 0.00005 and record, for each index
// i = rint(16384 * Phi(x)), the last x that maps there: an inverse CDF.
func normalInverseTable() []float64 {
	const n = 4 * distTableSize
	table := make([]float64, n+1)
	for x := -10.0; x < 10.05; x += .00005 {
		i := int(math.RoundToEven(n * (.5 + .5*math.Erf(x/math.Sqrt2))))
		table[i] = x
	}
	return table
}

func clampShort(v int) int16 {
	if v < math.MinInt16 {
		v = math.MinInt16
	}
	if v > math.MaxInt16 {
		v = math.MaxInt16
	}
	return int16(v)
}

// normalTable is netem/normal.c: every fourth inverse-CDF value, scaled.
func normalTable(inv []float64) []int16 {
	t := make([]int16, 0, distTableSize)
	for i := 0; i < 4*distTableSize; i += 4 {
		t = append(t, clampShort(int(math.RoundToEven(inv[i]*distScale))))
	}
	return t
}

// paretoValue is paretovalue() of paretonormal.c (a = 3, shifted by the
// mean 1.5 and scaled by 4/3).
func paretoValue(i int) int {
	d := float64(65536-4*i) / 65536
	d = 1.0 / math.Pow(d, 1.0/3.0)
	d -= 1.5
	d *= (4.0 / 3.0) * distScale
	if d > 32767 {
		d = 32767
	}
	return int(math.RoundToEven(d))
}

// paretoTable is netem/pareto.c: i from 65536 down in steps of 16.
func paretoTable() []int16 {
	t := make([]int16, 0, distTableSize)
	for i := 65536; i > 0; i -= 16 {
		d := float64(i) / 65536
		d = 1.0 / math.Pow(d, 1.0/3.0)
		d -= 1.5
		d *= (4.0 / 3.0) * distScale
		if d > 32767 {
			d = 32767
		}
		t = append(t, int16(math.RoundToEven(d)))
	}
	return t
}

// paretoNormalTable is netem/paretonormal.c: (normal + 3*pareto)/4 with C's
// truncating integer division.
func paretoNormalTable(inv []float64) []int16 {
	t := make([]int16, 0, distTableSize)
	for i := 0; i < 4*distTableSize; i += 4 {
		norm := int(math.RoundToEven(inv[i] * distScale))
		par := paretoValue(i)
		t = append(t, clampShort((norm+3*par)/4))
	}
	return t
}
