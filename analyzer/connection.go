package analyzer

import (
	"net/netip"
	"sort"
	"time"

	"github.com/wanlab/wanlab/analyzer/decode"
)

// Connection is one TCP connection (a 4-tuple between a SYN, or the first
// packet seen, and the next reuse of the tuple).
type Connection struct {
	Index  int            `json:"index"` // 1-based, in order of first packet
	Client netip.AddrPort `json:"client"`
	Server netip.AddrPort `json:"server"`
	// Start and Duration: first packet (relative to the capture's first
	// frame) and time to the last packet.
	Start    time.Duration `json:"start_ns"`
	Duration time.Duration `json:"duration_ns"`
	// HandshakeSeen: both SYNs were captured, so window scaling is known.
	HandshakeSeen bool `json:"handshake_seen"`
	// State at the end of the capture: "open", "closed" (FIN both ways),
	// "half-closed" or "reset".
	State string `json:"state"`
	// Directions[0] carries the client's data, Directions[1] the server's.
	Directions [2]*Direction `json:"directions"`
	// Diagnosis of the direction that carried the most data.
	Diagnosis *Diagnosis `json:"diagnosis"`

	clientIsLow bool
	firstT      int64
	lastT       int64
	firstRTT    int64 // Wireshark's ts_first_rtt (iRTT): latest SYN to the next pure ACK
	mruSYN      int64
	mruSYNSet   bool
	synT        int64 // time of the client's SYN + 1 (0: not seen)
	hsRTT       int64 // SYN to the ACK completing the handshake: the path RTT wherever the capture was taken
	dirs        [2]dirAnalysis
	rst         bool
}

// Direction is the analysis of the data one endpoint sent, with the ACKs
// and windows its peer returned.
type Direction struct {
	From netip.AddrPort `json:"from"`
	To   netip.AddrPort `json:"to"`
	DirectionStats
	Series    *DirectionSeries `json:"-"`
	Diagnosis *Diagnosis       `json:"diagnosis,omitempty"`
}

// DirectionStats are the counters of one direction. JSON names are the
// contract documented in SCHEMA.md.
type DirectionStats struct {
	Packets     int   `json:"packets"`
	DataPackets int   `json:"data_packets"`
	PureAcks    int   `json:"pure_acks"`
	SACKPackets int   `json:"sack_packets"`
	DataBytes   int64 `json:"data_bytes"`
	// MaxSegmentBytes is the largest payload seen (a GRO/TSO capture
	// shows super-segments larger than the MSS).
	MaxSegmentBytes int   `json:"max_segment_bytes"`
	UniqueBytes     int64 `json:"unique_bytes"`

	RetransmittedPackets    int   `json:"retransmitted_packets"`
	RetransmittedBytes      int64 `json:"retransmitted_bytes"`
	FastRetransmissions     int   `json:"fast_retransmissions"`
	SpuriousRetransmissions int   `json:"spurious_retransmissions"`
	OutOfOrderPackets       int   `json:"out_of_order_packets"`
	LostSegments            int   `json:"lost_segments"`
	AckedUnseen             int   `json:"acked_unseen_segments"`
	DupAcks                 int   `json:"dup_acks"`
	TripleDupAcks           int   `json:"triple_dup_acks"`
	ZeroWindows             int   `json:"zero_windows"`
	WindowFull              int   `json:"window_full"`
	ZeroWindowProbes        int   `json:"zero_window_probes"`
	KeepAlives              int   `json:"keep_alives"`

	// SYN options this endpoint sent.
	MSS           int  `json:"mss"`
	WindowScale   int  `json:"window_scale"` // -1: not offered or SYN not seen
	SACKPermitted bool `json:"sack_permitted"`
	Timestamps    bool `json:"timestamps"`
	// WindowScaleKnown: both SYNs were seen, so windows are in bytes; if
	// false, windows are the raw 16-bit field values.
	WindowScaleKnown bool `json:"window_scale_known"`

	RTTSamples int `json:"rtt_samples"`
	// PostLossAcks: ACKs of never-retransmitted segments sent before a
	// retransmission; they include recovery time and give no sample.
	PostLossAcks int     `json:"post_loss_acks"`
	RTTMinMs     float64 `json:"rtt_min_ms"`
	RTTAvgMs     float64 `json:"rtt_avg_ms"`
	RTTMaxMs     float64 `json:"rtt_max_ms"`
	RTTStdevMs   float64 `json:"rtt_stdev_ms"`
	RTTP50Ms     float64 `json:"rtt_p50_ms"`
	RTTP99Ms     float64 `json:"rtt_p99_ms"`
	// RTT from TCP timestamps (an ACK's TSecr matched to the first
	// segment that carried that TSval).
	TSRTTSamples int     `json:"ts_rtt_samples"`
	TSRTTMinMs   float64 `json:"ts_rtt_min_ms"`
	TSRTTP50Ms   float64 `json:"ts_rtt_p50_ms"`
	TSRTTMaxMs   float64 `json:"ts_rtt_max_ms"`
	// Echo RTT, measurable next to the receiver too: from a TSval the
	// receiver sent to the first new data segment echoing it (one round
	// trip plus the sender's reaction; TSval ticks add up to 1 ms).
	EchoRTTSamples int     `json:"echo_rtt_samples"`
	EchoRTTMinMs   float64 `json:"echo_rtt_min_ms"`
	EchoRTTP50Ms   float64 `json:"echo_rtt_p50_ms"`

	// Window this endpoint advertised (tcptrace's "win adv").
	MaxWindowBytes int64 `json:"max_window_bytes"`
	MinWindowBytes int64 `json:"min_window_bytes"`
	// Window the peer advertised to this sender: what bounded its flight.
	PeerMaxWindowBytes int64 `json:"peer_max_window_bytes"`
	MaxInFlightBytes   int64 `json:"max_in_flight_bytes"`
	P50InFlightBytes   int64 `json:"p50_in_flight_bytes"`

	// ThroughputBps: unique bytes over the connection's duration in bit/s
	// (tcptrace's definition). DataRateBps: unique bytes over this
	// direction's transfer time, first data segment to its last ACK.
	ThroughputBps float64 `json:"throughput_bps"`
	DataRateBps   float64 `json:"data_rate_bps"`
	// Transfer time of the data, first data segment to last ACK of data.
	TransferMs float64 `json:"transfer_ms"`
	// CapturedNear says where the capture was taken relative to this
	// direction's sender: "sender" (data-to-ACK time is the path RTT),
	// "receiver" (it is only the receiver's ACK delay; the path RTT comes
	// from the handshake) or "unknown".
	CapturedNear string `json:"captured_near"`
	// PathRTTMs is the round-trip time the diagnosis uses: the minimum RTT
	// sample near the sender, the handshake RTT near the receiver.
	PathRTTMs float64 `json:"path_rtt_ms"`
	// Idle gaps: the sender had nothing outstanding and sent no new data
	// for longer than max(5 ms, RTT/4) beyond what the capture point
	// explains (near the receiver one RTT always passes).
	IdleGaps    int     `json:"idle_gaps"`
	IdleTotalMs float64 `json:"idle_total_ms"`
	IdleMaxMs   float64 `json:"idle_max_ms"`
	// PauseShare: share of the transfer time spent in gaps between data
	// segments longer than max(1 ms, RTT/4), outstanding data or not. An
	// ACK-clocked flight smaller than the path's bandwidth-delay product
	// pauses every round trip; a saturated bottleneck delivers without
	// pauses.
	PauseShare float64 `json:"pause_share"`
	// DelayedAckStalls: lone segments whose ACK came >= 30 ms later than
	// the minimum RTT (the receiver's delayed-ACK timer).
	DelayedAckStalls   int     `json:"delayed_ack_stalls"`
	DelayedAckTotalMs  float64 `json:"delayed_ack_total_ms"`
	WindowLimitedShare float64 `json:"window_limited_share"` // data packets with flight >= 90 % of the peer's window
	RTTTrackOverflow   int     `json:"rtt_untracked_segments,omitempty"`
}

