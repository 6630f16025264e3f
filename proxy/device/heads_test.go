package device

import (
	"encoding/binary"
	"slices"
	"testing"
)

// tcpSeg is an IPv4 TCP segment of payload bytes from sport, with PSH when
// psh.
func tcpSeg(sport uint16, payload int, psh bool) []byte {
	p := make([]byte, 40+payload)
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	p[8], p[9] = 64, 6
	copy(p[12:], []byte{10, 0, 0, 1})
	copy(p[16:], []byte{10, 0, 0, 2})
	binary.BigEndian.PutUint16(p[20:], sport)
	binary.BigEndian.PutUint16(p[22:], 80)
	p[32] = 5 << 4
	p[33] = 0x10
	if psh {
		p[33] |= 0x08
	}
	return p
}

// TestWriteHeads checks which packets of a batch the offload write copies
// into a buffer with room to coalesce: the first of each flow, then one
// each time the head's buffer is full or after a PSH, as wireguard-go's
// GRO starts a new super-packet there; nothing else.
func TestWriteHeads(t *testing.T) {
	heads := func(batch [][]byte) []int {
		d := &offloadDevice{flows: make([]flowHead, 0, maxHeads)}
		var out []int
		for i, p := range batch {
			if d.mayHead(p) {
				out = append(out, i)
			}
		}
		return out
	}
	var one [][]byte
	for range 128 {
		one = append(one, tcpSeg(1000, 1460, false))
	}
	// 65519 bytes of room: the head's 1500 and 43 payloads of 1460.
	if got, want := heads(one), []int{0, 44, 88}; !slices.Equal(got, want) {
		t.Errorf("one flow: heads %v, want %v", got, want)
	}
	one[10] = tcpSeg(1000, 1460, true)
	if got, want := heads(one), []int{0, 11, 55, 99}; !slices.Equal(got, want) {
		t.Errorf("PSH at 10: heads %v, want %v", got, want)
	}
	var two [][]byte
	for i := range 20 {
		two = append(two, tcpSeg(1000+uint16(i%2), 1460, false))
	}
	if got, want := heads(two), []int{0, 1}; !slices.Equal(got, want) {
		t.Errorf("two flows: heads %v, want %v", got, want)
	}
	icmp := tcpSeg(1000, 100, false)
	icmp[9] = 1
	if got := heads([][]byte{icmp, icmp}); len(got) != 0 {
		t.Errorf("ICMP: heads %v, want none", got)
	}
	var many [][]byte
	for i := range maxHeads + 3 {
		many = append(many, tcpSeg(2000+uint16(i), 100, false), tcpSeg(2000+uint16(i), 100, false))
	}
	got := heads(many)
	// Each of the first maxHeads flows: its first packet; past them,
	// every packet.
	if len(got) != maxHeads+2*3 {
		t.Errorf("%d flows: %d heads, want %d", maxHeads+3, len(got), maxHeads+6)
	}
	if got := heads([][]byte{{0x45, 0, 0}}); len(got) != 0 {
		t.Errorf("a packet that does not parse: heads %v, want none", got)
	}
}
