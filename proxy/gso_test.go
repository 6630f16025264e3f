package proxy

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/wanlab/wanlab/proxy/device"
	"github.com/wanlab/wanlab/tc/engine"
)

// gsoTCPFrame builds a unit as a reader leaves it: a TCP/IPv4 or IPv6
// super-packet of payload bytes with a partial (pseudo-header) checksum,
// its virtio-net header in the headroom, for segments of mss bytes.
func gsoTCPFrame(t *testing.T, pool *engine.Pool, v6 bool, payload []byte, mss int) *engine.Packet {
	t.Helper()
	ipLen, proto := 20, byte(6)
	if v6 {
		ipLen = 40
	}
	const tcpLen = 32 // with options
	pkt := make([]byte, ipLen+tcpLen+len(payload))
	var src, dst []byte
	if v6 {
		pkt[0] = 0x60
		binary.BigEndian.PutUint16(pkt[4:], uint16(tcpLen+len(payload)))
		pkt[6], pkt[7] = proto, 64
		src, dst = pkt[8:24], pkt[24:40]
		src[15], dst[15] = 1, 2
	} else {
		pkt[0] = 0x45
		binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
		binary.BigEndian.PutUint16(pkt[4:], 0xfff0) // the ID wraps over the segments
		pkt[8], pkt[9] = 64, proto
		src, dst = pkt[12:16], pkt[16:20]
		copy(src, []byte{10, 0, 0, 1})
		copy(dst, []byte{10, 0, 1, 2})
		binary.BigEndian.PutUint16(pkt[10:], ^fold(sumWords(pkt[:20], 0)))
	}
	tcp := pkt[ipLen:]
	binary.BigEndian.PutUint32(tcp[4:], 0xffffff00) // the sequence wraps too
	tcp[12] = tcpLen / 4 << 4
	tcp[13] = 0x18 | 0x01 // PSH, ACK, FIN
	copy(tcp[tcpLen:], payload)
	pseudo := sumWords(src, 0) + sumWords(dst, 0) + uint64(proto) + uint64(len(tcp))
	binary.BigEndian.PutUint16(tcp[16:], fold(pseudo))
	p := pool.Get()
	p.SetLen(len(pkt))
	copy(p.Data, pkt)
	h := vnetHeader(p)
	h[0], h[1] = vnetCsum, gsoTCPv4
	if v6 {
		h[1] = gsoTCPv6
	}
	binary.LittleEndian.PutUint16(h[2:], uint16(ipLen+tcpLen))
	binary.LittleEndian.PutUint16(h[4:], uint16(mss))
	binary.LittleEndian.PutUint16(h[6:], uint16(ipLen))
	binary.LittleEndian.PutUint16(h[8:], 16)
	return p
}

// TestGSOSegmenter checks the segments of TCP super-packets: lengths, IPv4
// IDs and header checksums, sequence numbers, FIN and PSH on the last
// only, valid TCP checksums and the payload in order.
func TestGSOSegmenter(t *testing.T) {
	small, big := engine.NewPool(engine.Headroom+1600), engine.NewPool(engine.DefaultBufSize)
	seg := gsoSegmenter{pool: small}
	for _, v6 := range []bool{false, true} {
		for _, n := range []int{1448*3 + 100, 1448 * 45, 1000} {
			payload := make([]byte, n)
			for i := range payload {
				payload[i] = byte(i*7 + i>>8)
			}
			p := gsoTCPFrame(t, big, v6, payload, 1448)
			f := append(append([]byte{}, vnetHeader(p)...), p.Data...)
			segs, wire, ok := frameSegments(f)
			if !ok {
				t.Fatalf("v6 %v, %d bytes: frameSegments refuses the frame", v6, n)
			}
			out := seg.Segment(p, nil)
			if uint64(len(out)) != segs {
				t.Fatalf("v6 %v, %d bytes: %d segments, frameSegments says %d", v6, n, len(out), segs)
			}
			var got []byte
			var bytesOut int
			for i, q := range out {
				d := q.Data
				bytesOut += len(d)
				ipLen := 20
				var pseudo uint64
				if v6 {
					ipLen = 40
					if l := int(binary.BigEndian.Uint16(d[4:])); l != len(d)-40 {
						t.Errorf("segment %d: payload length %d of %d bytes", i, l, len(d))
					}
					pseudo = sumWords(d[8:40], 6)
				} else {
					if l := int(binary.BigEndian.Uint16(d[2:])); l != len(d) {
						t.Errorf("segment %d: total length %d of %d bytes", i, l, len(d))
					}
					if id := binary.BigEndian.Uint16(d[4:]); id != 0xfff0+uint16(i) {
						t.Errorf("segment %d: IPv4 ID %#x", i, id)
					}
					if fold(sumWords(d[:20], 0)) != 0xffff {
						t.Errorf("segment %d: bad IPv4 header checksum", i)
					}
					pseudo = sumWords(d[12:20], 6)
				}
				tcp := d[ipLen:]
				if fold(sumWords(tcp, pseudo+uint64(len(tcp)))) != 0xffff {
					t.Errorf("segment %d: bad TCP checksum", i)
				}
				if s := binary.BigEndian.Uint32(tcp[4:]); s != 0xffffff00+uint32(1448*i) {
					t.Errorf("segment %d: seq %#x", i, s)
				}
				last := i == len(out)-1
				if fin := tcp[13]&0x09 != 0; fin != last {
					t.Errorf("segment %d of %d: FIN/PSH %v", i, len(out), fin)
				}
				got = append(got, tcp[32:]...)
				small.Put(q)
			}
			if !bytes.Equal(got, payload) {
				t.Errorf("v6 %v, %d bytes: the segments' payloads differ from the super-packet's", v6, n)
			}
			if uint64(bytesOut) != wire {
				t.Errorf("v6 %v, %d bytes: segments hold %d bytes, frameSegments says %d", v6, n, bytesOut, wire)
			}
		}
	}
}