// DirectionSeries are the decimated graph series of one direction's data.
// Sequence values are unwrapped byte offsets from the ISN (relative
// sequence numbers, as Wireshark shows them), so they never wrap.
type DirectionSeries struct {
	Segments        Series // tcptrace/Stevens: Min = lowest segment start, Max = highest segment end
	Retransmissions Series // retransmitted segments, same layout
	Acks            Series // the peer's cumulative ACK
	ReceiveWindow   Series // ACK + the peer's advertised window (the rwnd line)
	SACK            Series // SACK blocks: Min = left edge, Max = right edge
	DupAcks         Series // ACK value of each duplicate ACK (ticks)
	ZeroWindows     Series // ACK value where the peer advertised a zero window
	RTT             Series // Karn RTT samples, ms
	TSRTT           Series // timestamp RTT samples, ms
	AdvWindow       Series // the peer's advertised window, bytes
	InFlight        Series // bytes in flight after each data segment
	Throughput      Series // data bytes sent per bucket (Sum)
	Goodput         Series // new (unique) bytes sent per bucket (Sum)

	// Samples first gather in one 100 µs accumulator per series (plain
	// field updates on the per-packet path); a full accumulator becomes
	// one point of its series when time moves past it.
	pend     [numSeries]acc
	pendEnd  time.Duration
	pendT    time.Duration
	pendStep time.Duration // the narrowest bucket among the series
	ptrs     [numSeries]*Series
}

// Series indexes, in the order of All.
const (
	sSegments = iota
	sRetransmissions
	sAcks
	sReceiveWindow
	sSACK
	sDupAcks
	sZeroWindows
	sRTT
	sTSRTT
	sAdvWindow
	sInFlight
	sThroughput
	sGoodput
	numSeries
)

// acc accumulates the samples of one series within one initial bucket.
type acc struct {
	n                        int
	first, lo, hi, last, sum float64
}

func (a *acc) add(lo, hi float64) {
	if a.n == 0 {
		a.first, a.lo, a.hi = lo, lo, hi
	} else {
		a.lo = min(a.lo, lo)
		a.hi = max(a.hi, hi)
	}
	a.last = hi
	a.sum += lo
	a.n++
}

// roll flushes the accumulators if t is past their bucket.
// The accumulators span the narrowest bucket any non-empty series has
// reached, so a long transfer flushes rarely.
func (s *DirectionSeries) roll(t time.Duration) {
	if t < s.pendEnd {
		return
	}
	s.flush()
	if s.pendStep == 0 {
		s.pendStep = initialBucket
	}
	s.pendT = t - t%s.pendStep
	s.pendEnd = s.pendT + s.pendStep
}

