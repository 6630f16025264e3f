package proxy

import (
	"encoding/binary"
	"testing"

	"github.com/wanlab/wanlab/proxy/device"
)

// tcpFrame is a raw frame of an IPv4 TCP packet with payload bytes of
// payload, as a TUN with IFF_VNET_HDR gives it: GSO of gsoSize when that
// is not 0.
func tcpFrame(payload, gsoSize int) []byte {
	const ihl, thl = 20, 32
	f := make([]byte, device.VnetHdrLen+ihl+thl+payload)
	pkt := f[device.VnetHdrLen:]
	pkt[0] = 0x45
	binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
	pkt[8], pkt[9] = 64, 6
	copy(pkt[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	pkt[ihl+12] = thl / 4 << 4
	for i := range payload {
		pkt[ihl+thl+i] = byte(i)
	}
	f[0] = vnetCsum
	binary.LittleEndian.PutUint16(f[6:], ihl)
	binary.LittleEndian.PutUint16(f[8:], 16)
	if gsoSize > 0 {
		f[1] = gsoTCPv4
		binary.LittleEndian.PutUint16(f[2:], ihl+thl)
		binary.LittleEndian.PutUint16(f[4:], uint16(gsoSize))
	}
	return f
}

func TestFrameSegments(t *testing.T) {
	for _, c := range []struct {
		payload, gso int
		segs, bytes  uint64
	}{
		{1000, 0, 1, 1052},
		{3 * 1448, 1448, 3, 3*1448 + 3*52},
		{3*1448 + 1, 1448, 4, 3*1448 + 1 + 4*52},
		{65483, 1448, 46, 65483 + 46*52},
	} {
		segs, bytes, ok := frameSegments(tcpFrame(c.payload, c.gso))
		if !ok || segs != c.segs || bytes != c.bytes {
			t.Errorf("payload %d, gso %d: %d segments, %d bytes, %v; want %d and %d", c.payload, c.gso, segs, bytes, ok, c.segs, c.bytes)
		}
	}
	f := tcpFrame(3000, 1448)
	for _, bad := range [][]byte{f[:device.VnetHdrLen], f[:len(f)-1], append(f[:1:1], 0, 0, 0, 0, 0, 0xff, 0xff)} {
		if _, _, ok := frameSegments(bad); ok {
			t.Errorf("frame of %d bytes taken", len(bad))
		}
	}
}

// TestPlainPacketChecksum: a partial checksum (the pseudo-header's sum in
// the field, NEEDS_CSUM) is finished as the kernel does, so that the
// packet's L4 sum over the pseudo-header comes out right.
func TestPlainPacketChecksum(t *testing.T) {
	f := tcpFrame(999, 0)
	pkt := f[device.VnetHdrLen:]
	l4 := pkt[20:]
	var ph [12]byte
	copy(ph[:8], pkt[12:20])
	ph[9] = 6
	binary.BigEndian.PutUint16(ph[10:], uint16(len(l4)))
	binary.BigEndian.PutUint16(l4[16:], onesSum(ph[:])) // what the kernel leaves
	dst := make([]byte, len(pkt))
	if !plainPacket(f, dst) {
		t.Fatal("not taken")
	}
	whole := append(append([]byte(nil), ph[:]...), dst[20:]...)
	if s := onesSum(whole); s != 0xffff {
		t.Errorf("sum over pseudo-header and segment %#04x, want 0xffff", s)
	}
	if onesSum([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}) != 0xddf2 { // RFC 1071's example
		t.Error("RFC 1071 example")
	}
	if plainPacket(f, dst[:10]) {
		t.Error("a packet larger than its buffer was taken")
	}
}

func FuzzFrameSegments(f *testing.F) {
	f.Add(tcpFrame(3000, 1448))
	f.Add(tcpFrame(100, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		segs, bytes, ok := frameSegments(b)
		if ok && (segs == 0 || bytes < uint64(len(b)-device.VnetHdrLen)) {
			t.Fatalf("%d segments, %d bytes of a %d-byte frame", segs, bytes, len(b))
		}
		if len(b) > device.VnetHdrLen {
			plainPacket(b, make([]byte, len(b)))
		}
	})
}
