package analyzer

import (
	"net/netip"
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
	// The handshake timed as Karn would: from the last SYN (a
	// retransmitted one answers for itself; the first would add the
	// retransmission timeout) to the ACK after the last SYN-ACK, the whole
	// round trip wherever the capture was taken; and its two legs, the
	// capture point to the server and back (that SYN to its SYN-ACK) and
	// to the client and back (that SYN-ACK to the ACK). 0: not seen.
	HandshakeRTTMs    float64 `json:"handshake_rtt_ms"`
	HandshakeServerMs float64 `json:"handshake_server_leg_ms"`
	HandshakeClientMs float64 `json:"handshake_client_leg_ms"`
	// State at the end of the capture: "open", "closed" (FIN both ways),
	// "half-closed" or "reset".
	State string `json:"state"`
	// Encapsulation lists the layers that carried the connection's first
	// packet, outermost first ("vlan 10", "vxlan vni 42"; empty for
	// none). The connection is the innermost 4-tuple.
	Encapsulation []string `json:"encapsulation"`
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
	synT        int64           // time of the client's latest SYN + 1 (0: not seen)
	synAckT     int64           // time of the server's latest SYN-ACK after that SYN + 1 (0: not seen)
	hsRTT       int64           // last SYN to the ACK completing the handshake: the path RTT wherever the capture was taken
	hsServer    int64           // last SYN to its SYN-ACK: the capture point's round trip to the server
	hsClient    int64           // last SYN-ACK to the ACK: the capture point's round trip to the client
	dirs        *[2]dirAnalysis // per-packet state; nil once the connection is retired
	rst         bool
	key         connKey
	finished    bool
	encap       [decode.MaxEncap]decode.Encap
	nencap      uint8
	reusedSYN   bool // the first packet, a SYN, reuses the ports of an earlier connection
}

// UniqueBytes is the data both directions carried, each byte counted once
// (the size the report and the fit rank connections by).
func (c *Connection) UniqueBytes() int64 {
	var n int64
	for _, d := range c.Directions {
		if d != nil {
			n += d.UniqueBytes
		}
	}
	return n
}

// noEncap is the Encapsulation of a connection that had none.
var noEncap = []string{}