func (s *DirectionSeries) flush() {
	step := time.Duration(0)
	for i := range s.pend {
		a := &s.pend[i]
		sr := s.ptrs[i]
		if a.n > 0 {
			sr.addPoint(Point{T: s.pendT, First: a.first, Min: a.lo, Max: a.hi, Last: a.last, Sum: a.sum, N: a.n})
			*a = acc{}
		}
		if len(sr.Points) > 0 && (step == 0 || sr.Bucket < step) {
			step = sr.Bucket
		}
	}
	if step == 0 {
		step = initialBucket
	}
	s.pendStep = step
}

func newDirSeries(n int) *DirectionSeries {
	s := &DirectionSeries{
		Segments:        newSeries("segments", "bytes", n),
		Retransmissions: newSeries("retransmissions", "bytes", n),
		Acks:            newSeries("ack", "bytes", n),
		ReceiveWindow:   newSeries("rwnd", "bytes", n),
		SACK:            newSeries("sack", "bytes", n),
		DupAcks:         newSeries("dup_ack", "bytes", n),
		ZeroWindows:     newSeries("zero_window", "bytes", n),
		RTT:             newSeries("rtt", "ms", n),
		TSRTT:           newSeries("ts_rtt", "ms", n),
		AdvWindow:       newSeries("adv_window", "bytes", n),
		InFlight:        newSeries("in_flight", "bytes", n),
		Throughput:      newSeries("throughput", "bytes/bucket", n),
		Goodput:         newSeries("goodput", "bytes/bucket", n),
	}
	copy(s.ptrs[:], s.All())
	return s
}

// All lists the series in a fixed order (CSV columns, plots).
func (s *DirectionSeries) All() []*Series {
	return []*Series{&s.Segments, &s.Retransmissions, &s.Acks, &s.ReceiveWindow, &s.SACK, &s.DupAcks,
		&s.ZeroWindows, &s.RTT, &s.TSRTT, &s.AdvWindow, &s.InFlight, &s.Throughput, &s.Goodput}
}

// dirAnalysis is everything tracked for one direction.
type dirAnalysis struct {
	st     seqState
	stats  DirectionStats
	series *DirectionSeries
	q      unackedQueue
	ts     tsRing
	rtt    histogram // Karn samples, µs
	tsrtt  histogram // timestamp samples, µs
	// echortt: receiver's TSval to the first new data echoing it, µs
	echortt  histogram
	echoSeen bool
	lastEcho uint32
	flight   histogram // bytes in flight per data segment
	lone     histogram // ACK delay of lone segments, µs (delayed-ACK detector)
	gaps     histogram // time from "all acknowledged" to the next new data, µs
	pauses   histogram // time between consecutive data segments, µs

	firstData, lastData int64 // times of first and last data segment
	lastDataAcked       int64 // time the last byte of data was acknowledged
	allAckedAt          int64 // when outstanding data last dropped to zero
	allAcked            bool
	windowLimited       int
	minWin, maxWin      int64
	peerMaxWin          int64
	finSeen             bool
	lastRetrans         int64 // time of the latest retransmission
}

// ser returns the direction's series, creating them at time t.
func (d *dirAnalysis) ser(maxPoints int, t int64) *DirectionSeries {
	if d.series == nil {
		d.series = newDirSeries(maxPoints)
		d.series.roll(time.Duration(t))
	}
	return d.series
}

// seqState mirrors the per-flow fields of Wireshark's tcp_analyze_seq_info
// plus unwrapped sequence bookkeeping.
type seqState struct {
	synSeen bool
	isn     uint32
	mss     uint16
	wscale  int8 // offered shift, -1: none
	sackOK  bool
	tsOK    bool
	// shift applied to this side's window field: -1 unknown (a SYN was
	// not seen: raw values are used, as Wireshark does), otherwise the
	// kernel's rule: the offered shift if both SYNs offered one, else 0.
	shift int8

	baseSet bool
	base    uint32
	hiEnd   int64 // highest sequence end sent, unwrapped, relative to base
	// holes are ranges below hiEnd the capture has not shown yet (lost
	// before the capture point, or still to arrive reordered), so that
	// unique bytes count them when they come. Bounded: the oldest hole is
	// forgotten first.
	holes []seqRange

	nextseq         uint32
	nextseqValid    bool
	nextseqTime     int64
	maxSeqToBeAcked uint32
	maxSeqValid     bool
	window          uint32 // scaled when the shift is known
	windowValid     bool
	lastAck         uint32
	lastAckTime     int64
	ackSeen         bool
	dupAckNum       int
	lastSegFlags    PacketFlags
}

func (s *seqState) init() {
	*s = seqState{wscale: -1, shift: -1}
}

// rel unwraps a sequence number of this direction into a byte offset
// from the base (wrap-safe: valid within ±2 GB of the highest sent).
func (s *seqState) rel(seq uint32) int64 {
	cur := s.base + uint32(s.hiEnd)
	return s.hiEnd + int64(int32(seq-cur))
}

// synFin is the sequence space SYN and FIN occupy beyond the payload.
func synFin(flags uint8) uint32 {
	if flags&(fSYN|fFIN) != 0 {
		return 1
	}
	return 0
}

