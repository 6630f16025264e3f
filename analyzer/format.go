package analyzer

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/wanlab/wanlab/units"
)

// The diagnosis writes a handful of sentences per connection, and on a
// capture of many short connections fmt.Sprintf (an interface per
// argument, a float boxed on the heap each, the verbs parsed through
// reflection) was a large share of the whole analysis. sprintf is the
// subset of fmt the diagnosis uses, with typed arguments: %d of an
// integer, %.Nf and %.Ng of a float, %s and %v of a string or address,
// %%. Its output is fmt's byte for byte; a verb or argument outside the
// subset is handed to fmt whole, so a mistake costs speed, not wording.

// farg is one argument of sprintf.
type farg struct {
	kind byte
	n    uint64 // an int64, or a float64's bits
	s    string
	a    netip.Addr
}

const (
	argInt byte = iota + 1
	argFloat
	argString
	argAddr
	argMB   // a rate in bytes per second, as mb writes it
	argSize // a size in bytes, as sz writes it
)

func ai[T int | int64](n T) farg   { return farg{kind: argInt, n: uint64(n)} }
func af(f float64) farg            { return farg{kind: argFloat, n: math.Float64bits(f)} }
func as(s string) farg             { return farg{kind: argString, s: s} }
func aa(a netip.Addr) farg         { return farg{kind: argAddr, a: a} }
func amb(bytesPerSec float64) farg { return farg{kind: argMB, n: math.Float64bits(bytesPerSec)} }
func asz(b float64) farg           { return farg{kind: argSize, n: math.Float64bits(b)} }

func (a *farg) float() float64 { return math.Float64frombits(a.n) }

// text appends a string-like argument as %s writes it.
func (a *farg) text(b []byte) []byte {
	switch a.kind {
	case argString:
		return append(b, a.s...)
	case argAddr:
		if !a.a.IsValid() {
			return append(b, "invalid IP"...) // Addr.String's word for the zero Addr
		}
		return a.a.AppendTo(b)
	case argMB:
		return appendMB(b, a.float())
	case argSize:
		return appendSize(b, units.Size(a.float()))
	}
	return b
}

// boxed is the argument as the value fmt was given before.
func (a *farg) boxed() any {
	switch a.kind {
	case argInt:
		return int64(a.n)
	case argFloat:
		return a.float()
	case argString:
		return a.s
	case argAddr:
		return a.a
	}
	return string(a.text(nil))
}

// sprintf is fmt.Sprintf(format, args...) for the subset above.
func sprintf(format string, args ...farg) string {
	if len(args) == 0 && strings.IndexByte(format, '%') < 0 {
		return format // a constant sentence: no copy
	}
	var buf [512]byte
	return string(appendf(buf[:0], format, args...))
}

// appendf is fmt.Appendf(b, format, args...) for the subset above.
func appendf(b []byte, format string, args ...farg) []byte {
	start, f, next := len(b), format, 0
	for {
		i := strings.IndexByte(f, '%')
		if i < 0 {
			b = append(b, f...)
			break
		}
		b = append(b, f[:i]...)
		f = f[i+1:]
		if f == "" {
			return appendfSlow(b[:start], format, args)
		}
		verb, prec := f[0], -1
		f = f[1:]
		if verb == '%' {
			b = append(b, '%')
			continue
		}
		if verb == '.' {
			prec = 0
			j := 0
			for ; j < len(f) && f[j] >= '0' && f[j] <= '9' && j < 3; j++ {
				prec = prec*10 + int(f[j]-'0')
			}
			if j == 0 || j == len(f) {
				return appendfSlow(b[:start], format, args)
			}
			verb, f = f[j], f[j+1:]
		}
		if next >= len(args) {
			return appendfSlow(b[:start], format, args)
		}
		a := &args[next]
		next++
		switch {
		case (verb == 'f' || verb == 'g') && prec >= 0 && a.kind == argFloat:
			// fmt's %.Nf is strconv's, NaN and ±Inf included; %.Ng is
			// written without an exponent (units.AppendSig): people read
			// 3370 ms, not 3.37e+03 ms.
			if verb == 'g' {
				b = units.AppendSig(b, a.float(), max(prec, 1))
			} else {
				b = strconv.AppendFloat(b, a.float(), verb, prec, 64)
			}
		case verb == 'd' && prec < 0 && a.kind == argInt:
			b = strconv.AppendInt(b, int64(a.n), 10)
		case (verb == 's' || verb == 'v') && prec < 0 && a.kind >= argString:
			b = a.text(b)
		default:
			return appendfSlow(b[:start], format, args)
		}
	}
	if next != len(args) {
		return appendfSlow(b[:start], format, args)
	}
	return b
}