// Direction is the analysis of the data one endpoint sent, with the ACKs
// and windows its peer returned.
type Direction struct {
	From netip.AddrPort `json:"from"`
	To   netip.AddrPort `json:"to"`
	DirectionStats
	Series    *DirectionSeries `json:"-"`
	Diagnosis *Diagnosis       `json:"diagnosis,omitempty"`
	// periods are the rounds' classes, steady ones unnamed until the
	// direction is diagnosed (Diagnosis.Limits).
	periods []Period
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

	// Wireshark's classification of segments below the next expected
	// sequence number (retransmission, fast, spurious, out-of-order).
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
	// CaptureDuplicates counts copies of this direction's packets left
	// out as capture duplicates (see Result.DuplicateFrames): Wireshark
	// analyzes them, each a retransmission or a duplicate ACK more.
	CaptureDuplicates int `json:"capture_duplicates"`

	// The sender's truth, whatever Wireshark calls the segments: data
	// segments that re-sent sequence space the capture had already seen
	// sent, and those that filled space it saw skipped (lost before the
	// capture point and sent again; reorderings excluded). LossRate, the
	// rate the diagnosis uses, is (resent + gap fills) / (data packets +
	// gap fills): the share of the sender's segments that were sent again.
	ResentPackets int     `json:"resent_packets"`
	ResentBytes   int64   `json:"resent_bytes"`
	GapFills      int     `json:"gap_fills"`
	LossRate      float64 `json:"loss_rate"`

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
	// from the handshake or the receiver's timestamps echoed) or
	// "unknown". With timestamps the two legs decide (data to ACK against
	// ACK to the data echoing it); without, data to ACK against the
	// handshake.
	CapturedNear string `json:"captured_near"`
	// CaptureToReceiverMs and CaptureToSenderMs are the capture point's
	// round trips to each end that placed it (see place), and
	// CapturedNearFrom what they were read from: "data" (data to ACK and
	// the receiver's timestamps echoed), "handshake" (its two legs),
	// "echo" or "karn" (one leg only), "" (nothing). A capture is near an
	// end whose round trip is under half the other's, and both under a
	// millisecond is a LAN: "unknown".
	CaptureToReceiverMs float64 `json:"capture_to_receiver_ms"`
	CaptureToSenderMs   float64 `json:"capture_to_sender_ms"`
	CapturedNearFrom    string  `json:"captured_near_from"`
	// PathRTTMs is the round-trip time the diagnosis uses: the minimum RTT
	// sample near the sender, the handshake RTT near the receiver (the
	// receiver's timestamps echoed by new data where they give less: a slow
	// handshake).
	PathRTTMs float64 `json:"path_rtt_ms"`
	// PathRTTSource names where PathRTTMs comes from: "karn" (data to
	// ACK), "handshake", "echo" (the receiver's timestamps echoed by new
	// data, for a capture near the receiver that missed the handshake) or
	// "" (no RTT).
	PathRTTSource string `json:"path_rtt_source"`
	// PathRTTP50Ms is the median round trip from the leg the capture
	// point can time: data to ACK near the sender, the receiver's
	// timestamps echoed by new data near it (the handshake without
	// them); never 0 where PathRTTMs is not.
	PathRTTP50Ms float64 `json:"path_rtt_p50_ms"`
	// Idle gaps: the sender had nothing outstanding and sent no new data
	// for longer than max(5 ms, RTT/4) beyond what the capture point
	// explains (near the receiver one RTT always passes).
	IdleGaps    int     `json:"idle_gaps"`
	IdleTotalMs float64 `json:"idle_total_ms"`
	IdleMaxMs   float64 `json:"idle_max_ms"`
	// Turns are request/response turns: new data that followed new data
	// from the peer (a request); TurnTotalMs the time from this
	// direction's data before each to the data after it, when the sender
	// had nothing to send but the answer (not counted as idle gaps).
	Turns       int     `json:"turns"`
	TurnTotalMs float64 `json:"turn_total_ms"`
	// Bursts are data segments after a pause (over a quarter of the round
	// trip and 1 ms), and AckedBursts those sent within ackClockNs of an
	// ACK that advanced: released by the ACK clock. Near the sender a
	// window (of any kind) releases its bursts on ACKs; an application
	// that writes on its own clock releases them when it writes.
	Bursts      int `json:"bursts"`
	AckedBursts int `json:"acked_bursts"`
	// RTTAckedBursts are the bursts that came a round trip (within an
	// eighth) after an ACK that advanced: what releases them seen near the
	// receiver, where the ACK leaves and the burst it releases arrives a
	// round trip later.
	RTTAckedBursts int `json:"rtt_acked_bursts"`
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
	// Queueing delay: how far the RTT rose above its minimum while data
	// flowed (the 95th percentile and the median of the samples minus
	// their minimum), from the best RTT the capture point gives:
	// QueueRTTSource "karn" (data to ACK, near the sender), "timestamps"
	// (TSecr echoes) or "echo" (the receiver's TSval to the data echoing
	// it, near the receiver); "" with fewer than 10 samples.
	QueueDelayMs     float64 `json:"queue_delay_ms"`
	QueueDelayP50Ms  float64 `json:"queue_delay_p50_ms"`
	QueueRTTSource   string  `json:"queue_rtt_source"`
	RTTTrackOverflow int     `json:"rtt_untracked_segments,omitempty"`
	// Ramp is the window's opening over the first round trips (rounds.go).
	Ramp Ramp `json:"ramp"`
}

// dirAnalysis is everything tracked for one direction.
type dirAnalysis struct {
	st     seqState
	stats  DirectionStats
	series *DirectionSeries
	rttSampler
	flight histogram // bytes in flight per data segment
	gaps   histogram // time from "all acknowledged" to the next new data, µs
	pauses histogram // time between consecutive data segments, µs

	firstData, lastData int64 // times of first and last data segment
	lastDataAcked       int64 // time the last byte of data was acknowledged
	dataEnd, dataAcked  int64 // relative sequence: end of the data sent, and how much of it is acknowledged
	peerBytes           int64 // the peer's unique bytes at this direction's last data segment
	ackAt               int64 // when an ACK of this direction's data last advanced
	acks                ackRing
	turnNs              int64 // time in request/response turns
	allAckedAt          int64 // when outstanding data last dropped to zero
	allAcked            bool
	windowLimited       int
	minWin, maxWin      int64
	peerMaxWin          int64
	finSeen             bool
	rounds              roundLog
}