// Wrap-safe comparisons of 32-bit sequence numbers (RFC 1982 style).
func seqGT(a, b uint32) bool { return int32(a-b) > 0 }
func seqLT(a, b uint32) bool { return int32(a-b) < 0 }
func seqLE(a, b uint32) bool { return int32(a-b) <= 0 }

const (
	fSYN = decode.FlagSYN
	fFIN = decode.FlagFIN
	fRST = decode.FlagRST
	fACK = decode.FlagACK
)

// process analyzes packet p travelling in direction dir at time t (ns from
// the capture start). The sequence analysis follows
// tcp_analyze_sequence_number in Wireshark's epan/dissectors/packet-tcp.c
// check by check, so that the per-packet flags agree with tshark's.
func (c *Connection) process(a *Analyzer, dir int, p *decode.Packet, t int64) {
	fwd, rev := &c.dirs[dir], &c.dirs[1-dir]
	fs, rs := &fwd.st, &rev.st
	c.lastT = t
	if fwd.series != nil {
		fwd.series.roll(time.Duration(t))
	}
	if rev.series != nil {
		rev.series.roll(time.Duration(t))
	}
	flags := p.Flags
	seq, ack := p.Seq, p.Ack
	seglen := uint32(p.PayloadLen)
	sfr := flags&(fSYN|fFIN|fRST) != 0

	if flags&fSYN != 0 {
		if flags&fACK == 0 {
			// Wireshark's ts_mru_syn: the latest SYN (not SYN-ACK); the
			// iRTT runs from it to the first pure ACK.
			c.mruSYN, c.mruSYNSet = t, true
			if c.synT == 0 {
				c.synT = t + 1
			}
		}
		fs.synSeen, fs.isn = true, seq
		fs.mss, fs.wscale, fs.sackOK, fs.tsOK = p.MSS, p.WScale, p.SACKPermitted, p.HasTimestamp
		if rs.synSeen {
			// Both SYNs seen: RFC 7323 2.2, scaling only if both offered it.
			if fs.wscale >= 0 && rs.wscale >= 0 {
				fs.shift, rs.shift = fs.wscale, rs.wscale
			} else {
				fs.shift, rs.shift = 0, 0
			}
			c.HandshakeSeen = true
		}
	} else if flags&fACK != 0 && c.firstRTT == 0 && c.mruSYNSet {
		c.firstRTT = t - c.mruSYN
	}
	if flags&(fSYN|fACK) == fACK && c.hsRTT == 0 && c.synT != 0 && c.HandshakeSeen {
		c.hsRTT = t - (c.synT - 1)
	}
	if flags&fRST != 0 {
		c.rst = true
		defer c.release() // nothing more to acknowledge
	}
	if flags&fFIN != 0 {
		fwd.finSeen = true
	}

	window := uint32(p.Window)
	if flags&fSYN == 0 && fs.shift > 0 {
		window <<= uint(fs.shift) // never applied to SYN segments (RFC 7323 2.2)
	}

	st := &fwd.stats
	st.Packets++
	if seglen > 0 {
		st.MaxSegmentBytes = max(st.MaxSegmentBytes, int(seglen))
		st.DataPackets++
		st.DataBytes += int64(seglen)
	} else if flags&fACK != 0 && !sfr {
		st.PureAcks++
	}
	if p.NSACK > 0 {
		st.SACKPackets++
	}

	if !fs.baseSet {
		fs.baseSet = true
		fs.base = seq - 1
		if flags&fSYN != 0 {
			fs.base = seq
		}
	}
	if !rs.baseSet && flags&fACK != 0 {
		rs.baseSet = true
		rs.base = ack - 1
	}

	var fl PacketFlags
	// ZERO WINDOW PROBE: one byte at the next expected sequence number
	// into a zero window.
	if seglen == 1 && fs.nextseqValid && seq == fs.nextseq && rs.windowValid && rs.window == 0 {
		fl |= ZeroWindowProbe
		goto finishedFwd
	}
	// ZERO WINDOW
	if window == 0 && !sfr {
		fl |= ZeroWindow
	}
	// LOST SEGMENT: beyond the next expected sequence number.
	if fs.nextseqValid && seqGT(seq, fs.nextseq) && flags&fRST == 0 {
		fl |= LostSegment
	}
	// KEEP ALIVE: 0 or 1 byte starting one before the next expected.
	if seglen <= 1 && fs.nextseqValid && seq == fs.nextseq-1 && !sfr {
		fl |= KeepAlive
	}
	// WINDOW UPDATE
	if seglen == 0 && window != 0 && fs.windowValid && window != fs.window && seq == fs.nextseq && ack == fs.lastAck && !sfr {
		fl |= WindowUpdate
	}
	// WINDOW FULL: data up to the right edge of the peer's window (only
	// when the peer's scale is known).
	if seglen > 0 && rs.shift >= 0 && rs.windowValid && rs.ackSeen && seq+seglen == rs.lastAck+rs.window && !sfr {
		fl |= WindowFull
	}
	// KEEP ALIVE ACK
	if seglen == 0 && window != 0 && fs.windowValid && window == fs.window && seq == fs.nextseq && ack == fs.lastAck && rs.lastSegFlags&KeepAlive != 0 && !sfr {
		fl |= KeepAliveAck
		goto finishedFwd
	}
	// ZERO WINDOW PROBE ACK
	if seglen == 0 && window == 0 && fs.windowValid && window == fs.window && seq == fs.nextseq && ack == fs.lastAck && rs.lastSegFlags&ZeroWindowProbe != 0 && !sfr {
		fl |= ZeroWindowProbeAck
		goto finishedFwd
	}
	// DUPLICATE ACK
	if seglen == 0 && window != 0 && fs.windowValid && window == fs.window && seq == fs.nextseq && ack == fs.lastAck && !sfr {
		fs.dupAckNum++
		fl |= DupAck
	}

finishedFwd:
	if ack != fs.lastAck {
		fs.dupAckNum = 0
	}
	// ACKED UNSEEN: acknowledges data the capture never showed.
	if rs.maxSeqValid && seqGT(ack, rs.maxSeqToBeAcked) && flags&fACK != 0 {
		fl |= AckedUnseen
		rs.maxSeqToBeAcked = rs.nextseq
	}
	// RETRANSMISSION / FAST RETRANSMISSION / OUT-OF-ORDER / SPURIOUS
	if (seglen > 0 || flags&(fSYN|fFIN) != 0) && fs.nextseqValid && seqLT(seq, fs.nextseq) && fl&KeepAlive == 0 {
		oooThresh := int64(3 * time.Millisecond)
		if c.firstRTT != 0 {
			oooThresh = c.firstRTT
		}
		switch {
		case rs.dupAckNum >= 2 && rs.lastAck == seq && t-rs.lastAckTime < int64(20*time.Millisecond):
			fl |= FastRetransmission
		case seglen > 0 && rs.ackSeen && seqLE(seq+seglen, rs.lastAck):
			// Wireshark 4.0 tests for spurious retransmission before
			// out-of-order (tshark 4.0.17 marks such a segment spurious).
			fl |= SpuriousRetransmission
		case t-fs.nextseqTime < oooThresh && fs.nextseq != seq+seglen+synFin(flags):
			// (SYN and FIN count one sequence number: a repeated SYN is a
			// retransmission, as tshark 4.0 shows it.)
			fl |= OutOfOrder
		default:
			fl |= Retransmission
		}
	}

	{
		nextseq := seq + seglen
		if flags&(fSYN|fFIN) != 0 {
			nextseq++
		}
		// Sequence bookkeeping for series, unique bytes and RTT.
		var newBytes int64
		if seglen > 0 || flags&(fSYN|fFIN) != 0 {
			start := fs.rel(seq)
			end := start + int64(nextseq-seq)
			if start < fs.hiEnd {
				newBytes = fs.fillHoles(start, min(end, fs.hiEnd))
			}
			if end > fs.hiEnd {
				if start > fs.hiEnd {
					fs.addHole(fs.hiEnd, start)
				}
				newBytes += end - max(start, fs.hiEnd)
				fs.hiEnd = end
			}
			if flags&fSYN != 0 || flags&fFIN != 0 {
				newBytes = min(newBytes, int64(seglen))
			}
			if fl&ZeroWindowProbe == 0 {
				fwd.q.sent(start, end, t)
			}
			if seglen > 0 {
				fwd.ser(a.opts.MaxPoints, t)
				if fl&AnyRetransmission != 0 {
					fwd.series.pend[sRetransmissions].add(float64(start), float64(end))
				} else {
					fwd.series.pend[sSegments].add(float64(start), float64(end))
				}
				fwd.series.pend[sThroughput].add(float64(seglen), float64(seglen))
				if newBytes > 0 {
					fwd.series.pend[sGoodput].add(float64(newBytes), float64(newBytes))
				}
				st.UniqueBytes += newBytes
				if fwd.firstData == 0 && st.DataPackets == 1 {
					fwd.firstData = t
				}
				// Gap after everything outstanding was acknowledged: judged
				// against the path RTT at the end (see finishIdle).
				if fwd.allAcked && fl&AnyRetransmission == 0 && st.DataPackets > 1 {
					fwd.gaps.add(uint64((t - max(fwd.allAckedAt, fwd.lastData)) / 1000))
				}
				if st.DataPackets > 1 {
					fwd.pauses.add(uint64((t - fwd.lastData) / 1000))
				}
				fwd.allAcked = false
				fwd.lastData = t
			}
		}
		if p.HasTimestamp {
			// Every TSval's first sending time: data segments' for the
			// timestamp RTT, pure ACKs' for the echo RTT below.
			fwd.ts.sent(p.TSVal, t)
			// Echo RTT, the receiver's view (Linux's tcp_rcv_rtt_measure_ts):
			// new data that echoes a TSval of the receiver's first comes
			// one round trip after the receiver sent that value.
			if seglen > 0 && fl&(AnyRetransmission|OutOfOrder) == 0 && flags&fACK != 0 &&
				(!fwd.echoSeen || p.TSEcr != fwd.lastEcho) {
				fwd.echoSeen, fwd.lastEcho = true, p.TSEcr
				if sent, ok := rev.ts.lookup(p.TSEcr); ok {
					fwd.echortt.add(uint64((t - sent) / 1000))
				}
			}
		}
		if fl&AnyRetransmission != 0 {
			fwd.lastRetrans = t
			st.RetransmittedPackets++
			st.RetransmittedBytes += int64(seglen)
			if fl&FastRetransmission != 0 {
				st.FastRetransmissions++
			}
			if fl&SpuriousRetransmission != 0 {
				st.SpuriousRetransmissions++
			}
		}

		if seqGT(nextseq, fs.nextseq) || !fs.nextseqValid {
			if fl&ZeroWindowProbe == 0 {
				fs.nextseq, fs.nextseqTime, fs.nextseqValid = nextseq, t, true
			}
		}
		if seq == fs.maxSeqToBeAcked || !fs.maxSeqValid {
			if fl&ZeroWindowProbe == 0 {
				fs.maxSeqToBeAcked, fs.maxSeqValid = fs.nextseq, true
			}
		}
	}
	ackAdvanced := !fs.ackSeen || seqGT(ack, fs.lastAck)
	fs.window, fs.windowValid = window, true
	if flags&fACK != 0 {
		fs.lastAck, fs.lastAckTime, fs.ackSeen = ack, t, true
	} else {
		fs.lastAck, fs.lastAckTime = ack, t
	}
	fs.lastSegFlags = fl

	// Counters.
	switch {
	case fl&OutOfOrder != 0:
		st.OutOfOrderPackets++
	}
	if fl&LostSegment != 0 {
		st.LostSegments++
	}
	if fl&AckedUnseen != 0 {
		st.AckedUnseen++
	}
	if fl&DupAck != 0 {
		st.DupAcks++
		if fs.dupAckNum == 3 {
			st.TripleDupAcks++
		}
	}
	if fl&ZeroWindow != 0 {
		st.ZeroWindows++
	}
	if fl&WindowFull != 0 {
		st.WindowFull++
	}
	if fl&ZeroWindowProbe != 0 {
		st.ZeroWindowProbes++
	}
	if fl&KeepAlive != 0 {
		st.KeepAlives++
	}

	// Window this endpoint advertises (bounds the peer's flight).
	if flags&fSYN == 0 {
		w := int64(window)
		if w > fwd.maxWin {
			fwd.maxWin = w
		}
		// Zero windows are counted apart and, as in tcptrace, do not
		// make the minimum.
		if w > 0 && (fwd.minWin == 0 || w < fwd.minWin) {
			fwd.minWin = w
		}
	}

	// This packet's ACK acknowledges the reverse direction's data.
	info := &a.info
	info.AckRTT, info.KarnRTT, info.InFlight = -1, -1, -1
	if flags&fACK != 0 && rs.baseSet {
		relAck := rs.rel(ack)
		// Series of a direction start with its first data segment; ACKs of
		// a direction without data (SYN-only, pure ACK streams) go to a
		// scratch accumulator that is never kept.
		rser := rev.series
		if rser == nil {
			rser = &a.scratch
		}
		rser.pend[sAcks].add(float64(relAck), float64(relAck))
		if flags&fSYN == 0 {
			rser.pend[sReceiveWindow].add(float64(relAck+int64(window)), float64(relAck+int64(window)))
			rser.pend[sAdvWindow].add(float64(window), float64(window))
			rev.peerMaxWin = max(rev.peerMaxWin, int64(window))
		}
		if fl&DupAck != 0 {
			rser.pend[sDupAcks].add(float64(relAck), float64(relAck))
		}
		if fl&ZeroWindow != 0 {
			rser.pend[sZeroWindows].add(float64(relAck), float64(relAck))
		}
		for i := 0; i < p.NSACK; i++ {
			b := p.SACK[i]
			rser.pend[sSACK].add(float64(rs.rel(b.Left)), float64(rs.rel(b.Right)))
		}
		had := rev.q.len()
		r := rev.q.ack(relAck)
		if r.matched {
			d := t - r.sent
			info.AckRTT = time.Duration(d)
			if r.retrans {
				// Karn: ambiguous, no sample.
			} else if r.sent < rev.lastRetrans {
				// Sent before a retransmission the ACK waited for: the delay
				// includes loss recovery (tcptrace's "post-loss acks").
				rev.stats.PostLossAcks++
			} else {
				info.KarnRTT = time.Duration(d)
				us := uint64(d / 1000)
				rev.rtt.add(us)
				rser.pend[sRTT].add(float64(d)/1e6, float64(d)/1e6)
				if r.empty && had == 1 && r.acked == 1 {
					rev.lone.add(us)
				}
			}
		}
		if r.acked > 0 && rev.stats.DataPackets > 0 {
			rev.lastDataAcked = t
		}
		if r.empty && !rev.allAcked {
			rev.allAcked, rev.allAckedAt = true, t
		}
		if p.HasTimestamp && ackAdvanced && r.acked > 0 {
			if sent, ok := rev.ts.lookup(p.TSEcr); ok {
				d := t - sent
				rev.tsrtt.add(uint64(d / 1000))
				rser.pend[sTSRTT].add(float64(d)/1e6, float64(d)/1e6)
			}
		}
	}

	// Bytes in flight of this direction after this packet.
	if seglen > 0 && rs.ackSeen {
		inflight := int64(int32(fs.nextseq - rs.lastAck))
		if inflight >= 0 {
			info.InFlight = inflight
			fwd.flight.add(uint64(inflight))
			fwd.series.pend[sInFlight].add(float64(inflight), float64(inflight))
			st.MaxInFlightBytes = max(st.MaxInFlightBytes, inflight)
			if rs.windowValid && rs.window > 0 && float64(inflight) >= 0.9*float64(rs.window) {
				fwd.windowLimited++
			}
		}
	}

	if a.opts.OnPacket != nil {
		info.Frame = a.res.Frames
		info.Conn = c
		info.Dir = dir
		info.Flags = fl
		info.PayloadLen = int(seglen)
		a.opts.OnPacket(info)
	}
}

