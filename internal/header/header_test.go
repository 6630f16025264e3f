package header

import (
	"encoding/binary"
	"errors"
	"testing"
)

func ipv4(proto uint8, payload int, flagsFrag uint16) []byte {
	b := make([]byte, 20+payload)
	b[0], b[1] = 0x45, 0xb9 // DSCP 46, ECT(1)
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	binary.BigEndian.PutUint16(b[4:], 0x1234)
	binary.BigEndian.PutUint16(b[6:], flagsFrag)
	b[8], b[9] = 64, proto
	copy(b[12:], []byte{10, 0, 1, 2, 10, 0, 2, 2})
	if payload >= 4 {
		binary.BigEndian.PutUint16(b[20:], 4242)
		binary.BigEndian.PutUint16(b[22:], 80)
	}
	return b
}

func ipv6(next uint8, ext []byte, payload int) []byte {
	b := make([]byte, 40+len(ext)+payload)
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:], uint16(len(ext)+payload))
	b[6], b[7] = next, 64
	b[8], b[39] = 0xfd, 2
	copy(b[40:], ext)
	if payload >= 4 {
		binary.BigEndian.PutUint16(b[40+len(ext):], 5353)
		binary.BigEndian.PutUint16(b[42+len(ext):], 443)
	}
	return b
}

func TestParseIPv4(t *testing.T) {
	b := ipv4(ProtoTCP, 20, 0x4000) // DF
	ip, err := ParseIP(b)
	if err != nil || ip.Version != 4 || ip.HeaderLen != 20 || ip.Length != 40 || ip.Proto != ProtoTCP ||
		ip.DSCP != 46 || ip.ECN != 1 || ip.ID != 0x1234 || ip.Src.String() != "10.0.1.2" || !ip.TransportOK {
		t.Fatalf("%+v, %v", ip, err)
	}
	if s, d, ok := Ports(ip.Transport(b)); !ok || s != 4242 || d != 80 {
		t.Fatalf("ports %d %d %v", s, d, ok)
	}
	// A later fragment carries no transport header, whatever its bytes.
	fr := ipv4(ProtoTCP, 20, 0x0010)
	if ip, err := ParseIP(fr); err != nil || !ip.LaterFragment || ip.TransportOK || ip.Transport(fr) != nil {
		t.Fatalf("later fragment: %+v, %v", ip, err)
	}
	// The first fragment (MF, offset 0) does.
	if ip, err := ParseIP(ipv4(ProtoUDP, 8, 0x2000)); err != nil || ip.LaterFragment || !ip.TransportOK {
		t.Fatalf("first fragment: %+v, %v", ip, err)
	}
	// A total length of 0 states no length (a TSO or BIG TCP super-packet
	// in a capture): parsed, Length 0; callers that need a length refuse it.
	z := ipv4(ProtoTCP, 20, 0)
	z[2], z[3] = 0, 0
	if ip, err := ParseIP(z); err != nil || ip.Length != 0 || len(ip.Transport(z)) != 20 {
		t.Fatalf("total length 0: %+v, %v", ip, err)
	}
	// A snap length shorter than the packet: Length says the truth.
	if ip, err := ParseIP(b[:24]); err != nil || ip.Length != 40 || len(ip.Transport(b[:24])) != 4 {
		t.Fatalf("snapped: %+v, %v", ip, err)
	}
	for name, c := range map[string]struct {
		b   []byte
		err error
	}{
		"empty":         {nil, ErrTruncated},
		"19 bytes":      {b[:19], ErrTruncated},
		"ihl 4":         {append([]byte{0x44}, b[1:]...), ErrMalformed},
		"ihl past data": {append([]byte{0x4f}, b[1:24]...), ErrTruncated},
		"total < ihl":   {append(append([]byte{}, b[:2]...), append([]byte{0, 10}, b[4:]...)...), ErrMalformed},
		"version 5":     {append([]byte{0x55}, b[1:]...), ErrVersion},
	} {
		if _, err := ParseIP(c.b); !errors.Is(err, c.err) {
			t.Errorf("%s: %v, want %v", name, err, c.err)
		}
	}
}

func TestParseIPv6(t *testing.T) {
	b := ipv6(ProtoUDP, nil, 8)
	ip, err := ParseIP(b)
	if err != nil || ip.Version != 6 || ip.HeaderLen != 40 || ip.Length != 48 || ip.Proto != ProtoUDP || !ip.TransportOK {
		t.Fatalf("%+v, %v", ip, err)
	}
	// Hop-by-hop (8 bytes) then a first fragment, then TCP.
	hop := []byte{ipv6Frag, 0, 0, 0, 0, 0, 0, 0}
	frag := []byte{ProtoTCP, 0, 0, 1, 0, 0, 0, 1} // offset 0, M set
	b = ipv6(ipv6HopOpt, append(hop, frag...), 20)
	if ip, err := ParseIP(b); err != nil || ip.Proto != ProtoTCP || ip.HeaderLen != 56 || !ip.TransportOK {
		t.Fatalf("extension headers: %+v, %v", ip, err)
	}
	ip, _ = ParseIP(b)
	if s, d, ok := Ports(ip.Transport(b)); !ok || s != 5353 || d != 443 {
		t.Fatalf("ports after extension headers: %d %d %v", s, d, ok)
	}
	// A later fragment.
	later := []byte{ProtoTCP, 0, 0, 0x10, 0, 0, 0, 1}
	if ip, err := ParseIP(ipv6(ipv6Frag, later, 20)); err != nil || !ip.LaterFragment || ip.TransportOK {
		t.Fatalf("later fragment: %+v, %v", ip, err)
	}
	// Extension headers cut off by a snap length: the transport header is unknown.
	if ip, err := ParseIP(ipv6(ipv6HopOpt, hop, 0)[:44]); err != nil || ip.TransportOK {
		t.Fatalf("cut extension header: %+v, %v", ip, err)
	}
	// Payload length 0 with data behind: a jumbogram, no stated length.
	j := ipv6(ProtoTCP, nil, 20)
	j[4], j[5] = 0, 0
	if ip, err := ParseIP(j); err != nil || ip.Length != 0 {
		t.Fatalf("jumbo: %+v, %v", ip, err)
	}
	if ip, err := ParseIP(ipv6(59, nil, 0)); err != nil || ip.Length != 40 {
		t.Fatalf("empty payload: %+v, %v", ip, err)
	}
	if _, err := ParseIP(b[:39]); !errors.Is(err, ErrTruncated) {
		t.Fatalf("39 bytes: %v", err)
	}
}

func checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func TestSetCE(t *testing.T) {
	b := ipv4(ProtoUDP, 8, 0)
	binary.BigEndian.PutUint16(b[10:], checksum(b[:20]))
	if !SetCE(b) || b[1]&3 != 3 {
		t.Fatal("ECT(1) not marked CE")
	}
	if checksum(b[:20]) != 0 {
		t.Fatalf("header checksum wrong after marking: %#x", checksum(b[:20]))
	}
	if !SetCE(b) {
		t.Fatal("CE not kept")
	}
	notECT := ipv4(ProtoUDP, 8, 0)
	notECT[1] = 0
	if SetCE(notECT) || SetCE(nil) || SetCE(notECT[:19]) {
		t.Fatal("not-ECT or truncated marked")
	}
	v6 := ipv6(ProtoUDP, nil, 8)
	v6[1] = 0x10 // ECT(1)
	if !SetCE(v6) || (v6[1]>>4)&3 != 3 {
		t.Fatal("IPv6 ECT not marked")
	}
}

func FuzzParseIP(f *testing.F) {
	f.Add(ipv4(ProtoTCP, 20, 0))
	f.Add(ipv4(ProtoTCP, 20, 0x10))
	f.Add(ipv6(ProtoUDP, nil, 8))
	f.Add(ipv6(ipv6HopOpt, []byte{ipv6Frag, 0, 0, 0, 0, 0, 0, 0, ProtoTCP, 0, 0, 1, 0, 0, 0, 1}, 20))
	f.Add([]byte{0x4f})
	f.Fuzz(func(t *testing.T, b []byte) {
		ip, err := ParseIP(b)
		if err != nil {
			return
		}
		if ip.HeaderLen < 20 || (ip.Version == 4 && ip.HeaderLen > len(b)) {
			t.Fatalf("header length %d of %d bytes", ip.HeaderLen, len(b))
		}
		if ip.Length != 0 && ip.Length < 20 {
			t.Fatalf("length %d", ip.Length)
		}
		if l4 := ip.Transport(b); l4 != nil {
			if !ip.TransportOK || len(l4) > len(b)-ip.HeaderLen {
				t.Fatalf("transport %d bytes of %d", len(l4), len(b))
			}
			Ports(l4)
		}
		if ip.LaterFragment && ip.TransportOK {
			t.Fatal("a later fragment with a transport header")
		}
		c := append([]byte(nil), b...)
		SetCE(c)
	})
}

// TestStatedLengthIsParseIPs: the hot path's check agrees with ParseIP.
func TestStatedLengthIsParseIPs(t *testing.T) {
	for _, b := range [][]byte{ipv4(ProtoTCP, 20, 0), ipv6(ProtoUDP, nil, 8), ipv4(ProtoTCP, 20, 0)[:19], {0x45}, {0x60, 0}, nil} {
		ip, perr := ParseIP(b)
		n, err := StatedLength(b)
		if !errors.Is(err, perr) || (err == nil && n != ip.Length) {
			t.Errorf("% x: StatedLength %d, %v; ParseIP %d, %v", b, n, err, ip.Length, perr)
		}
	}
}

// BenchmarkParseIP is the classifier's per-packet decode.
func BenchmarkParseIP(b *testing.B) {
	for _, c := range []struct {
		name string
		pkt  []byte
	}{{"ipv4", ipv4(ProtoTCP, 1460, 0)}, {"ipv6", ipv6(ProtoTCP, nil, 1440)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.pkt)))
			var ip IP
			for range b.N {
				err := ip.Parse(c.pkt)
				if err != nil || !ip.TransportOK {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzLocate: Locate, the lean entry point, agrees with ParseIP on every
// input (same error, same layout), and leaves nothing of an earlier
// packet behind.
func FuzzLocate(f *testing.F) {
	f.Add(ipv4(ProtoTCP, 20, 0))
	f.Add(ipv4(ProtoTCP, 20, 0x10))
	f.Add(ipv6(ProtoUDP, nil, 8))
	f.Add(ipv6(ipv6HopOpt, []byte{ipv6Frag, 0, 0, 0, 0, 0, 0, 0, ProtoTCP, 0, 0, 1, 0, 0, 0, 1}, 20))
	f.Add(ipv6(ipv6Frag, []byte{ProtoTCP, 0, 0, 0x10, 0, 0, 0, 1}, 20))
	f.Add([]byte{0x4f})
	f.Fuzz(func(t *testing.T, b []byte) {
		ip, perr := ParseIP(b)
		// A layout left over from another packet must not show through.
		l := Layout{Version: 9, Proto: 9, ID: 9, HeaderLen: 9, Length: 9, LaterFragment: true, TransportOK: true}
		err := l.Locate(b)
		if err != perr || l != ip.Layout {
			t.Fatalf("% x: Locate %+v, %v; ParseIP %+v, %v", b, l, err, ip.Layout, perr)
		}
	})
}
