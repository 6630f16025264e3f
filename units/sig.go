package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
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

// SigN writes v with digits significant digits, never an exponent.
func SigN(v float64, digits int) string { return string(AppendSig(nil, v, digits)) }

// Sprintf is fmt.Sprintf, except that %g of a float (with or without a
// precision, a + flag and a width) is written without an exponent, with
// the precision's significant digits (6 without one): text people read
// has no 3.37e+03.
func Sprintf(format string, args ...any) string {
	var b []byte
	next := 0
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b = append(b, c)
			continue
		}
		j := i + 1
		for j < len(format) && strings.IndexByte("+-# 0", format[j]) >= 0 {
			j++
		}
		for j < len(format) && (format[j] >= '0' && format[j] <= '9' || format[j] == '.') {
			j++
		}
		if j >= len(format) {
			b = append(b, format[i:]...)
			break
		}
		spec, verb := format[i:j+1], format[j]
		i = j
		if verb == '%' {
			b = append(b, '%')
			continue
		}
		if next >= len(args) {
			b = fmt.Appendf(b, "%s", "%!"+string(verb)+"(MISSING)")
			continue
		}
		arg := args[next]
		next++
		f, isFloat := arg.(float64)
		if verb != 'g' || !isFloat || strings.ContainsAny(spec, "#") {
			b = fmt.Appendf(b, spec, arg)
			continue
		}
		digits, width := 6, 0
		body := spec[1 : len(spec)-1]
		plus, minus := strings.Contains(body, "+"), strings.Contains(body, "-")
		body = strings.TrimLeft(body, "+-# 0")
		if k := strings.IndexByte(body, '.'); k >= 0 {
			digits, _ = strconv.Atoi(body[k+1:])
			if digits == 0 {
				digits = 1
			}
			body = body[:k]
		}
		width, _ = strconv.Atoi(body)
		s := AppendSig(nil, f, digits)
		if plus && f >= 0 && !math.IsNaN(f) {
			s = append([]byte{'+'}, s...)
		}
		for len(s) < width {
			if minus {
				s = append(s, ' ')
			} else {
				s = append([]byte{' '}, s...)
			}
		}
		b = append(b, s...)
	}
	if next < len(args) {
		b = fmt.Appendf(b, "%%!(EXTRA %v)", args[next:])
	}
	return string(b)
}
