package analyzer

import (
	"sort"

	"github.com/wanlab/wanlab/analyzer/decode"
)

// rttSampler takes one direction's RTT samples: Karn's rule over the
// unacknowledged segments (tcptrace's rtt_ackin, with its post-loss ACKs
// set apart), TCP timestamp echoes, and the echo RTT the receiver sees.
type rttSampler struct {
	q       unackedQueue
	ts      tsRing
	rtt     histogram // Karn samples, µs
	tsrtt   histogram // timestamp samples, µs
	echortt histogram // receiver's TSval to the first new data echoing it, µs
	lone    histogram // ACK delay of lone segments, µs (delayed-ACK detector)

	echoSeen    bool
	lastEcho    uint32
	lastRetrans int64 // time of the latest retransmission
	// echoSeries records the echo samples for the graphs (nil: none).
	echoSeries *DirectionSeries

	// Echo samples of data that arrived above a hole wait until the hole
	// closes (the receiver's cumulative ACK reaches holeTop): a loss's
	// hole closes by a re-send a round trip on, and they are kept; one a
	// reordering left closes by the segments overtaken, arriving out of
	// order, and they go. netem's reorder sends a segment ahead of its
	// delay line, and its echo (and those of the segments sent ahead
	// after it, above the same hole) is a delay line short: at 50 ms the
	// grid's reordering path showed 25.1 ms so, and a queue of 25 ms that
	// was not there.
	holeOpen  bool
	holeTop   int64 // relative sequence: the highest end seen above a hole
	reordered bool  // a segment arrived out of order while the hole was open
	npend     int
	pend      [8]uint64 // µs
	clearMin  uint64    // µs: the lowest echo taken outside a hole (0: none yet)
}

// ackKind says what the ACK of a matched segment gives the sampler.
type ackKind uint8

const (
	ackAmbiguous ackKind = iota // the segment was retransmitted (Karn: no sample)
	ackKarn                     // a Karn sample
	ackPostLoss                 // sent before a retransmission the ACK waited for
)

// acked applies a cumulative ACK (relative sequence relAck) at time t,
// describing it in r. When a segment ends exactly at the ACK (r.matched),
// the kind returned says whether
// its delay t-r.sent is a sample: the delay of a segment sent before a
// later retransmission includes loss recovery (tcptrace's "post-loss
// acks").
func (s *rttSampler) acked(relAck, t int64, r *ackResult) ackKind {
	had := s.q.len()
	s.q.ack(relAck, r)
	if !r.matched || r.retrans {
		return ackAmbiguous
	}
	if r.sent < s.lastRetrans {
		return ackPostLoss
	}
	us := uint64((t - r.sent) / 1000)
	s.rtt.addMoments(us)
	if r.empty && had == 1 && r.acked == 1 {
		s.lone.add(us)
	}
	return ackKarn
}

// timestampEchoed takes a timestamp RTT sample from an ACK echoing tsecr
// at time t.
func (r *rttSampler) timestampEchoed(tsecr uint32, t int64) (int64, bool) {
	sent, ok := r.ts.lookup(tsecr)
	if !ok {
		return 0, false
	}
	r.tsrtt.add(uint64((t - sent) / 1000))
	return t - sent, true
}

// timestampSent notes the first sending time of every TSval (data
// segments' for the timestamp RTT, pure ACKs' for the peer's echo RTT)
// and takes an echo RTT sample, the receiver's view (Linux's
// tcp_rcv_rtt_measure_ts): new data that echoes a TSval of the peer's
// first comes one round trip after the peer sent that value.
func (r *rttSampler) timestampSent(peer *rttSampler, p *decode.Packet, sg *segment, fl PacketFlags, end int64, hsRTT int64) {
	r.ts.sent(p.TSVal, sg.t)
	if sg.len > 0 && fl&LostSegment != 0 {
		r.holeOpen, r.holeTop = true, max(r.holeTop, end)
	}
	if r.holeOpen && fl&OutOfOrder != 0 {
		r.reordered = true
	}
	if sg.len > 0 && fl&(AnyRetransmission|OutOfOrder) == 0 && sg.flags&fACK != 0 &&
		(!r.echoSeen || p.TSEcr != r.lastEcho) {
		r.echoSeen, r.lastEcho = true, p.TSEcr
		if sent, ok := peer.ts.lookup(p.TSEcr); ok {
			us := uint64((sg.t - sent) / 1000)
			// The round trip so far: the lowest echo outside a hole, or
			// the handshake (a jitter can reorder nearly every window,
			// leaving no echo outside a hole for long). Not the lowest
			// of all: those taken above a hole would walk it down.
			ref := uint64(max(0, hsRTT/1000))
			if r.clearMin > 0 && (ref == 0 || r.clearMin < ref) {
				ref = r.clearMin
			}
			switch {
			case !r.holeOpen:
				r.addClear(us)
			case ref == 0 || 4*us >= 3*ref:
				// Within a quarter of the round trip so far (or none
				// known yet): a jitter reorders too, and its early
				// segments' echoes are its lowest delays (a delay line's
				// overtaker is short by the data's one-way delay, half
				// the round trip where the delay is split evenly).
				r.echo(us)
			case r.npend < len(r.pend):
				r.pend[r.npend] = us
				r.npend++
			}
		}
	}
}

