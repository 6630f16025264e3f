package proxy

import (
	"encoding/binary"

	"github.com/wanlab/wanlab/proxy/device"
	"github.com/wanlab/wanlab/tc/engine"
)

// gsoSegmenter is the engine's Segmenter for the units the readers make
// of GSO frames (units.go): it cuts a super-packet into the segments the
// offload backend's read would have split it into, byte for byte
// (wireguard-go's gsoSplit: each segment with the IP header, its IPv4 ID
// and lengths, the TCP sequence number or the UDP length, FIN and PSH
// on the last segment only, and full checksums), so that a stage that
// needs segments sees what the engine path always saw. A unit's
// virtio-net header is in its headroom, in front of Data.
type gsoSegmenter struct {
	pool *engine.Pool // the segments' pool: the direction's packets
}

// TCP flags cleared on every segment but the last.
const tcpFlagsFINPSH = 0x01 | 0x08

func (s gsoSegmenter) Segment(p *engine.Packet, out []*engine.Packet) []*engine.Packet {
	h := vnetHeader(p)
	in := p.Data
	gsoType := h[1] &^ gsoECN
	gsoSize := int(binary.LittleEndian.Uint16(h[4:]))
	cstart := int(binary.LittleEndian.Uint16(h[6:]))
	csumAt := cstart + int(binary.LittleEndian.Uint16(h[8:]))
	tcp := gsoType == gsoTCPv4 || gsoType == gsoTCPv6
	// The header length from the transport header, not the kernel's
	// hdr_len (wireguard-go's handleVirtioRead: on the forward path it
	// can be the whole first packet).
	hdrLen := cstart + 8
	proto := uint64(17) // UDP
	if tcp {
		hdrLen = cstart + int(in[cstart+12]>>4)*4
		proto = 6
	}
	v6 := in[0]>>4 == 6
	src, addrLen := 12, 4
	if v6 {
		src, addrLen = 8, 16
	} else {
		in[10], in[11] = 0, 0 // the IPv4 header checksum, recomputed per segment
	}
	in[csumAt], in[csumAt+1] = 0, 0
	addrs := sumWords(in[src:src+2*addrLen], proto)
	seq := binary.BigEndian.Uint32(in[cstart+4:])
	for i, at := 0, hdrLen; at < len(in); i, at = i+1, at+gsoSize {
		end := min(at+gsoSize, len(in))
		data := end - at
		total := hdrLen + data
		q := s.pool.Get()
		q.SetLen(total)
		o := q.Data
		copy(o, in[:cstart])
		if v6 {
			binary.BigEndian.PutUint16(o[4:], uint16(total-cstart))
		} else {
			binary.BigEndian.PutUint16(o[4:], binary.BigEndian.Uint16(in[4:])+uint16(i))
			binary.BigEndian.PutUint16(o[2:], uint16(total))
			binary.BigEndian.PutUint16(o[10:], ^fold(sumWords(o[:cstart], 0)))
		}
		copy(o[cstart:hdrLen], in[cstart:hdrLen])
		if tcp {
			binary.BigEndian.PutUint32(o[cstart+4:], seq+uint32(gsoSize*i))
			if end != len(in) {
				o[cstart+13] &^= tcpFlagsFINPSH
			}
		} else {
			binary.BigEndian.PutUint16(o[cstart+4:], uint16(total-cstart))
		}
		copy(o[hdrLen:], in[at:end])
		sum := sumWords(o[cstart:total], addrs+uint64(total-cstart))
		binary.BigEndian.PutUint16(o[csumAt:], ^fold(sum))
		out = append(out, q)
	}
	return out
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
