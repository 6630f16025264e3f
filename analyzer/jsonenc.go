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
type jsonEncoder func(b []byte, p unsafe.Pointer) ([]byte, error)

var (
	connEncoderOnce sync.Once
	connEncoder     jsonEncoder
)

// appendConnectionJSON appends c's JSON, as json.Marshal(c) writes it.
func appendConnectionJSON(b []byte, c *Connection) ([]byte, error) {
	connEncoderOnce.Do(func() { connEncoder = encoderFor(reflect.TypeOf(Connection{})) })
	return connEncoder(b, unsafe.Pointer(c))
}

var textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()

func encoderFor(t reflect.Type) jsonEncoder {
	if t == reflect.TypeFor[netip.AddrPort]() {
		// MarshalText without its allocation.
		return func(b []byte, p unsafe.Pointer) ([]byte, error) {
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
		return func(b []byte, p unsafe.Pointer) ([]byte, error) {
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
		return func(b []byte, p unsafe.Pointer) ([]byte, error) { return strconv.AppendBool(b, *(*bool)(p)), nil }
	case reflect.Int:
		return func(b []byte, p unsafe.Pointer) ([]byte, error) {
			return strconv.AppendInt(b, int64(*(*int)(p)), 10), nil
		}
	case reflect.Int64:
		return func(b []byte, p unsafe.Pointer) ([]byte, error) { return strconv.AppendInt(b, *(*int64)(p), 10), nil }
	case reflect.Float64:
		return func(b []byte, p unsafe.Pointer) ([]byte, error) { return appendJSONFloat(b, *(*float64)(p)) }
	case reflect.String:
		return func(b []byte, p unsafe.Pointer) ([]byte, error) { return appendJSONString(b, *(*string)(p)), nil }
	case reflect.Pointer:
		elem := encoderFor(t.Elem())
		return func(b []byte, p unsafe.Pointer) ([]byte, error) {
			q := *(*unsafe.Pointer)(p)
			if q == nil {
				return append(b, "null"...), nil
			}
			return elem(b, q)
		}
	case reflect.Slice:
		elem, size := encoderFor(t.Elem()), t.Elem().Size()
		return func(b []byte, p unsafe.Pointer) ([]byte, error) {
			h := (*struct {
				data     unsafe.Pointer
				len, cap int
			})(p)
			if h.data == nil {
				return append(b, "null"...), nil
			}
			return appendJSONArray(b, elem, h.data, h.len, size)
		}
	case reflect.Array:
		elem, size, n := encoderFor(t.Elem()), t.Elem().Size(), t.Len()
		return func(b []byte, p unsafe.Pointer) ([]byte, error) { return appendJSONArray(b, elem, p, n, size) }
	case reflect.Struct:
		return structEncoder(t)
	}
	panic(fmt.Sprintf("analyzer: no JSON encoder for %v", t))
}

func appendJSONArray(b []byte, elem jsonEncoder, p unsafe.Pointer, n int, size uintptr) ([]byte, error) {
	b = append(b, '[')
	var err error
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = elem(b, unsafe.Add(p, uintptr(i)*size)); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}

type jsonField struct {
	key       string // `"name":`
	offset    uintptr
	enc       jsonEncoder
	omitEmpty bool
	kind      reflect.Kind
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
		out = append(out, jsonField{key: string(appendJSONString(nil, name)) + ":", offset: base + f.Offset,
			enc: encoderFor(f.Type), omitEmpty: strings.Contains(opts, "omitempty"), kind: f.Type.Kind()})
	}
	return out
}

func structEncoder(t reflect.Type) jsonEncoder {
	var fields []jsonField
	var once sync.Once // recursive types: build on first use
	return func(b []byte, p unsafe.Pointer) ([]byte, error) {
		once.Do(func() { fields = structFields(t, 0) })
		b = append(b, '{')
		first := true
		var err error
		for i := range fields {
			f := &fields[i]
			fp := unsafe.Add(p, f.offset)
			if f.omitEmpty && isEmptyJSON(f.kind, fp) {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, f.key...)
			if b, err = f.enc(b, fp); err != nil {
				return b, err
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

// appendJSONFloat formats f as encoding/json does.
func appendJSONFloat(b []byte, f float64) ([]byte, error) {
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

// appendJSONString quotes s as encoding/json does (HTML-safe).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
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