// TestGSOCut checks the smaller super-packets a unit is cut into: cut
// from a super-packet and split, each run gives the very bytes of the
// same segments split from the whole, with a partial checksum set for its
// length as the kernel's TCP leaves one, its virtio-net header, and the
// wire bytes frameSegments counts; the original is left as it was.
func TestGSOCut(t *testing.T) {
	small, big := engine.NewPool(engine.Headroom+1600), engine.NewPool(engine.DefaultBufSize)
	seg := gsoSegmenter{pool: small, units: newUnitPools()}
	for _, v6 := range []bool{false, true} {
		payload := make([]byte, 1448*44-300)
		for i := range payload {
			payload[i] = byte(i*13 + i>>9)
		}
		whole := gsoTCPFrame(t, big, v6, payload, 1448)
		if !seg.Cuttable(whole) {
			t.Fatalf("v6 %v: a TCP super-packet with a partial checksum is not cuttable", v6)
		}
		before := append([]byte{}, whole.Buf()[:engine.Headroom+len(whole.Data)]...)
		var want [][]byte
		for _, q := range seg.Segment(gsoTCPFrame(t, big, v6, payload, 1448), nil) {
			want = append(want, append([]byte{}, q.Data...))
		}
		for _, r := range [][2]int{{0, 1}, {0, 2}, {0, 43}, {1, 44}, {5, 17}, {43, 44}, {42, 44}, {0, 44}} {
			q := seg.Cut(whole, r[0], r[1])
			if !bytes.Equal(whole.Buf()[:engine.Headroom+len(whole.Data)], before) {
				t.Fatalf("v6 %v, cut %v: the unit cut was changed", v6, r)
			}
			var got [][]byte
			if r[1]-r[0] == 1 {
				if q.Segments() != 1 {
					t.Fatalf("v6 %v, cut %v: %d segments", v6, r, q.Segments())
				}
				got = append(got, q.Data)
			} else {
				f := append(append([]byte{}, vnetHeader(q)...), q.Data...)
				segs, wire, ok := frameSegments(f)
				if !ok || int(segs) != r[1]-r[0] || q.Segments() != int(segs) || q.WireLen() != int(wire) {
					t.Fatalf("v6 %v, cut %v: frameSegments %d segments %d bytes (ok %v), the unit says %d and %d",
						v6, r, segs, wire, ok, q.Segments(), q.WireLen())
				}
				ipLen := 20
				pseudo := sumWords(q.Data[12:20], 6)
				if v6 {
					ipLen, pseudo = 40, sumWords(q.Data[8:40], 6)
				}
				if c := binary.BigEndian.Uint16(q.Data[ipLen+16:]); c != fold(pseudo+uint64(len(q.Data)-ipLen)) {
					t.Errorf("v6 %v, cut %v: partial checksum %#x, not the pseudo-header's for its length", v6, r, c)
				}
				if !v6 && fold(sumWords(q.Data[:20], 0)) != 0xffff {
					t.Errorf("v6 %v, cut %v: bad IPv4 header checksum", v6, r)
				}
				for _, s := range seg.Segment(q, nil) {
					got = append(got, append([]byte{}, s.Data...))
				}
			}
			if len(got) != r[1]-r[0] {
				t.Fatalf("v6 %v, cut %v: %d segments", v6, r, len(got))
			}
			for k, g := range got {
				if !bytes.Equal(g, want[r[0]+k]) {
					t.Fatalf("v6 %v, cut %v: segment %d differs from the whole's split", v6, r, r[0]+k)
				}
			}
		}
	}
}