// echoAcked closes the hole the echo samples wait on once the receiver's
// cumulative ACK (relative sequence) reaches its top: they count unless
// a segment arrived out of order meanwhile.
func (r *rttSampler) echoAcked(relAck int64) {
	if !r.holeOpen || relAck < r.holeTop {
		return
	}
	if !r.reordered {
		for _, us := range r.pend[:r.npend] {
			r.addClear(us)
		}
	}
	r.holeOpen, r.reordered, r.npend = false, false, 0
}

// addClear takes an echo sample that no overtaking can have shortened.
func (r *rttSampler) addClear(us uint64) {
	if r.clearMin == 0 || us < r.clearMin {
		r.clearMin = us
	}
	r.echo(us)
}

// echo takes an echo sample: the histogram, and the graph's series when
// the direction records one.
func (r *rttSampler) echo(us uint64) {
	r.echortt.add(us)
	if r.echoSeries != nil {
		r.echoSeries.recordEchoRTT(us)
	}
}

// tsRing remembers when each TSval was first sent, for timestamp RTT
// samples. TSvals only grow, so the ring stays sorted.
type tsRing struct {
	vals  []uint32 // allocated on first use, tsRingFirst entries, doubling
	times []int64
	n     int // total ever stored
	// newest is the value stored last (valid when n > 0).
	newest uint32
	grow   bool // a lookup missed a value older than the ring holds
}

// The ring keeps at least the tsRingMin newest values and doubles, up to
// tsRingMax, when an echo refers to a value it has already dropped: a
// standing queue of Q seconds needs about Q*1000 entries at 1 ms ticks.
// Below tsRingMin it starts at tsRingFirst entries and doubles when full,
// dropping nothing, so it holds what a ring of tsRingMin would: most
// connections are short and send a few values, and the ring is most of
// the memory of the many that linger after their close. All are powers of
// two (see at).
const (
	tsRingFirst = 8
	tsRingMin   = 64
	tsRingMax   = 16384
)

// sent notes that value v was sent at t, if it is newer than the newest
// kept. That test alone is inlined: TSvals tick every millisecond or so,
// so most segments repeat the newest value.
func (r *tsRing) sent(v uint32, t int64) {
	if r.n > 0 && int32(v-r.newest) <= 0 { // !seqGT(v, r.newest)
		return
	}
	r.store(v, t)
}

// store adds v, sent at t, as the newest value, growing the ring first if
// a lookup asked for more history.
func (r *tsRing) store(v uint32, t int64) {
	if r.vals == nil {
		r.vals, r.times = make([]uint32, tsRingFirst), make([]int64, tsRingFirst)
	}
	if r.n == len(r.vals) && len(r.vals) < tsRingMin {
		// Full before it ever dropped a value: the values sit in slots
		// 0..n-1, where the doubled ring wants them too.
		r.vals = append(make([]uint32, 0, 2*len(r.vals)), r.vals...)[:2*len(r.vals)]
		r.times = append(make([]int64, 0, 2*len(r.times)), r.times...)[:2*len(r.times)]
	}
	if r.grow && len(r.vals) < tsRingMax {
		r.grow = false
		k := min(r.n, len(r.vals))
		vals, times := make([]uint32, 2*len(r.vals)), make([]int64, 2*len(r.vals))
		for i := 0; i < k; i++ {
			j := r.at(r.n - k + i)
			vals[i], times[i] = r.vals[j], r.times[j]
		}
		r.vals, r.times, r.n = vals, times, k
	}
	j := r.at(r.n)
	r.vals[j] = v
	r.times[j] = t
	r.newest = v
	r.n++
}

// at is the slot of the i-th value ever stored. The ring's length is a
// power of two (tsRingMin, doubling), so a mask stands in for the modulo:
// an integer division per access on the per-packet path otherwise.
func (r *tsRing) at(i int) int { return i & (len(r.vals) - 1) }

func (r *tsRing) lookup(v uint32) (int64, bool) {
	k := min(r.n, len(r.vals))
	if k == 0 {
		return 0, false
	}
	// The echoed value is almost always one of the newest.
	for i := 1; i <= min(k, 4); i++ {
		j := r.at(r.n - i)
		if r.vals[j] == v {
			return r.times[j], true
		}
	}
	// Binary search over the k newest entries, oldest first.
	i := sort.Search(k, func(i int) bool {
		return !seqLT(r.vals[r.at(r.n-k+i)], v)
	})
	if i < k && r.vals[r.at(r.n-k+i)] == v {
		return r.times[r.at(r.n-k+i)], true
	}
	if i == 0 && k == len(r.vals) && k >= tsRingMin {
		r.grow = true // older than the oldest kept
	}
	return 0, false
}
