package analyzer

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"
)

// A connection's JSON is most of the work of `analyze --format json` on
// a capture of many short connections, and encoding/json walks every
// field through reflect.Value each time. jsonEncoder walks the type once
// and then appends each field from its offset, with encoding/json's
// output byte for byte (Marshal, no indent): same field names and order,
// omitempty, embedded structs flattened, floats and strings formatted and
// escaped as encoding/json does. It knows the kinds a Connection holds.
type jsonEncoder func(e *jsonState, b []byte, p unsafe.Pointer) ([]byte, error)

var (
	connEncoderOnce sync.Once
	connEncoder     jsonEncoder
)

// appendConnectionJSON appends c's JSON, as json.Marshal(c) writes it.
func appendConnectionJSON(b []byte, c *Connection) ([]byte, error) {
	var e jsonState
	return e.appendConnection(b, c)
}

// appendConnection is appendConnectionJSON with e's memory (which
// escapes through the encoders: a JSONWriter keeps one).
func (e *jsonState) appendConnection(b []byte, c *Connection) ([]byte, error) {
	connEncoderOnce.Do(func() { connEncoder = encoderFor(reflect.TypeOf(Connection{})) })
	*e = jsonState{}
	return connEncoder(e, b, unsafe.Pointer(c))
}

// jsonState is what one call of an encoder remembers: where in b the
// last few leaf structs reached by pointer were written, so that one met
// again is copied, not encoded again (a connection's diagnosis is its
// busier direction's).
type jsonState struct {
	seen [4]struct {
		p          unsafe.Pointer
		start, end int
	}
	next int
}

// written returns where the struct at p was written, if it is remembered.
func (e *jsonState) written(p unsafe.Pointer) (start, end int, ok bool) {
	for i := range e.seen {
		if s := &e.seen[i]; s.p == p {
			return s.start, s.end, true
		}
	}
	return 0, 0, false
}

func (e *jsonState) remember(p unsafe.Pointer, start, end int) {
	e.seen[e.next] = struct {
		p          unsafe.Pointer
		start, end int
	}{p, start, end}
	e.next = (e.next + 1) % len(e.seen)
}

