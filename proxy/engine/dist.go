package engine

import (
	"math"
	"sync"

	"github.com/wanlab/wanlab/proxy/spec"
)

// distScale is NETEM_DIST_SCALE: table entries are value*8192.
const distScale = 8192

// distTableSize is the number of entries iproute2's generators print
// (TABLESIZE 16384, every fourth index).
const distTableSize = 4096

var (
	distOnce   sync.Once
	distTables [4][]int16 // indexed by spec.Distribution; uniform has none
)

// distTable returns the table tc would load for d ("tc qdisc ... delay X Y
// distribution normal" reads /usr/lib/tc/normal.dist), or nil for uniform,
// the kernel's built-in default. The tables are generated once, in Go, the
// way iproute2's netem/normal.c, pareto.c and paretonormal.c generate them.
func distTable(d spec.Distribution) []int16 {
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
	t := int64(table[rnd%uint32(len(table))])
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
	t := int64(table[int(u*float64(len(table)))])
	x := (sigma % distScale) * t
	if x >= 0 {
		x += distScale / 2
	} else {
		x -= distScale / 2
	}
	return x/distScale + (sigma/distScale)*t + mu
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
