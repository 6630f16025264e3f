package proxy

import (
	"encoding/binary"
	"testing"
)

// ipv4 builds an IPv4 packet with protocol proto and payload, flags and
// fragment offset given (in 8-byte units).
func ipv4(proto byte, payload []byte, fragOff uint16, more bool) []byte {
	p := make([]byte, 20+len(payload))
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	binary.BigEndian.PutUint16(p[4:], 0x1234)
	ff := fragOff
	if more {
		ff |= 0x2000
	}
	binary.BigEndian.PutUint16(p[6:], ff)
	p[8] = 64
	p[9] = proto
	copy(p[12:], []byte{10, 0, 1, 2})
	copy(p[16:], []byte{10, 0, 2, 2})
	copy(p[20:], payload)
	return p
}

func ipv6(next byte, payload []byte) []byte {
	p := make([]byte, 40+len(payload))
	p[0] = 0x60
	binary.BigEndian.PutUint16(p[4:], uint16(len(payload)))
	p[6] = next
	p[7] = 64
	p[8], p[9], p[23] = 0xfd, 0x00, 2
	p[24], p[25], p[39] = 0xfd, 0x00, 3
	copy(p[40:], payload)
	return p
}

func TestIPLength(t *testing.T) {
	udp := make([]byte, 12)
	good4 := ipv4(17, udp, 0, false)
	good6 := ipv6(17, udp)
	padded := append(append([]byte(nil), good4...), 0, 0, 0, 0)
	for _, c := range []struct {
		name string
		pkt  []byte
		n    int
		ok   bool
	}{
		{"ipv4", good4, len(good4), true},
		{"ipv6", good6, len(good6), true},
		{"ipv4 padded", padded, len(good4), true},
		{"empty", nil, 0, false},
		{"version 5", append([]byte{0x55}, good4[1:]...), 0, false},
		{"ipv4 truncated header", good4[:19], 0, false},
		{"ipv4 truncated payload", good4[:len(good4)-1], 0, false},
		{"ipv4 ihl 4", append([]byte{0x44}, good4[1:]...), 0, false},
		{"ipv4 ihl beyond total", append([]byte{0x4f}, good4[1:]...), 0, false},
		{"ipv6 truncated header", good6[:39], 0, false},
		{"ipv6 truncated payload", good6[:len(good6)-1], 0, false},
		// A header that states no length (a TSO/BIG TCP super-packet, a
		// jumbogram) parses, as the analyzer needs, but is never forwarded.
		{"ipv4 total length 0", append(append([]byte{}, good4[:2]...), append([]byte{0, 0}, good4[4:]...)...), 0, false},
		{"ipv6 payload length 0 with data", append(append([]byte{}, good6[:4]...), append([]byte{0, 0}, good6[6:]...)...), 0, false},
	} {
		n, ok := ipLength(c.pkt)
		if ok != c.ok || (ok && n != c.n) {
			t.Errorf("%s: ipLength = %d, %v; want %d, %v", c.name, n, ok, c.n, c.ok)
		}
	}
}

func FuzzIPLength(f *testing.F) {
	f.Add(ipv4(6, make([]byte, 20), 0, false))
	f.Add(ipv6(58, make([]byte, 8)))
	f.Add([]byte{0x45, 0, 0, 10})
	f.Fuzz(func(t *testing.T, p []byte) {
		n, ok := ipLength(p)
		if !ok {
			return
		}
		if n > len(p) {
			t.Fatalf("length %d beyond %d bytes", n, len(p))
		}
		if v := p[0] >> 4; (v == 4 && n < 20) || (v == 6 && n < 40) || (v != 4 && v != 6) {
			t.Fatalf("accepted version %d packet of length %d", v, n)
		}
	})
}

// BenchmarkIPLength is the reader's per-packet header check.
func BenchmarkIPLength(b *testing.B) {
	for _, c := range []struct {
		name string
		pkt  []byte
	}{{"ipv4", ipv4(6, make([]byte, 1460), 0, false)}, {"ipv6", ipv6(6, make([]byte, 1440))}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.pkt)))
			for range b.N {
				if _, ok := ipLength(c.pkt); !ok {
					b.Fatal("rejected")
				}
			}
		})
	}
}