// leafStruct says whether t is a struct whose JSON depends on its own
// fields only: no pointers, no slices but of scalars, strings and leaf
// structs, so its text cannot change while an encoder runs.
func leafStruct(t reflect.Type) bool {
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := 0; i < t.NumField(); i++ {
		ft := t.Field(i).Type
		if ft.Kind() == reflect.Slice || ft.Kind() == reflect.Array {
			ft = ft.Elem()
		}
		switch ft.Kind() {
		case reflect.Bool, reflect.Int, reflect.Int64, reflect.Float64, reflect.String:
		case reflect.Struct:
			if !leafStruct(ft) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

var textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()

func encoderFor(t reflect.Type) jsonEncoder {
	if t == reflect.TypeFor[netip.AddrPort]() {
		// MarshalText without its allocation.
		return func(e *jsonState, b []byte, p unsafe.Pointer) ([]byte, error) {
			ap := (*netip.AddrPort)(p)
			var tmp [64]byte
			txt := tmp[:0]
			if ap.IsValid() {
				txt = ap.AppendTo(txt)
			}
			return appendJSONString(b, unsafe.String(unsafe.SliceData(txt), len(txt))), nil
		}
	}
	if t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(textMarshalerType) {
		return func(e *jsonState, b []byte, p unsafe.Pointer) ([]byte, error) {
			m := reflect.NewAt(t, p).Interface().(encoding.TextMarshaler)
			txt, err := m.MarshalText()
			if err != nil {
				return b, err
			}
			return appendJSONString(b, string(txt)), nil
		}
	}
	switch t.Kind() {
	case reflect.Bool:
		return func(e *jsonState, b []byte, p unsafe.Pointer) ([]byte, error) {
			return strconv.AppendBool(b, *(*bool)(p)), nil
		}
	case reflect.Int:
		return func(e *jsonState, b []byte, p unsafe.Pointer) ([]byte, error) {
			return strconv.AppendInt(b, int64(*(*int)(p)), 10), nil
		}
	case reflect.Int64:
		return func(e *jsonState, b []byte, p unsafe.Pointer) ([]byte, error) {
			return strconv.AppendInt(b, *(*int64)(p), 10), nil
		}
	case reflect.Float64:
		return func(e *jsonState, b []byte, p unsafe.Pointer) ([]byte, error) {
			return appendJSONFloat(b, *(*float64)(p))
		}
	case reflect.String:
		return func(e *jsonState, b []byte, p unsafe.Pointer) ([]byte, error) {
			return appendJSONString(b, *(*string)(p)), nil
		}
	case reflect.Pointer:
		elem, leaf := encoderFor(t.Elem()), leafStruct(t.Elem())
		return func(e *jsonState, b []byte, p unsafe.Pointer) ([]byte, error) {
			q := *(*unsafe.Pointer)(p)
			if q == nil {
				return append(b, "null"...), nil
			}
			if !leaf {
				return elem(e, b, q)
			}
			if start, end, ok := e.written(q); ok {
				return append(b, b[start:end]...), nil
			}
			start := len(b)
			b, err := elem(e, b, q)
			if err == nil {
				e.remember(q, start, len(b))
			}
			return b, err
		}
	case reflect.Slice:
		elem, size := encoderFor(t.Elem()), t.Elem().Size()
		return func(e *jsonState, b []byte, p unsafe.Pointer) ([]byte, error) {
			h := (*struct {
				data     unsafe.Pointer
				len, cap int
			})(p)
			if h.data == nil {
				return append(b, "null"...), nil
			}
			return appendJSONArray(e, b, elem, h.data, h.len, size)
		}
	case reflect.Array:
		elem, size, n := encoderFor(t.Elem()), t.Elem().Size(), t.Len()
		return func(e *jsonState, b []byte, p unsafe.Pointer) ([]byte, error) {
			return appendJSONArray(e, b, elem, p, n, size)
		}
	case reflect.Struct:
		return structEncoder(t)
	}
	panic(fmt.Sprintf("analyzer: no JSON encoder for %v", t))
}

func appendJSONArray(e *jsonState, b []byte, elem jsonEncoder, p unsafe.Pointer, n int, size uintptr) ([]byte, error) {
	b = append(b, '[')
	var err error
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = elem(e, b, unsafe.Add(p, uintptr(i)*size)); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}

type jsonField struct {
	key       string   // `,"name":`
	key32     [32]byte // key, padded, when it fits: copied without a call to memmove
	offset    uintptr
	enc       jsonEncoder
	omitEmpty bool
	kind      reflect.Kind
	op        byte // how the struct encoder writes the value itself
}

// Values the struct encoder writes without a call through enc: most of a
// connection's fields.
const (
	opEnc byte = iota
	opInt
	opInt64
	opFloat
	opString
	opBool
)

// fieldOp is the op for a field of type t.
func fieldOp(t reflect.Type) byte {
	if t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(textMarshalerType) {
		return opEnc
	}
	switch t {
	case reflect.TypeFor[int]():
		return opInt
	case reflect.TypeFor[int64]():
		return opInt64
	case reflect.TypeFor[float64]():
		return opFloat
	case reflect.TypeFor[string]():
		return opString
	case reflect.TypeFor[bool]():
		return opBool
	}
	return opEnc
}

// structFields lists t's JSON fields in encoding/json's order, embedded
// structs flattened (the Connection types have no name conflicts).
func structFields(t reflect.Type, base uintptr) []jsonField {
	var out []jsonField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, structFields(f.Type, base+f.Offset)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{key: "," + string(appendJSONString(nil, name)) + ":", offset: base + f.Offset,
			enc: encoderFor(f.Type), omitEmpty: strings.Contains(opts, "omitempty"), kind: f.Type.Kind(),
			op: fieldOp(f.Type)})
		copy(out[len(out)-1].key32[:], out[len(out)-1].key)
	}
	return out
}

func structEncoder(t reflect.Type) jsonEncoder {
	var fields []jsonField
	var once sync.Once // recursive types: build on first use
	return func(e *jsonState, b []byte, p unsafe.Pointer) ([]byte, error) {
		once.Do(func() { fields = structFields(t, 0) })
		b = append(b, '{')
		open := len(b) // the first field's key goes without its comma
		var err error
		for i := range fields {
			f := &fields[i]
			fp := unsafe.Add(p, f.offset)
			if f.omitEmpty && isEmptyJSON(f.kind, fp) {
				continue
			}
			switch n := len(b); {
			case n == open:
				b = append(b, f.key[1:]...)
			case len(f.key) <= len(f.key32) && cap(b)-n >= len(f.key32):
				// A fixed-size copy is a few moves; the bytes past the
				// key are overwritten next.
				*(*[32]byte)(b[n : n+len(f.key32)]) = f.key32
				b = b[:n+len(f.key)]
			default:
				b = append(b, f.key...)
			}
			switch f.op {
			case opInt:
				b = appendJSONInt(b, int64(*(*int)(fp)))
			case opInt64:
				b = appendJSONInt(b, *(*int64)(fp))
			case opFloat:
				if b, err = appendJSONFloat(b, *(*float64)(fp)); err != nil {
					return b, err
				}
			case opString:
				b = appendJSONString(b, *(*string)(fp))
			case opBool:
				b = strconv.AppendBool(b, *(*bool)(fp))
			default:
				if b, err = f.enc(e, b, fp); err != nil {
					return b, err
				}
			}
		}
		return append(b, '}'), nil
	}
}

func isEmptyJSON(k reflect.Kind, p unsafe.Pointer) bool {
	switch k {
	case reflect.Bool:
		return !*(*bool)(p)
	case reflect.Int:
		return *(*int)(p) == 0
	case reflect.Int64:
		return *(*int64)(p) == 0
	case reflect.Float64:
		return *(*float64)(p) == 0
	case reflect.String:
		return *(*string)(p) == ""
	case reflect.Pointer:
		return *(*unsafe.Pointer)(p) == nil
	case reflect.Slice:
		return (*struct {
			data     unsafe.Pointer
			len, cap int
		})(p).len == 0
	}
	return false
}

// appendJSONInt appends i in decimal; most counters of a short
// connection are below 100.
func appendJSONInt(b []byte, i int64) []byte {
	switch {
	case uint64(i) < 10:
		return append(b, byte('0'+i))
	case uint64(i) < 100:
		return append(b, byte('0'+i/10), byte('0'+i%10))
	}
	return strconv.AppendInt(b, i, 10)
}

// appendJSONFloat formats f as encoding/json does. Most of a
// connection's floats are zero, whole numbers (20 ms, 1448 bytes) or
// short decimals (20.16 ms); those take a fast path that writes what
// strconv's shortest 'f' form would, and the rest go to strconv.
func appendJSONFloat(b []byte, f float64) ([]byte, error) {
	a := math.Abs(f) // NaN fails every comparison below
	if a < 1<<53 {
		if i := int64(f); float64(i) == f {
			if i == 0 && math.Signbit(f) {
				return append(b, "-0"...), nil
			}
			// Every integer below 2^53 is a float of its own, and its
			// digits are the shortest text that reads back as it.
			return strconv.AppendInt(b, i, 10), nil
		}
		if a >= 1e-4 && a < 1e10 {
			if b, ok := appendShortDecimal(b, f, a); ok {
				return b, nil
			}
		}
	}
	return appendJSONFloatSlow(b, f)
}

// appendShortDecimal writes f (a = |f|, 1e-4 <= a < 1e10, not a whole
// number) with at most four decimals if that text reads back as f: then it
// is what strconv's shortest 'f' form writes. Why: m/10^4 with m < 2^53 is
// exact on both sides of the division, so m/10^4 == a says the decimal
// m·10^-4 rounds to a, exactly as ParseFloat would round it; since
// m < 2^47 the spacing of floats near a is below 10^-4, so no other
// 4-decimal rounds to a (strconv, which picks the closest, picks this
// one), and a value with fewer decimals is m without its trailing zeros.
// If no decimal of at most four places rounds to a, m/10^4 != a for any
// m and strconv has the work.
func appendShortDecimal(b []byte, f, a float64) ([]byte, bool) {
	// The nearest integer, or one off where a·10^4 is almost a half:
	// then no 4-decimal reads back as a and the check fails for any m.
	m := uint64(a*1e4 + 0.5)
	if float64(m)/1e4 != a || m%1e4 == 0 {
		return b, false
	}
	if f < 0 {
		b = append(b, '-')
	}
	b = strconv.AppendUint(b, m/1e4, 10)
	frac, digits := m%1e4, 4
	for frac%10 == 0 {
		frac /= 10
		digits--
	}
	var d [5]byte
	d[0] = '.'
	for i := digits; i > 0; i-- {
		d[i] = byte('0' + frac%10)
		frac /= 10
	}
	return append(b, d[:digits+1]...), true
}

// appendJSONFloatSlow is appendJSONFloat for any value.
func appendJSONFloatSlow(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, &json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, 64)}
	}
	if f == 0 && !math.Signbit(f) {
		return append(b, '0'), nil // most fields of a short connection
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9, as encoding/json writes it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

const hexDigits = "0123456789abcdef"

// jsonSafe marks the bytes encoding/json copies as they are: printable
// ASCII except the quote, the backslash and HTML's <, > and &.
var jsonSafe = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// zeroByte has a byte's top bit set where w has a zero byte, if w has
// one, and is zero otherwise (w's bytes below 0x80; others are caught by
// the caller).
func zeroByte(w uint64) uint64 { return (w - lsb) &^ w & msb }

// needsEscape says whether any of w's eight bytes is not jsonSafe.
func needsEscape(w uint64) bool {
	return (w|(w-0x20*lsb)&^w|zeroByte(w^'"'*lsb)|zeroByte(w^'\\'*lsb)|zeroByte(w^'&'*lsb)|
		zeroByte((w^'<'*lsb)&^(2*lsb)))&msb != 0 // '<' and '>' differ in bit 1 only
}

// appendJSONString quotes s as encoding/json does (HTML-safe): runs of
// safe bytes are found eight at a time and copied at once.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		for i+8 <= len(s) {
			w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
				uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
			if needsEscape(w) {
				break
			}
			i += 8
		}
		for i < len(s) && jsonSafe[s[i]] {
			i++
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
