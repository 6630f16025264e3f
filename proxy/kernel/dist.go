package kernel

import (
	"math"
	"sync"

	"github.com/wanlab/wanlab/proxy/spec"
)

// netem's delay distributions are tables of 4096 signed 16-bit values, the
// inverse CDF scaled by NETEM_DIST_SCALE (8192), that tc loads from
// /usr/lib/tc/*.dist and hands to the kernel. They are generated here as
// iproute2's netem/normal.c, pareto.c and paretonormal.c generate those
// files, so no file is needed.
const (
	distTableSize = 16384 // TABLESIZE in the generators
	distScale     = 8192  // NETEM_DIST_SCALE
)

var distTables = struct {
	sync.Once
	t map[spec.Distribution][]int16
}{}

// DistTable returns the kernel table for d (nil for uniform, which has none).
func DistTable(d spec.Distribution) []int16 {
	distTables.Do(func() {
		normal := normalInverse()
		t := map[spec.Distribution][]int16{}
		var nt, pt, pn []int16
		for i := 0; i < distTableSize; i += 4 {
			nv := int(math.RoundToEven(normal[i] * distScale))
			nt = append(nt, clamp16(nv))
			pn = append(pn, clamp16((nv+3*paretoValue(i))/4))
		}
		for i := 65536; i > 0; i -= 16 {
			pt = append(pt, int16(paretoAt(i)))
		}
		t[spec.DistNormal], t[spec.DistPareto], t[spec.DistParetoNormal] = nt, pt, pn
		distTables.t = t
	})
	return distTables.t[d]
}

// normalInverse tabulates the inverse normal CDF the way normal.c does:
// by walking x over [-10, 10.05) in steps of 0.00005 and recording, for
// each CDF value rounded to 1/TABLESIZE, the last x that reached it.
func normalInverse() []float64 {
	table := make([]float64, distTableSize+1)
	for x := -10.0; x < 10.05; x += .00005 {
		i := int(math.RoundToEven(distTableSize * (.5 + .5*math.Erf(x/math.Sqrt(2.0)))))
		table[i] = x
	}
	return table
}

// paretoAt is pareto.c's value for i in 65536..16 (a = 3).
func paretoAt(i int) int {
	d := float64(i) / 65536
	d = 1.0 / math.Pow(d, 1.0/3.0)
	d -= 1.5
	d *= (4.0 / 3.0) * distScale
	if d > 32767 {
		d = 32767
	}
	return int(math.RoundToEven(d))
}

// paretoValue is paretonormal.c's paretovalue(i).
func paretoValue(i int) int { return paretoAt(65536 - 4*i) }

func clamp16(v int) int16 {
	return int16(max(math.MinInt16, min(math.MaxInt16, v)))
}

// distOfTable names the distribution whose table is b, or DistUniform when
// it is none of the known ones.
func distOfTable(b []byte) spec.Distribution {
	for _, d := range []spec.Distribution{spec.DistNormal, spec.DistPareto, spec.DistParetoNormal} {
		if string(distBytes(d)) == string(b) {
			return d
		}
	}
	return spec.DistUniform
}
