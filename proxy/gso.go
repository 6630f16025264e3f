package proxy

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/wanlab/wanlab/proxy/device"
	"github.com/wanlab/wanlab/tc/engine"
)

// gsoSegmenter is the engine's Segmenter and Cutter for the units the
// readers make of GSO frames (units.go): it cuts a super-packet into the
// segments the offload backend's read would have split it into, byte for
// byte (wireguard-go's gsoSplit: each segment with the IP header, its IPv4
// ID and lengths, the TCP sequence number or the UDP length, FIN and PSH
// on the last segment only, and full checksums), so that a stage that
// needs segments sees what the engine path always saw. It also cuts a TCP
// super-packet into smaller ones (Cut): a run of its segments as one
// super-packet whose split gives those same segments. A unit's virtio-net
// header is in its headroom, in front of Data.
type gsoSegmenter struct {
	pool  *engine.Pool // the segments' pool: the direction's packets
	units *unitPools   // the smaller super-packets' buffers
	cuts  *atomic.Uint64
}

// TCP flags cleared on every segment but the last.
const tcpFlagsFINPSH = 0x01 | 0x08

// gsoFrame is a unit's super-packet read once for cutting: its headers'
// layout and the sums every segment's checksums start from.
type gsoFrame struct {
	in            []byte // the IP packet
	hdr           []byte // its virtio-net header
	gsoSize       int
	cstart        int // the transport header's offset
	csumAt        int // the transport checksum's offset
	hdrLen        int // IP and transport headers
	tcp, v6       bool
	pseudo        uint64 // the pseudo-header's addresses and protocol, unfolded
	seq           uint32
	id            uint16 // IPv4 ID
	segs, payload int
}

func parseGSO(p *engine.Packet) gsoFrame {
	h := vnetHeader(p)
	in := p.Data
	f := gsoFrame{in: in, hdr: h, gsoSize: int(binary.LittleEndian.Uint16(h[4:])), cstart: int(binary.LittleEndian.Uint16(h[6:]))}
	f.csumAt = f.cstart + int(binary.LittleEndian.Uint16(h[8:]))
	gsoType := h[1] &^ gsoECN
	f.tcp = gsoType == gsoTCPv4 || gsoType == gsoTCPv6
	// The header length from the transport header, not the kernel's
	// hdr_len (wireguard-go's handleVirtioRead: on the forward path it
	// can be the whole first packet).
	f.hdrLen = f.cstart + 8
	proto := uint64(17) // UDP
	if f.tcp {
		f.hdrLen = f.cstart + int(in[f.cstart+12]>>4)*4
		proto = 6
		f.seq = binary.BigEndian.Uint32(in[f.cstart+4:])
	}
	f.v6 = in[0]>>4 == 6
	src, addrLen := 12, 4
	if f.v6 {
		src, addrLen = 8, 16
	} else {
		f.id = binary.BigEndian.Uint16(in[4:])
	}
	f.pseudo = sumWords(in[src:src+2*addrLen], proto)
	f.payload = len(in) - f.hdrLen
	f.segs = max((f.payload+f.gsoSize-1)/f.gsoSize, 1)
	return f
}

// put writes segments [from, to) into o (which must hold them, sized by
// span) as one packet: the headers with the IP lengths, the IPv4 ID and
// header checksum, the TCP sequence number and flags or the UDP length of
// the first of them, then their payload. full gives the transport
// checksum in full (a segment); otherwise the pseudo-header's partial sum
// the kernel leaves a super-packet with (NEEDS_CSUM) is set for the new
// length.
func (f *gsoFrame) put(o []byte, from, to int, full bool) {
	at, end := f.hdrLen+from*f.gsoSize, min(f.hdrLen+to*f.gsoSize, len(f.in))
	total := f.hdrLen + end - at
	copy(o, f.in[:f.hdrLen])
	if f.v6 {
		binary.BigEndian.PutUint16(o[4:], uint16(total-f.cstart))
	} else {
		binary.BigEndian.PutUint16(o[2:], uint16(total))
		binary.BigEndian.PutUint16(o[4:], f.id+uint16(from))
		o[10], o[11] = 0, 0
		binary.BigEndian.PutUint16(o[10:], ^fold(sumWords(o[:f.cstart], 0)))
	}
	if f.tcp {
		binary.BigEndian.PutUint32(o[f.cstart+4:], f.seq+uint32(f.gsoSize*from))
		if to < f.segs {
			o[f.cstart+13] &^= tcpFlagsFINPSH
		}
	} else {
		binary.BigEndian.PutUint16(o[f.cstart+4:], uint16(total-f.cstart))
	}
	copy(o[f.hdrLen:], f.in[at:end])
	length := uint64(total - f.cstart)
	if full {
		o[f.csumAt], o[f.csumAt+1] = 0, 0
		binary.BigEndian.PutUint16(o[f.csumAt:], ^fold(sumWords(o[f.cstart:total], f.pseudo+length)))
		return
	}
	binary.BigEndian.PutUint16(o[f.csumAt:], fold(f.pseudo+length))
}