// release drops per-packet tracking state of a connection whose 4-tuple
// was reused; its statistics and series stay.
func (c *Connection) release() {
	for i := range c.dirs {
		c.dirs[i].q = unackedQueue{}
		c.dirs[i].ts = tsRing{}
	}
}

func (c *Connection) finish(a *Analyzer) {
	c.release()
	for i := range c.dirs {
		if c.dirs[i].series != nil {
			c.dirs[i].series.flush()
		}
	}
	c.Start = time.Duration(c.firstT)
	c.Duration = time.Duration(c.lastT - c.firstT)
	switch {
	case c.rst:
		c.State = "reset"
	case c.dirs[0].finSeen && c.dirs[1].finSeen:
		c.State = "closed"
	case c.dirs[0].finSeen || c.dirs[1].finSeen:
		c.State = "half-closed"
	default:
		c.State = "open"
	}
	for i := range c.dirs {
		d := &c.dirs[i]
		st := &d.stats
		from, to := c.Client, c.Server
		if i == 1 {
			from, to = to, from
		}
		st.MSS = int(d.st.mss)
		st.WindowScale = int(d.st.wscale)
		st.SACKPermitted = d.st.sackOK
		st.Timestamps = d.st.tsOK
		st.WindowScaleKnown = d.st.shift >= 0
		st.MaxWindowBytes, st.MinWindowBytes = d.maxWin, d.minWin
		st.PeerMaxWindowBytes = d.peerMaxWin
		st.RTTSamples = int(d.rtt.n)
		if d.rtt.n > 0 {
			st.RTTMinMs = float64(d.rtt.min) / 1e3
			st.RTTMaxMs = float64(d.rtt.max) / 1e3
			st.RTTAvgMs = d.rtt.mean() / 1e3
			st.RTTStdevMs = d.rtt.stdev() / 1e3
			st.RTTP50Ms = d.rtt.quantile(0.5) / 1e3
			st.RTTP99Ms = d.rtt.quantile(0.99) / 1e3
		}
		st.EchoRTTSamples = int(d.echortt.n)
		if d.echortt.n > 0 {
			st.EchoRTTMinMs = float64(d.echortt.min) / 1e3
			st.EchoRTTP50Ms = d.echortt.quantile(0.5) / 1e3
		}
		st.TSRTTSamples = int(d.tsrtt.n)
		if d.tsrtt.n > 0 {
			st.TSRTTMinMs = float64(d.tsrtt.min) / 1e3
			st.TSRTTMaxMs = float64(d.tsrtt.max) / 1e3
			st.TSRTTP50Ms = d.tsrtt.quantile(0.5) / 1e3
		}
		st.P50InFlightBytes = int64(d.flight.quantile(0.5))
		if c.Duration > 0 {
			st.ThroughputBps = float64(st.UniqueBytes) * 8 / c.Duration.Seconds()
		}
		if st.DataPackets > 0 {
			end := max(d.lastDataAcked, d.lastData)
			if end > d.firstData {
				st.TransferMs = float64(end-d.firstData) / 1e6
				st.DataRateBps = float64(st.UniqueBytes) * 8 / (float64(end-d.firstData) / 1e9)
			}
			st.WindowLimitedShare = float64(d.windowLimited) / float64(st.DataPackets)
		}
		st.RTTTrackOverflow = d.q.overflow
		finishIdle(c, d, st)
		st.DelayedAckStalls, st.DelayedAckTotalMs = delayedAckStalls(&d.lone, &d.rtt)
		ser := d.series
		if ser == nil {
			ser = a.emptySeries()
		}
		c.Directions[i] = &Direction{From: from, To: to, DirectionStats: *st, Series: ser}
	}
	diagnose(c)
}