func appendfSlow(b []byte, format string, args []farg) []byte {
	boxed := make([]any, len(args))
	for i := range args {
		boxed[i] = args[i].boxed()
	}
	return fmt.Appendf(b, format, boxed...)
}

// appendMB appends a rate in bits and, as users quote them, bytes per
// second: "%s (%s MB/s)" of units.Rate(8*bytesPerSec).Human() and
// units.Sig(bytesPerSec/1e6).
func appendMB(b []byte, bytesPerSec float64) []byte {
	b = appendRate(b, units.Rate(bytesPerSec*8))
	b = append(b, " ("...)
	b = units.AppendSig(b, bytesPerSec/1e6, 3)
	return append(b, " MB/s)"...)
}

// appendRate appends units.Rate.Human's text.
func appendRate(b []byte, r units.Rate) []byte {
	v := float64(r)
	switch {
	case v >= 1e12:
		return append(units.AppendSig(b, v/1e12, 3), "Tbit/s"...)
	case v >= 1e9:
		return append(units.AppendSig(b, v/1e9, 3), "Gbit/s"...)
	case v >= 1e6:
		return append(units.AppendSig(b, v/1e6, 3), "Mbit/s"...)
	case v >= 1e3:
		return append(units.AppendSig(b, v/1e3, 3), "Kbit/s"...)
	}
	return append(units.AppendSig(b, v, 3), "bit/s"...)
}

// appendSize appends units.Size.Human's text.
func appendSize(b []byte, s units.Size) []byte {
	v := float64(s)
	switch {
	case v >= 1<<30:
		return append(units.AppendSig(b, v/(1<<30), 3), " GiB"...)
	case v >= 1<<20:
		return append(units.AppendSig(b, v/(1<<20), 3), " MiB"...)
	case v >= 1<<10:
		return append(units.AppendSig(b, v/(1<<10), 3), " KiB"...)
	}
	return append(strconv.AppendUint(b, uint64(s), 10), " B"...)
}

// appendG10 appends v as strconv.AppendFloat(b, v, 'g', 10, 64) does.
// Most values of the series are whole numbers (bytes, sequence numbers)
// under 10 digits, which 'g' writes as plain integers: those take the
// integer path.
func appendG10(b []byte, v float64) []byte {
	if v > -1e10 && v < 1e10 && v == math.Trunc(v) && (v != 0 || !math.Signbit(v)) {
		return strconv.AppendInt(b, int64(v), 10)
	}
	return strconv.AppendFloat(b, v, 'g', 10, 64)
}

// appendSeconds6 appends d as strconv.AppendFloat(b, d.Seconds(), 'f', 6,
// 64) does. Rounding the float rounds the microseconds of d, except at a
// tie (500 ns), where the float's error decides, and past 10^6 s, where
// the error nears a nanosecond: those go through strconv.
func appendSeconds6(b []byte, d time.Duration) []byte {
	ns := int64(d)
	if ns < 0 || ns >= 1e15 || ns%1000 == 500 {
		return strconv.AppendFloat(b, d.Seconds(), 'f', 6, 64)
	}
	us := (ns + 500) / 1000
	b = strconv.AppendInt(b, us/1e6, 10)
	frac := us % 1e6
	var digits [7]byte
	digits[0] = '.'
	for i := 6; i >= 1; i-- {
		digits[i] = byte('0' + frac%10)
		frac /= 10
	}
	return append(b, digits[:]...)
}