// span is the bytes of segments [from, to) as one packet.
func (f *gsoFrame) span(from, to int) int {
	return f.hdrLen + min(f.hdrLen+to*f.gsoSize, len(f.in)) - (f.hdrLen + from*f.gsoSize)
}

func (s gsoSegmenter) Segment(p *engine.Packet, out []*engine.Packet) []*engine.Packet {
	f := parseGSO(p)
	for i := range f.segs {
		q := s.pool.Get()
		q.SetLen(f.span(i, i+1))
		f.put(q.Data, i, i+1, true)
		out = append(out, q)
	}
	return out
}

// Cuttable: a TCP super-packet whose checksum the kernel left partial, as
// it does for every one it hands over (a UDP one goes on as segments).
func (s gsoSegmenter) Cuttable(p *engine.Packet) bool {
	h := vnetHeader(p)
	t := h[1] &^ gsoECN
	return s.units != nil && h[0]&vnetCsum != 0 && (t == gsoTCPv4 || t == gsoTCPv6)
}

// Cut returns segments [from, to) of unit p: one segment as Segment makes
// it, or a super-packet of them with p's virtio-net header (its gso_size
// and offsets hold), in the smallest unit buffer that holds it, whose
// split is those segments byte for byte.
func (s gsoSegmenter) Cut(p *engine.Packet, from, to int) *engine.Packet {
	f := parseGSO(p)
	n := f.span(from, to)
	if to-from == 1 {
		q := s.pool.Get()
		q.SetLen(n)
		f.put(q.Data, from, to, true)
		return q
	}
	q := s.units.get(n)
	if s.cuts != nil {
		s.cuts.Add(1)
	}
	q.SetLen(n)
	copy(vnetHeader(q), f.hdr)
	f.put(q.Data, from, to, false)
	q.SetUnit(to-from, (to-from)*f.hdrLen+n-f.hdrLen, s.pool.BufSize())
	return q
}

// segmentable reports whether GSO frame f (virtio-net header and packet,
// frameSegments' checks passed) is one Segment can cut without reading or
// writing outside it, as wireguard-go's read checks before its split: an
// IP header long enough for the fields it rewrites, a TCP header of 20 to
// 60 bytes, the checksum inside the transport header, and a segment
// (headers and gso_size bytes) that fits a packet of room bytes.
func segmentable(f []byte, room int) bool {
	h, pkt := f[:device.VnetHdrLen], f[device.VnetHdrLen:]
	cstart := int(binary.LittleEndian.Uint16(h[6:]))
	csumAt := cstart + int(binary.LittleEndian.Uint16(h[8:]))
	minIP := 20
	if pkt[0]>>4 == 6 {
		minIP = 40
	}
	hdrLen := cstart + 8
	if t := h[1] &^ gsoECN; t == gsoTCPv4 || t == gsoTCPv6 {
		if cstart+13 >= len(pkt) {
			return false
		}
		thl := int(pkt[cstart+12]>>4) * 4
		if thl < 20 || thl > 60 {
			return false
		}
		hdrLen = cstart + thl
	}
	return cstart >= minIP && csumAt+2 <= hdrLen && hdrLen <= len(pkt) &&
		hdrLen+int(binary.LittleEndian.Uint16(h[4:])) <= room
}

// vnetHeader is the virtio-net header a reader left in p's headroom.
func vnetHeader(p *engine.Packet) []byte {
	return p.Buf()[engine.Headroom-device.VnetHdrLen : engine.Headroom]
}

// sumWords adds b's 16-bit big-endian words (a last odd byte as the high
// half of one) to initial, unfolded (RFC 1071).
func sumWords(b []byte, initial uint64) uint64 {
	s := initial
	for len(b) >= 8 {
		s += uint64(binary.BigEndian.Uint32(b)) + uint64(binary.BigEndian.Uint32(b[4:]))
		b = b[8:]
	}
	for len(b) >= 2 {
		s += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	return s
}

// fold folds a sum of sumWords into 16 bits.
func fold(s uint64) uint16 {
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}