// delayedAckStalls counts lone-segment ACK delays at least 30 ms above the
// minimum RTT (Linux's delayed-ACK timer starts at 40 ms, TCP_DELACK_MIN)
// and sums the excess.
func delayedAckStalls(lone, rtt *histogram) (int, float64) {
	if lone.n == 0 || rtt.n == 0 {
		return 0, 0
	}
	floor := rtt.min + 30_000
	n, total := 0, 0.0
	for i, cnt := range lone.counts {
		if cnt == 0 {
			continue
		}
		v := histValue(i)
		if v >= float64(floor) && v <= float64(rtt.min+500_000) {
			n += int(cnt)
			total += float64(cnt) * (v - float64(rtt.min)) / 1e3
		}
	}
	return n, total
}

// tsRing remembers when each TSval was first sent, for timestamp RTT
// samples. TSvals only grow, so the ring stays sorted.
type tsRing struct {
	vals  []uint32 // allocated on first use, tsRingMin entries, doubling
	times []int64
	n     int  // total ever stored
	grow  bool // a lookup missed a value older than the ring holds
}

// The ring starts small (most connections need a few entries) and doubles,
// up to tsRingMax, when an echo refers to a value it has already dropped:
// a standing queue of Q seconds needs about Q*1000 entries at 1 ms ticks.
const (
	tsRingMin = 64
	tsRingMax = 16384
)

