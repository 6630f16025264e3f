package analyzer

import (
	"encoding/binary"
	"time"

	"github.com/wanlab/wanlab/analyzer/decode"
)

// queuedPacket is a decoded TCP packet waiting for the merge of
// interfaces.
type queuedPacket struct {
	p     decode.Packet
	ns    int64  // capture time
	frame int    // frame number in the file
	fp    uint64 // dupFingerprint
}

// frameQueue holds one interface's buffered packets in time order: a
// slice used as a deque, filled by decoding in place (slot, then commit).
type frameQueue struct {
	buf     []queuedPacket
	head    int
	pending bool // the last element is a slot not yet committed
}

func (q *frameQueue) len() int {
	n := len(q.buf) - q.head
	if q.pending {
		n--
	}
	return n
}

func (q *frameQueue) first() *queuedPacket { return &q.buf[q.head] }

// slot returns the place of the next packet; it joins the queue only on
// commit, and the next slot reuses it otherwise.
func (q *frameQueue) slot() *queuedPacket {
	if !q.pending {
		if q.head > 0 && len(q.buf) == cap(q.buf) {
			n := copy(q.buf, q.buf[q.head:])
			q.buf = q.buf[:n]
			q.head = 0
		}
		q.buf = append(q.buf, queuedPacket{})
		q.pending = true
	}
	return &q.buf[len(q.buf)-1]
}

// commit adds the slot to the queue, in time order (after packets of the
// same time, so the merge is stable as reordercap's sort).
func (q *frameQueue) commit() {
	q.pending = false
	for i := len(q.buf) - 1; i > q.head && q.buf[i-1].ns > q.buf[i].ns; i-- {
		q.buf[i-1], q.buf[i] = q.buf[i], q.buf[i-1]
	}
}

// pop removes the oldest packet; the pointer is valid until the next slot.
func (q *frameQueue) pop() *queuedPacket {
	p := &q.buf[q.head]
	q.head++
	if q.len() == 0 && !q.pending {
		q.buf, q.head = q.buf[:0], 0
	}
	return p
}

// dupEntry is a packet's fingerprint (dupFingerprint, a 64-bit hash),
// capture time and interface.
type dupEntry struct {
	fp    uint64
	ns    int64
	iface int32
}

// dupFilter remembers the latest packets by fingerprint in a hash table
// where each has two slots (the older entry gives way), so that a packet
// between a frame and its copy rarely evicts the frame. Two different
// packets within dupWithin share a fingerprint with a chance of about
// 2^-64 per pair.
type dupFilter struct {
	table *[dupSlots]dupEntry
}

const (
	dupSlots = 4096
	// dupWithin: a copy on another interface; dupSameIface: a copy on
	// the same one, sooner than a retransmission can be sent (a
	// mirror port that saw the frame twice). A copy later than that is
	// a retransmission of the same bytes, as Wireshark counts it.
	dupWithin    = int64(200 * time.Millisecond)
	dupSameIface = int64(time.Millisecond)
)

// dupFingerprint is the fingerprint by which the duplicate filter knows
// p, or 0 for a packet it never calls a duplicate: IPv6 has no ID, and an
// IPv4 ID of 0 (allowed with DF, RFC 6864) tells nothing. It hashes what
// identifies one IPv4 packet (addresses, ports, sequence and ACK numbers,
// payload length, IP ID and TCP flags): a second frame that agrees in all
// of them is the same packet captured again, since a sender gives every
// packet it sends, a retransmission included, a new IP ID. It depends on
// the packet alone, so the reader stage computes it beside the decoding.
//
// The words are read from p and mixed in registers: a key struct, stored
// field by field and copied in wide moves, would stall the CPU's store
// forwarding on every packet.
func dupFingerprint(p *decode.Packet) uint64 {
	if p.IPVersion != 4 || p.IPID == 0 {
		return 0
	}
	h := dupMix(0x243F6A8885A308D3, uint64(binary.BigEndian.Uint32(p.Src[:4]))<<32|uint64(binary.BigEndian.Uint32(p.Dst[:4])))
	h = dupMix(h, uint64(p.SrcPort)<<48|uint64(p.DstPort)<<32|uint64(p.Seq))
	h = dupMix(h, uint64(p.Ack)<<32|uint64(uint32(p.PayloadLen)))
	h = dupMix(h, uint64(p.PayloadLen>>32)<<24|uint64(p.IPID)<<8|uint64(p.Flags))
	return max(h, 1)
}

// dupMix is one multiply-xorshift round: a bijection of the running hash h
// for a given word x, so packets that differ in one word never collide.
func dupMix(h, x uint64) uint64 {
	h = (h ^ x) * 0x9E3779B97F4A7C15
	return h ^ h>>31
}

// duplicate reports whether the packet of fingerprint h (dupFingerprint),
// captured at ns on interface iface, is a copy of a packet seen shortly
// before.
func (f *dupFilter) duplicate(h uint64, ns int64, iface int32) bool {
	if h == 0 {
		return false
	}
	if f.table == nil {
		f.table = new([dupSlots]dupEntry)
	}
	a, b := &f.table[h>>(64-12)], &f.table[h&(dupSlots-1)]
	for _, e := range [2]*dupEntry{a, b} {
		if e.fp == h && ns >= e.ns {
			if d := ns - e.ns; d <= dupSameIface || d <= dupWithin && e.iface != iface {
				return true
			}
		}
	}
	if b.ns < a.ns {
		a = b
	}
	*a = dupEntry{fp: h, ns: ns, iface: iface}
	return false
}