// reset empties the direction for a new connection, keeping its small
// buffers (bounded, so that a pool of them stays small).
func (d *dirAnalysis) reset() {
	holes := d.st.holes[:0]
	q := d.q.buf[:0]
	if cap(q) > 64 {
		q = nil
	}
	ts := d.ts
	if len(ts.vals) > tsRingMin {
		ts = tsRing{}
	}
	ts.n, ts.grow = 0, false
	hists := [...]histogram{d.rtt, d.tsrtt, d.echortt, d.lone, d.flight, d.gaps, d.pauses}
	for i := range hists {
		hists[i].reset()
	}
	*d = dirAnalysis{}
	d.st.init()
	d.st.holes = holes
	d.q.buf = q
	d.ts = ts
	d.rtt, d.tsrtt, d.echortt, d.lone, d.flight, d.gaps, d.pauses = hists[0], hists[1], hists[2], hists[3], hists[4], hists[5], hists[6]
}

// ser returns the direction's series, creating them at time t (the
// analyzer's scratch series when it records none). The creation is apart
// so that ser inlines.
func (d *dirAnalysis) ser(a *Analyzer, t int64) *DirectionSeries {
	if d.series == nil {
		return d.newSeries(a, t)
	}
	return d.series
}

func (d *dirAnalysis) newSeries(a *Analyzer, t int64) *DirectionSeries {
	if a.opts.NoSeries {
		return &a.scratch
	}
	d.series = newDirSeries(a.opts.MaxPoints)
	d.series.roll(time.Duration(t))
	d.echoSeries = d.series
	return d.series
}

// process analyzes packet p travelling in direction dir at time t (ns from
// the capture start): the handshake, the flag classifier (Wireshark's
// rules, see classify), the sequence tracker, the RTT sampler and the
// series recorder, in that order.
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
	// sg and span are filled through pointers, field by field: returned
	// by value, structs of their size are built in memory and copied in
	// wide moves right after narrow stores, which stalls the CPU's store
	// forwarding on every packet.
	var sg segment
	c.handshake(fwd, rev, p, t, &sg)
	fwd.countPacket(p, &sg)
	setBases(fs, rs, &sg)

	fl := classify(fs, rs, &sg, c.firstRTT)
	if c.reusedSYN {
		fl |= ReusedPorts
		c.reusedSYN = false
	}
	if fl != 0 {
		fwd.countFlags(fl, sg.len)
	}

	var span seqSpan
	fs.sent(&sg, fl, &span)
	if span.below && sg.len > 0 && fl&(KeepAlive|ZeroWindowProbe) == 0 {
		fwd.countResent(&span)
	}
	if sg.occupiesSeq() {
		// A segment into a zero window (a probe, whatever its length)
		// gives no RTT sample, as in tcptrace: its ACK waits for the window.
		if fl&ZeroWindowProbe == 0 && !(sg.len > 0 && rs.windowValid && rs.window == 0) {
			fwd.q.sent(span.start, span.end, t, a.own)
		}
		if sg.len > 0 {
			rtt := fwd.roundTrip(c.hsRTT)
			fwd.burst(sg.t, rtt, fl)
			fwd.dataSent(a, &span, &sg, fl, rev.stats.UniqueBytes)
			lag := c.hsClient // the data's sender: the client (an upload)
			if dir == 1 {
				lag = c.hsServer
			}
			fwd.rounds.add(sg.t, fwd.firstData, rtt, lag, span.newBytes, span.resent > 0 || span.filledGap)
		}
	}
	if fl&AnyRetransmission != 0 || span.below && fl&(KeepAlive|ZeroWindowProbe) == 0 {
		// Karn's rule as tcptrace applies it: after any segment below the
		// highest sent (out-of-order re-sends included), ACKs of older
		// segments include the recovery and give no sample.
		fwd.lastRetrans = t
	}
	if p.HasTimestamp {
		fwd.timestampSent(&rev.rttSampler, p, &sg, fl, span.end, c.hsRTT)
	}
	ackAdvanced := fs.received(&sg, fl)
	fwd.windowAdvertised(&sg)

	info := &a.info
	if a.opts.OnPacket != nil {
		// Only OnPacket reads these; the samplers set them when they have one.
		info.AckRTT, info.KarnRTT, info.InFlight = -1, -1, -1
	}
	if sg.flags&fACK != 0 && rs.baseSet {
		rev.ackArrived(a, p, &sg, fl, ackAdvanced, info)
		if ackAdvanced {
			rev.ackAt = t
			rev.acks.add(t, rev.roundTrip(c.hsRTT)/16)
		}
	}
	if sg.len > 0 && rs.ackSeen {
		fwd.inFlight(a, rs, info, t)
	}
	if sg.flags&fRST != 0 {
		c.release() // nothing more to acknowledge
	}

	if a.opts.OnPacket != nil {
		info.Frame = a.frame
		info.Conn = c
		info.Dir = dir
		info.Flags = fl
		info.PayloadLen = int(sg.len)
		a.opts.OnPacket(info)
	}
}