func (r *tsRing) sent(v uint32, t int64) {
	if r.vals == nil {
		r.vals, r.times = make([]uint32, tsRingMin), make([]int64, tsRingMin)
	}
	if r.n > 0 {
		last := r.vals[(r.n-1)%len(r.vals)]
		if !seqGT(v, last) {
			return
		}
	}
	if r.grow && len(r.vals) < tsRingMax {
		r.grow = false
		k := min(r.n, len(r.vals))
		vals, times := make([]uint32, 2*len(r.vals)), make([]int64, 2*len(r.vals))
		for i := 0; i < k; i++ {
			j := (r.n - k + i) % len(r.vals)
			vals[i], times[i] = r.vals[j], r.times[j]
		}
		r.vals, r.times, r.n = vals, times, k
	}
	r.vals[r.n%len(r.vals)] = v
	r.times[r.n%len(r.times)] = t
	r.n++
}

func (r *tsRing) lookup(v uint32) (int64, bool) {
	k := min(r.n, len(r.vals))
	if k == 0 {
		return 0, false
	}
	// The echoed value is almost always one of the newest.
	for i := 1; i <= min(k, 4); i++ {
		j := (r.n - i) % len(r.vals)
		if r.vals[j] == v {
			return r.times[j], true
		}
	}
	// Binary search over the k newest entries, oldest first.
	i := sort.Search(k, func(i int) bool {
		return !seqLT(r.vals[(r.n-k+i)%len(r.vals)], v)
	})
	if i < k && r.vals[(r.n-k+i)%len(r.vals)] == v {
		return r.times[(r.n-k+i)%len(r.times)], true
	}
	if i == 0 && k == len(r.vals) {
		r.grow = true // older than the oldest kept
	}
	return 0, false
}

