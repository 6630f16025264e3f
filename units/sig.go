package units

import (
	"math"
	"strconv"
)

// Sig writes v with three significant digits and never an exponent, as
// people read numbers: 3370, 33.7, 0.0337 (where %.3g writes 3.37e+03 and
// 3.37e-02). Trailing zeros after the point are dropped, as %g drops
// them; NaN and the infinities are strconv's.
func Sig(v float64) string { return string(AppendSig(nil, v, 3)) }

// AppendSig appends v with digits significant digits (1 to 17), never an
// exponent, to b.
func AppendSig(b []byte, v float64, digits int) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.AppendFloat(b, v, 'g', digits, 64)
	}
	digits = min(max(digits, 1), 17)
	if v == 0 {
		if math.Signbit(v) {
			b = append(b, '-')
		}
		return append(b, '0')
	}
	// The mantissa's digits and the exponent, as %e rounds them.
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], v, 'e', digits-1, 64)
	if e[0] == '-' {
		b = append(b, '-')
		e = e[1:]
	}
	i := 0
	for i < len(e) && e[i] != 'e' {
		i++
	}
	mant, exp := e[:i], 0
	if x, err := strconv.Atoi(string(e[i+1:])); err == nil {
		exp = x
	}
	var ds [17]byte
	n := 0
	for _, c := range mant {
		if c >= '0' && c <= '9' {
			ds[n] = c
			n++
		}
	}
	// Drop trailing zeros of the mantissa that would fall after the point.
	for n > 1 && ds[n-1] == '0' && n-1 > exp {
		n--
	}
	switch {
	case exp >= n-1:
		// An integer: the digits, then zeros up to the point.
		b = append(b, ds[:n]...)
		for k := n - 1; k < exp; k++ {
			b = append(b, '0')
		}
	case exp >= 0:
		b = append(b, ds[:exp+1]...)
		b = append(b, '.')
		b = append(b, ds[exp+1:n]...)
	default:
		b = append(b, '0', '.')
		for k := -1; k > exp; k-- {
			b = append(b, '0')
		}
		b = append(b, ds[:n]...)
	}
	return b
}