// handshake records SYN options, the handshake RTTs and the connection's
// end, and fills sg with the segment, its window scaled.
func (c *Connection) handshake(fwd, rev *dirAnalysis, p *decode.Packet, t int64, sg *segment) {
	fs, rs := &fwd.st, &rev.st
	flags := p.Flags
	if flags&fSYN != 0 {
		if flags&fACK == 0 {
			// Wireshark's ts_mru_syn: the latest SYN (not SYN-ACK); the
			// iRTT runs from it to the first pure ACK.
			c.mruSYN, c.mruSYNSet = t, true
			if c.hsRTT == 0 {
				// Karn: the SYN-ACK answers the latest SYN.
				c.synT, c.synAckT = t+1, 0
			}
		} else if c.hsRTT == 0 && c.synT != 0 {
			c.synAckT = t + 1 // the ACK answers the latest SYN-ACK
		}
		fs.synSeen, fs.isn = true, p.Seq
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
	if flags&(fSYN|fACK) == fACK && c.hsRTT == 0 && c.synT != 0 && c.synAckT != 0 && c.HandshakeSeen {
		c.hsRTT = t - (c.synT - 1)
		c.hsServer, c.hsClient = c.synAckT-c.synT, t-(c.synAckT-1)
	}
	if flags&fRST != 0 {
		c.rst = true
	}
	if flags&fFIN != 0 {
		fwd.finSeen = true
	}
	window := uint32(p.Window)
	if flags&fSYN == 0 && fs.shift > 0 {
		window <<= uint(fs.shift) // never applied to SYN segments (RFC 7323 2.2)
	}
	sg.seq, sg.ack, sg.len, sg.flags, sg.window, sg.t = p.Seq, p.Ack, uint32(p.PayloadLen), flags, window, t
}

// countPacket counts the packet by kind.
func (d *dirAnalysis) countPacket(p *decode.Packet, sg *segment) {
	st := &d.stats
	st.Packets++
	if sg.len > 0 {
		st.MaxSegmentBytes = max(st.MaxSegmentBytes, int(sg.len))
		st.DataPackets++
		st.DataBytes += int64(sg.len)
	} else if sg.flags&fACK != 0 && !sg.sfr() {
		st.PureAcks++
	}
	if p.NSACK > 0 {
		st.SACKPackets++
	}
}

// countFlags counts the packet's Wireshark flags.
func (d *dirAnalysis) countFlags(fl PacketFlags, seglen uint32) {
	st := &d.stats
	if fl&AnyRetransmission != 0 {
		st.RetransmittedPackets++
		st.RetransmittedBytes += int64(seglen)
		if fl&FastRetransmission != 0 {
			st.FastRetransmissions++
		}
		if fl&SpuriousRetransmission != 0 {
			st.SpuriousRetransmissions++
		}
	}
	if fl&OutOfOrder != 0 {
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
		if d.st.dupAckNum == 3 {
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
}

// countResent counts a data segment's re-sent bytes and gap fills.
func (d *dirAnalysis) countResent(span *seqSpan) {
	st := &d.stats
	if span.resent > 0 {
		st.ResentPackets++
		st.ResentBytes += span.resent
	}
	if span.filledGap {
		st.GapFills++
	}
}

// dataSent records a data segment: series, unique bytes, idle gaps and
// pauses between data segments.
func (d *dirAnalysis) dataSent(a *Analyzer, span *seqSpan, sg *segment, fl PacketFlags, peerBytes int64) {
	st, t := &d.stats, sg.t
	// A turn: the peer sent new data (a request) since this direction's
	// last data segment, and this one answers it. The sender had nothing
	// to send from its last segment until the request came: that time is
	// the application's, wherever the capture was taken (near the
	// receiver an idle gap hides in the round trip the request takes).
	turn := st.DataPackets > 1 && peerBytes > d.peerBytes && span.newBytes > 0 && fl&AnyRetransmission == 0
	d.peerBytes = peerBytes
	if turn {
		st.Turns++
		d.turnNs += t - d.lastData
	}
	d.ser(a, t).recordSegment(span, sg.len, fl&AnyRetransmission != 0)
	st.UniqueBytes += span.newBytes
	d.dataEnd = max(d.dataEnd, span.end)
	if d.firstData == 0 && st.DataPackets == 1 {
		d.firstData = t
	}
	// Gap after everything outstanding was acknowledged: judged against
	// the path RTT at the end (see finishIdle).
	if d.allAcked && fl&AnyRetransmission == 0 && st.DataPackets > 1 && !turn {
		d.gaps.add(uint64((t - max(d.allAckedAt, d.lastData)) / 1000))
	}
	if st.DataPackets > 1 {
		d.pauses.add(uint64((t - d.lastData) / 1000))
	}
	d.allAcked = false
	d.lastData = t
}

// windowAdvertised tracks the window this endpoint advertises (it bounds
// the peer's flight).
func (d *dirAnalysis) windowAdvertised(sg *segment) {
	if sg.flags&fSYN != 0 {
		return
	}
	w := int64(sg.window)
	d.maxWin = max(d.maxWin, w)
	// Zero windows are counted apart and, as in tcptrace, do not make
	// the minimum.
	if w > 0 && (d.minWin == 0 || w < d.minWin) {
		d.minWin = w
	}
}

// ackArrived applies the ACK a packet of the peer carries to this
// direction's data: series, RTT samples and the end of the transfer.
func (d *dirAnalysis) ackArrived(a *Analyzer, p *decode.Packet, sg *segment, fl PacketFlags, ackAdvanced bool, info *PacketInfo) {
	relAck := d.st.rel(sg.ack)
	t := sg.t
	// Series of a direction start with its first data segment; the ACKs
	// of a direction without data (SYN-only, pure ACK streams: the ACK
	// field of every data segment the peer sends) are not recorded.
	ser := d.series
	if ser != nil {
		ser.recordAck(relAck, int64(sg.window), sg.flags&fSYN == 0, fl)
		for i := 0; i < p.NSACK; i++ {
			b := &p.SACK[i]
			ser.recordSACK(d.st.rel(b.Left), d.st.rel(b.Right))
		}
	}
	if sg.flags&fSYN == 0 {
		d.peerMaxWin = max(d.peerMaxWin, int64(sg.window))
		d.rounds.window(sg.t, int64(sg.window))
	}
	var s ackResult
	kind := d.acked(relAck, t, &s)
	d.echoAcked(relAck)
	if s.matched {
		// As Wireshark times it: by the frames' own capture times, so a
		// capture whose timestamps step back a few microseconds (two
		// CPUs' packets written out of order) gives its figure; the
		// samples below take the analysis time, which never goes back.
		info.AckRTT = time.Duration(a.own - s.own)
		switch kind {
		case ackKarn:
			info.KarnRTT = info.AckRTT
			if ser != nil {
				ser.recordRTT(t - s.sent)
			}
		case ackPostLoss:
			d.stats.PostLossAcks++
		}
	}
	if s.acked > 0 && d.stats.DataPackets > 0 && d.dataAcked < d.dataEnd {
		// Only an ACK of data ends the transfer: the ACK of a FIN sent
		// long after (a connection kept open, then closed) does not.
		d.lastDataAcked, d.dataAcked = t, min(relAck, d.dataEnd)
	}
	if s.empty && !d.allAcked {
		d.allAcked, d.allAckedAt = true, t
	}
	if p.HasTimestamp && ackAdvanced && s.acked > 0 {
		if rtt, ok := d.timestampEchoed(p.TSEcr, t); ok && ser != nil {
			ser.recordTSRTT(rtt)
		}
	}
}

// inFlight records this direction's bytes in flight after a data segment.
func (d *dirAnalysis) inFlight(a *Analyzer, rs *seqState, info *PacketInfo, t int64) {
	inflight := int64(int32(d.st.nextseq - rs.lastAck))
	if inflight < 0 {
		return
	}
	info.InFlight = inflight
	d.flight.add(uint64(inflight))
	d.ser(a, t).recordInFlight(inflight)
	d.stats.MaxInFlightBytes = max(d.stats.MaxInFlightBytes, inflight)
	if rs.windowValid && rs.window > 0 && float64(inflight) >= 0.9*float64(rs.window) {
		d.windowLimited++
	}
}

// release drops the RTT tracking buffers of a connection that will
// acknowledge nothing more (reset, or open at the end of the capture); its
// statistics and series stay, and so does the count of segments the queue
// could not track, which its summary reports.
func (c *Connection) release() {
	if c.dirs == nil {
		return
	}
	for i := range c.dirs {
		c.dirs[i].q = unackedQueue{overflow: c.dirs[i].q.overflow}
		c.dirs[i].ts = tsRing{}
	}
}

func (c *Connection) finish(a *Analyzer) {
	c.finished = true
	for i := range c.dirs {
		if c.dirs[i].series != nil {
			c.dirs[i].series.flush()
		}
	}
	c.Encapsulation = noEncap
	if c.nencap > 0 {
		c.Encapsulation = make([]string, c.nencap)
		for i, e := range c.encap[:c.nencap] {
			c.Encapsulation[i] = e.String()
		}
	}
	if c.hsRTT > 0 {
		c.HandshakeRTTMs, c.HandshakeServerMs, c.HandshakeClientMs = float64(c.hsRTT)/1e6, float64(c.hsServer)/1e6, float64(c.hsClient)/1e6
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
			st.LossRate = float64(st.ResentPackets+st.GapFills) / float64(st.DataPackets+st.GapFills)
		}
		st.RTTTrackOverflow = d.q.overflow
		st.TurnTotalMs = float64(d.turnNs) / 1e6
		periods := d.rounds.periodList(d.roundTrip(c.hsRTT)) // closes the last round
		st.Ramp = d.rounds.ramp()
		finishIdle(c, d, st, i)
		finishQueue(d, st)
		st.PathRTTP50Ms = pathMedian(st)
		st.DelayedAckStalls, st.DelayedAckTotalMs = delayedAckStalls(&d.lone, &d.rtt)
		ser := d.series
		if ser == nil {
			ser = a.emptySeries()
		}
		c.Directions[i] = &Direction{From: from, To: to, DirectionStats: *st, Series: ser, periods: periods}
	}
	if a.opts.OnFinish == nil {
		diagnoseWanted(c, a.opts.Wanted, a.opts.windowRatio()) // else just before OnFinish (see emitFinished)
	}
}

// diagnoseWanted diagnoses c unless wanted (Options.Wanted) says it will
// not be shown.
func diagnoseWanted(c *Connection, wanted func(*Connection) bool, wr WindowRatio) {
	if wanted == nil || wanted(c) {
		diagnose(c, wr)
	}
}

// compact drops what a finished connection no longer needs: its
// per-packet state (kept for the next connection), and its series beyond
// maxPoints points each (all of them if maxPoints is negative).
func (c *Connection) compact(a *Analyzer, maxPoints int) {
	if len(a.freeDirs) < maxFreeDirs {
		for i := range c.dirs {
			c.dirs[i].reset()
		}
		a.freeDirs = append(a.freeDirs, c.dirs)
	}
	c.dirs = nil
	for _, d := range c.Directions {
		if d.Series == nil || d.Series == a.empty {
			continue
		}
		if maxPoints < 0 {
			d.Series = a.emptySeries()
		} else {
			d.Series = d.Series.reduced(maxPoints)
		}
	}
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
		v := histValue(lone.lo + i)
		if v >= float64(floor) && v <= float64(rtt.min+500_000) {
			n += int(cnt)
			total += float64(cnt) * (v - float64(rtt.min)) / 1e3
		}
	}
	return n, total
}

// queueMinSamples is the fewest RTT samples a queueing delay is told from.
const queueMinSamples = 10

// finishQueue measures the queueing delay from the best RTT samples for
// where the capture was taken: next to the receiver the data-to-ACK time
// is only the receiver's ACK delay, and the echo RTT shows the round trip.
func finishQueue(d *dirAnalysis, st *DirectionStats) {
	type source struct {
		name string
		h    *histogram
	}
	order := []source{{"karn", &d.rtt}, {"timestamps", &d.tsrtt}}
	if st.CapturedNear == "receiver" {
		order = []source{{"echo", &d.echortt}}
	}
	for _, s := range order {
		if s.h.n < queueMinSamples {
			continue
		}
		lo := float64(s.h.min)
		st.QueueRTTSource = s.name
		st.QueueDelayMs = max(0, s.h.quantile(0.95)-lo) / 1e3
		st.QueueDelayP50Ms = max(0, s.h.quantile(0.5)-lo) / 1e3
		return
	}
}

// placeShare is how much longer the capture point's round trip to one end
// must be than to the other for the capture to be placed near that other
// end: twice. In between (a tap half-way, or both ends on one LAN) the
// capture is "unknown", and neither end's view is assumed.
const placeShare = 2.0

// placeLAN is the round trip (µs) under which the location cannot be told
// nor matters: both ends answer within a millisecond of the capture.
const placeLAN = 1000.0

// finishIdle decides where the capture was taken for this direction and
// turns the recorded gaps into idle time.
func finishIdle(c *Connection, d *dirAnalysis, st *DirectionStats, dir int) {
	hs := float64(c.hsRTT) / 1e3 // µs
	rttMin, echoMin := float64(d.rtt.min), float64(d.echortt.min)
	toR, toS, src := place(c, d, dir)
	st.CapturedNear = "unknown"
	if toR+toS >= placeLAN {
		switch {
		case toR >= placeShare*toS:
			st.CapturedNear = "sender"
		case toS >= placeShare*toR:
			st.CapturedNear = "receiver"
		}
	}
	st.CaptureToReceiverMs, st.CaptureToSenderMs, st.CapturedNearFrom = toR/1e3, toS/1e3, src
	path := 0.0 // µs
	echoOK := d.echortt.n >= queueMinSamples
	switch {
	case st.CapturedNear == "sender" && d.rtt.n > 0:
		path, st.PathRTTSource = rttMin, "karn"
	case st.CapturedNear == "receiver" && echoOK && (hs == 0 || echoMin < hs):
		// Near the receiver the round trip is the sender's leg seen in
		// the receiver's timestamps echoed by new data; the handshake's
		// when it is no longer (a slow one is).
		path, st.PathRTTSource = echoMin, "echo"
	case hs > 0 && st.CapturedNear != "sender":
		path, st.PathRTTSource = hs, "handshake"
	case d.rtt.n > 0:
		path, st.PathRTTSource = rttMin, "karn"
	case hs > 0:
		path, st.PathRTTSource = hs, "handshake"
	}
	st.PathRTTMs = path / 1e3
	if st.TransferMs > 0 {
		pthresh := max(1000, path/4)
		var pause float64
		for i, n := range d.pauses.counts {
			if v := histValue(d.pauses.lo + i); n > 0 && v > pthresh {
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
		v := histValue(d.gaps.lo + i)
		if v > thresh {
			st.IdleGaps += int(n)
			st.IdleTotalMs += float64(n) * (v - base) / 1e3
			st.IdleMaxMs = max(st.IdleMaxMs, (v-base)/1e3)
		}
	}
}

// place returns the capture point's round trips (µs) to this direction's
// receiver and to its sender, and what they were read from. The best
// source comes first:
//   - the data's own two legs at their lowest, with TCP timestamps: data to
//     its ACK (to the receiver and back) and the receiver's timestamp to the
//     new data echoing it (to the sender and back); a slow handshake (a SYN
//     queued behind load) does not move them;
//   - the handshake's two legs, timed as Karn would: the last SYN to its
//     SYN-ACK is the round trip to the server, that SYN-ACK to the ACK the
//     round trip to the client;
//   - without a handshake, the data's legs as far as they go: data to ACK,
//     and the echo where there is one.
func place(c *Connection, d *dirAnalysis, dir int) (toR, toS float64, src string) {
	rttMin, echoMin := float64(d.rtt.min), float64(d.echortt.min)
	karnOK, echoOK := d.rtt.n >= queueMinSamples, d.echortt.n >= queueMinSamples
	switch {
	case karnOK && echoOK:
		return rttMin, echoMin, "data"
	case c.hsRTT > 0:
		srv, cli := float64(c.hsServer)/1e3, float64(c.hsClient)/1e3
		if dir == 0 { // the client sends
			return srv, cli, "handshake"
		}
		return cli, srv, "handshake"
	case echoOK:
		if d.rtt.n == 0 {
			return 0, echoMin, "echo"
		}
		return rttMin, echoMin, "data"
	case d.rtt.n > 0:
		return rttMin, 0, "karn"
	}
	return 0, 0, ""
}

// pathMedian is the median round trip from the leg the capture point can
// time (DirectionStats.PathRTTP50Ms).
func pathMedian(st *DirectionStats) float64 {
	m := 0.0
	switch {
	case st.CapturedNear == "receiver" && st.EchoRTTSamples >= queueMinSamples:
		m = st.EchoRTTP50Ms
	case st.CapturedNear == "receiver":
		m = st.PathRTTMs
	case st.RTTSamples > 0:
		m = st.RTTP50Ms
	}
	return max(m, st.PathRTTMs)
}

// roundTrip is the round length of the direction's rounds (ns): the
// handshake's round trip, or the data's where that is shorter (a SYN-ACK
// the server was slow to send). The data's is the longer of its two legs
// at their lowest so far, data to ACK and the receiver's timestamp to the
// data echoing it: one is the round trip wherever the capture was taken,
// the other the near end's reaction. Under a quarter of the handshake it is
// that reaction alone (a capture near the receiver without timestamps).
// Without a handshake only both legs time a round.
func (d *dirAnalysis) roundTrip(hs int64) int64 {
	leg := int64(0)
	if d.rtt.n > 0 {
		leg = int64(d.rtt.min) * 1000
	}
	if d.echortt.n > 0 {
		leg = max(leg, int64(d.echortt.min)*1000)
	}
	switch {
	case hs == 0 && d.rtt.n > 0 && d.echortt.n > 0:
		return leg // mid-stream: both legs, or no round at all
	case hs > 0 && leg < hs && leg >= hs/4:
		return leg
	}
	return hs
}

// ackClockNs is how soon after an ACK a burst counts as released by it:
// the sender's kernel sends from the ACK's softirq, microseconds after it
// arrives; a millisecond allows a capture point a LAN hop away.
const ackClockNs = 1_000_000

// burst records whether a data segment at t starts a burst (after a pause
// of over a quarter of the round trip rtt and a millisecond) and whether
// an ACK released it.
func (d *dirAnalysis) burst(t, rtt int64, fl PacketFlags) {
	if d.stats.DataPackets < 2 || fl&AnyRetransmission != 0 {
		return
	}
	if gap := t - d.lastData; gap <= max(rtt/4, 1_000_000) {
		return
	}
	d.stats.Bursts++
	if d.ackAt > d.lastData && t-d.ackAt <= ackClockNs {
		d.stats.AckedBursts++
	}
	if tol := rtt / 8; d.acks.within(t-rtt-tol-ackClockNs, t-rtt+tol+ackClockNs) {
		d.stats.RTTAckedBursts++
	}
}

// ackRing holds the times of a direction's last advancing ACKs, one per
// sixteenth of a round trip at most: the last two round trips.
type ackRing struct {
	t    [32]int64
	n    uint32
	last int64
}

// add records an ACK at t unless one was recorded less than gap before.
func (r *ackRing) add(t, gap int64) {
	if r.n > 0 && t-r.last < gap {
		return
	}
	r.t[r.n%uint32(len(r.t))] = t
	r.n++
	r.last = t
}

// within says whether one of the ACKs held came between lo and hi.
func (r *ackRing) within(lo, hi int64) bool {
	for i := range min(int(r.n), len(r.t)) {
		if v := r.t[i]; v >= lo && v <= hi {
			return true
		}
	}
	return false
}