// finishIdle decides where the capture was taken for this direction and
// turns the recorded gaps into idle time.
func finishIdle(c *Connection, d *dirAnalysis, st *DirectionStats) {
	hs := float64(c.hsRTT) / 1e3 // µs
	st.CapturedNear = "unknown"
	path := 0.0 // µs
	switch {
	case d.rtt.n > 0 && hs >= 1000 && float64(d.rtt.min) >= 0.5*hs:
		st.CapturedNear, path = "sender", float64(d.rtt.min)
	case d.rtt.n > 0 && hs >= 1000:
		// Below 1 ms (a LAN, veth) both RTTs are noise and the location
		// cannot be told, nor does it matter.
		st.CapturedNear, path = "receiver", hs
	case d.rtt.n > 0:
		path = float64(d.rtt.min)
	case hs > 0:
		path = hs
	}
	st.PathRTTMs = path / 1e3
	if st.TransferMs > 0 {
		pthresh := max(1000, path/4)
		var pause float64
		for i, n := range d.pauses.counts {
			if v := histValue(i); n > 0 && v > pthresh {
				pause += float64(n) * v / 1e3
			}
		}
		st.PauseShare = min(1, pause/st.TransferMs)
	}
	base := 0.0
	if st.CapturedNear == "receiver" {
		base = path
	}
	// Gaps shorter than 5 ms are not counted: a token bucket downstream
	// of the capture point releases bursts with gaps of burst/rate, which
	// look the same as a sender with nothing to send.
	thresh := base + max(5000, path/4)
	for i, n := range d.gaps.counts {
		if n == 0 {
			continue
		}
		v := histValue(i)
		if v > thresh {
			st.IdleGaps += int(n)
			st.IdleTotalMs += float64(n) * (v - base) / 1e3
			st.IdleMaxMs = max(st.IdleMaxMs, (v-base)/1e3)
		}
	}
}

type seqRange struct{ start, end int64 }

const maxHoles = 64

func (s *seqState) addHole(start, end int64) {
	if len(s.holes) >= maxHoles {
		copy(s.holes, s.holes[1:])
		s.holes = s.holes[:len(s.holes)-1]
	}
	s.holes = append(s.holes, seqRange{start, end})
}

// fillHoles removes [start,end) from the holes and returns how many of
// those bytes were in holes (never seen before).
func (s *seqState) fillHoles(start, end int64) int64 {
	var n int64
	for i := 0; i < len(s.holes); i++ {
		h := s.holes[i]
		lo, hi := max(h.start, start), min(h.end, end)
		if lo >= hi {
			continue
		}
		n += hi - lo
		switch {
		case lo == h.start && hi == h.end:
			s.holes = append(s.holes[:i], s.holes[i+1:]...)
			i--
		case lo == h.start:
			s.holes[i].start = hi
		case hi == h.end:
			s.holes[i].end = lo
		default:
			s.holes[i].end = lo
			if len(s.holes) < maxHoles {
				s.holes = append(s.holes, seqRange{})
				copy(s.holes[i+2:], s.holes[i+1:])
				s.holes[i+1] = seqRange{hi, h.end}
			}
		}
	}
	return n
}
