package analyzer

import "sort"

// sentSegment is one transmitted sequence range waiting for its ACK.
// Sequence numbers are unwrapped 64-bit offsets from the direction's ISN.
type sentSegment struct {
	start, end int64
	sent       int64 // capture time of the first transmission, ns
	// own is that transmission's frame's own capture time, which is sent
	// unless the capture's timestamps stepped back there (sent is then
	// the frame's before): Wireshark's ack_rtt is timed by it.
	own     int64
	retrans bool // some byte of it was sent again (Karn: no RTT sample)
}

// unackedQueue holds a direction's unacknowledged segments in sequence
// order, for RTT sampling. It is a slice used as a deque: acknowledged
// segments leave from the front, new data joins at the back, and only a
// retransmission or a reordered segment touches the middle (binary search).
// Its length is bounded by maxUnacked; beyond it new segments are not
// tracked (Wireshark stops at a similar bound), which only costs samples.
type unackedQueue struct {
	buf      []sentSegment
	head     int
	overflow int
	// acked is the highest cumulative ACK applied (valid once ackSeen):
	// everything below it has been acknowledged already.
	acked   int64
	ackSeen bool
}

const maxUnacked = 1 << 16

func (q *unackedQueue) len() int { return len(q.buf) - q.head }

func (q *unackedQueue) items() []sentSegment { return q.buf[q.head:] }

// sent records a transmission of [start,end) at time t (own: its frame's
// own time, see sentSegment). It returns whether
// the range overlapped a segment still waiting for its ACK.
//
// A resend of bytes already acknowledged (a SYN repeated after the
// SYN-ACK, a spurious retransmission) finds an emptied queue and is
// recorded like a first transmission, as Wireshark's ack_rtt times it;
// but its range went out before, so an ACK of it is ambiguous and gives
// no Karn sample (tcptrace takes none either).
func (q *unackedQueue) sent(start, end, t, own int64) (overlapped bool) {
	overlapped = q.record(start, end, t, own)
	if q.ackSeen && start < q.acked {
		items := q.items()
		for i := len(items) - 1; i >= 0 && items[i].end > start; i-- {
			if items[i].start < end {
				items[i].retrans = true
			}
		}
	}
	return overlapped
}

func (q *unackedQueue) record(start, end, t, own int64) (overlapped bool) {
	items := q.items()
	n := len(items)
	if n == 0 || start >= items[n-1].end {
		q.push(sentSegment{start: start, end: end, sent: t, own: own})
		return false
	}
	// First segment whose end is beyond start.
	i := sort.Search(n, func(i int) bool { return items[i].end > start })
	exactEnd := false
	for j := i; j < n && items[j].start < end; j++ {
		items[j].retrans = true
		overlapped = true
		if items[j].end == end {
			exactEnd = true
		}
		if !exactEnd && items[j].end > end && q.len() < maxUnacked {
			// A retransmission that ends inside an earlier segment (a GSO
			// super-segment resent MSS by MSS). Wireshark keeps each
			// transmission and matches an ACK to the one ending exactly
			// at it, so split here: the head ends at this
			// retransmission's end and takes its time; the tail keeps
			// the original transmission (and its Karn standing).
			tail := items[j]
			tail.start = end
			tail.retrans = false
			items[j].end = end
			items[j].sent, items[j].own = t, own
			q.buf = append(q.buf, sentSegment{})
			items = q.buf[q.head:]
			copy(items[j+2:], items[j+1:])
			items[j+1] = tail
			break
		}
	}
	if !overlapped && q.len() < maxUnacked {
		// A range never seen before, below the highest sent: a reordered
		// segment that fills a hole. Insert it in order.
		q.buf = append(q.buf, sentSegment{})
		items = q.buf[q.head:]
		copy(items[i+1:], items[i:])
		items[i] = sentSegment{start: start, end: end, sent: t, own: own}
	}
	return overlapped
}

func (q *unackedQueue) push(s sentSegment) {
	if q.len() >= maxUnacked {
		q.overflow++
		return
	}
	if q.head > 0 && len(q.buf) == cap(q.buf) {
		// Slide the live part to the front instead of growing.
		n := copy(q.buf, q.buf[q.head:])
		q.buf = q.buf[:n]
		q.head = 0
	}
	q.buf = append(q.buf, s)
}

// ackResult describes what one cumulative ACK did to the queue.
type ackResult struct {
	matched bool  // a segment ended exactly at the ACK (Wireshark's ack_rtt)
	sent    int64 // its first transmission time
	own     int64 // that transmission's frame's own time (sentSegment.own)
	retrans bool  // it was retransmitted: no Karn sample
	acked   int   // segments fully acknowledged
	empty   bool  // nothing is outstanding afterwards
}

// ack applies a cumulative acknowledgement up to ack, describing it in r,
// which must be zero (the caller's new variable: clearing it here again
// was a store per field per ACK).
func (q *unackedQueue) ack(ack int64, r *ackResult) {
	if !q.ackSeen || ack > q.acked {
		q.acked, q.ackSeen = ack, true
	}
	buf, head := q.buf, q.head
	for head < len(buf) {
		s := &buf[head]
		if s.end <= ack {
			if s.end == ack {
				r.matched, r.sent, r.own, r.retrans = true, s.sent, s.own, s.retrans
			}
			r.acked++
			head++
			continue
		}
		if s.start < ack {
			s.start = ack // partial ACK
		}
		break
	}
	q.head = head
	if head == len(buf) {
		q.buf = buf[:0]
		q.head = 0
		r.empty = true
	}
}
