package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Netlink attributes are encoded here by hand (struct rtattr: u16 length,
// u16 type, payload padded to 4 bytes), in host byte order as the kernel
// reads them. Every machine wanlab targets is little-endian.
var native = binary.LittleEndian

const nlaFNested = 1 << 15 // NLA_F_NESTED

// attrs builds a sequence of netlink attributes.
type attrs struct{ b []byte }

func align4(n int) int { return (n + 3) &^ 3 }

func (a *attrs) add(typ uint16, payload []byte) {
	n := 4 + len(payload)
	a.b = native.AppendUint16(a.b, uint16(n))
	a.b = native.AppendUint16(a.b, typ)
	a.b = append(a.b, payload...)
	for len(a.b)%4 != 0 {
		a.b = append(a.b, 0)
	}
}

func (a *attrs) u32(typ uint16, v uint32) { a.add(typ, native.AppendUint32(nil, v)) }
func (a *attrs) u64(typ uint16, v uint64) { a.add(typ, native.AppendUint64(nil, v)) }
func (a *attrs) nested(typ uint16, inner attrs) {
	a.add(typ|nlaFNested, inner.b)
}

// parseAttrs splits b into attributes by type (the last of a type wins, as
// nla_parse does); the NESTED flag is masked off.
func parseAttrs(b []byte) (map[uint16][]byte, error) {
	m := map[uint16][]byte{}
	for len(b) >= 4 {
		n := int(native.Uint16(b))
		typ := native.Uint16(b[2:]) &^ (nlaFNested | 1<<14)
		if n < 4 || n > len(b) {
			return nil, fmt.Errorf("netlink attribute %d: length %d of %d bytes", typ, n, len(b))
		}
		m[typ] = b[4:n]
		if align4(n) >= len(b) {
			break
		}
		b = b[align4(n):]
	}
	return m, nil
}

// wire is a little-endian struct writer/reader for the tc_* structs.
type wire struct{ b []byte }

func (w *wire) u8(v uint8)   { w.b = append(w.b, v) }
func (w *wire) u16(v uint16) { w.b = native.AppendUint16(w.b, v) }
func (w *wire) u32(v uint32) { w.b = native.AppendUint32(w.b, v) }
func (w *wire) s32(v int32)  { w.b = native.AppendUint32(w.b, uint32(v)) }
func (w *wire) s64(v int64)  { w.b = native.AppendUint64(w.b, uint64(v)) }

type reader struct {
	b   []byte
	err error
}

var errShort = errors.New("short netlink struct")

func (r *reader) take(n int) []byte {
	if len(r.b) < n {
		r.err = errShort
		r.b = nil
		return make([]byte, n)
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
func (r *reader) u8() uint8   { return r.take(1)[0] }
func (r *reader) u16() uint16 { return native.Uint16(r.take(2)) }
func (r *reader) u32() uint32 { return native.Uint32(r.take(4)) }
func (r *reader) s32() int32  { return int32(native.Uint32(r.take(4))) }
func (r *reader) s64() int64  { return int64(native.Uint64(r.take(8))) }