// FuzzSegmentable: a GSO frame that frameSegments and segmentable accept
// is cut by gsoSegmenter without a panic, into the segments
// frameSegments counted.
func FuzzSegmentable(f *testing.F) {
	f.Add(tcpFrame(3000, 1448))
	f.Add(tcpFrame(100, 0))
	small, big := engine.NewPool(engine.Headroom+1500), engine.NewPool(engine.DefaultBufSize)
	f.Fuzz(func(t *testing.T, b []byte) {
		segs, _, ok := frameSegments(b)
		if !ok || len(b) > device.MaxFrame || b[1]&^gsoECN == gsoNone || !segmentable(b, 1500) {
			return
		}
		p := big.Get()
		copy(p.Buf()[engine.Headroom-device.VnetHdrLen:], b)
		p.SetLen(len(b) - device.VnetHdrLen)
		out := gsoSegmenter{pool: small}.Segment(p, nil)
		if uint64(len(out)) != segs {
			t.Fatalf("%d segments, frameSegments says %d", len(out), segs)
		}
	})
}

// TestSegmentableRefuses: frames whose fields would make the split read
// or write outside them, or a segment outgrow a packet, are refused.
func TestSegmentableRefuses(t *testing.T) {
	big := engine.NewPool(engine.DefaultBufSize)
	payload := make([]byte, 3000)
	frame := func(edit func(h, pkt []byte)) []byte {
		p := gsoTCPFrame(t, big, false, payload, 1448)
		f := append(append([]byte{}, vnetHeader(p)...), p.Data...)
		edit(f[:device.VnetHdrLen], f[device.VnetHdrLen:])
		return f
	}
	if !segmentable(frame(func(h, pkt []byte) {}), 1500) {
		t.Fatal("a well-formed frame is refused")
	}
	for name, edit := range map[string]func(h, pkt []byte){
		"tcp header of 16 bytes":   func(h, pkt []byte) { pkt[20+12] = 4 << 4 },
		"checksum past the header": func(h, pkt []byte) { binary.LittleEndian.PutUint16(h[8:], 40) },
		"ip header of 8 bytes":     func(h, pkt []byte) { binary.LittleEndian.PutUint16(h[6:], 8) },
		"segment over the MTU":     func(h, pkt []byte) { binary.LittleEndian.PutUint16(h[4:], 1469) },
	} {
		if segmentable(frame(edit), 1500) {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestUnitPoolsFit: a unit goes into the smallest buffer that holds it,
// its virtio-net header with it; a frame only the largest holds stays in
// the reader's buffer.
func TestUnitPoolsFit(t *testing.T) {
	u := newUnitPools()
	for _, n := range []int{3000, 5000, 40000, 60000} {
		r := &reader{unit: u.Get()}
		read := r.unit
		from := engine.Headroom - device.VnetHdrLen
		for i := range device.VnetHdrLen + n {
			read.Buf()[from+i] = byte(i * 13)
		}
		p := u.fit(r, n)
		want := engine.Headroom + smallestUnit
		for want < engine.Headroom+n {
			want = engine.Headroom + (want-engine.Headroom)*2
		}
		if n > 32<<10 {
			want = engine.DefaultBufSize
		}
		if len(p.Buf()) != want || len(p.Data) != n {
			t.Errorf("%d bytes: a buffer of %d holding %d, want %d holding %d", n, len(p.Buf()), len(p.Data), want, n)
		}
		if (p == read) != (r.unit == nil) || (p == read) != (want == engine.DefaultBufSize) {
			t.Errorf("%d bytes: the reader's buffer taken %v, left %v", n, p == read, r.unit != nil)
		}
		if !bytes.Equal(p.Buf()[from:engine.Headroom+n], read.Buf()[from:engine.Headroom+n]) {
			t.Errorf("%d bytes: header or packet not copied", n)
		}
	}
}
