package analyzer

import "time"

// segment is what the per-packet analysis reads of one TCP packet, with
// the window field already scaled by the sender's shift.
type segment struct {
	seq, ack uint32
	len      uint32 // payload bytes
	flags    uint8
	window   uint32
	t        int64 // capture time, ns from the capture start
}

// sfr: the segment carries SYN, FIN or RST.
func (sg *segment) sfr() bool { return sg.flags&(fSYN|fFIN|fRST) != 0 }

// occupiesSeq: the segment takes sequence space (payload, SYN or FIN).
func (sg *segment) occupiesSeq() bool { return sg.len > 0 || sg.flags&(fSYN|fFIN) != 0 }

// nextseq is the sequence number after this segment (SYN and FIN count one).
func (sg *segment) nextseq() uint32 { return sg.seq + sg.len + synFin(sg.flags) }

// classify returns Wireshark's tcp.analysis flags for sg, sent by the side
// whose state is fs to the side whose state is rs, following
// tcp_analyze_sequence_number in epan/dissectors/packet-tcp.c check by
// check. As Wireshark does while classifying, it counts duplicate ACKs in
// fs and moves rs's highest sequence to be acknowledged past an ACK of
// unseen data. irtt is the connection's initial RTT (0: not known).
func classify(fs, rs *seqState, sg *segment, irtt int64) PacketFlags {
	fl := classifyWindow(fs, rs, sg)
	if sg.ack != fs.lastAck {
		fs.dupAckNum = 0
	}
	// ACKED UNSEEN: acknowledges data the capture never showed.
	if rs.maxSeqValid && seqGT(sg.ack, rs.maxSeqToBeAcked) && sg.flags&fACK != 0 {
		fl |= AckedUnseen
		rs.maxSeqToBeAcked = rs.nextseq
	}
	if sg.occupiesSeq() && fl&KeepAlive == 0 {
		notAdvanced := fs.nextseqValid && seqLT(sg.seq, fs.nextseq)
		// The one-byte-before rule: a segment of more than one byte
		// that starts one byte before the next expected sequence number
		// (after a zero-window probe, or a keep-alive that carried a
		// byte) brings new data; it is not a retransmission nor out of
		// order, though it can still be spurious.
		if sg.len > 1 && fs.nextseqValid && sg.seq == fs.nextseq-1 {
			notAdvanced = false
		}
		fl |= classifyResend(fs, rs, sg, irtt, notAdvanced)
	}
	return fl
}

// classifyWindow runs Wireshark's checks from the zero-window probe to the
// duplicate ACK; a zero-window probe, a keep-alive ACK or a zero-window
// probe ACK ends the chain early, as Wireshark's goto finished_fwd does.
func classifyWindow(fs, rs *seqState, sg *segment) PacketFlags {
	var fl PacketFlags
	seq, ack, seglen, window, sfr := sg.seq, sg.ack, sg.len, sg.window, sg.sfr()
	// ZERO WINDOW PROBE: one byte at the next expected sequence number
	// into a zero window.
	if seglen == 1 && fs.nextseqValid && seq == fs.nextseq && rs.windowValid && rs.window == 0 {
		return ZeroWindowProbe
	}
	// ZERO WINDOW
	if window == 0 && !sfr {
		fl |= ZeroWindow
	}
	// LOST SEGMENT: beyond the next expected sequence number.
	if fs.nextseqValid && seqGT(seq, fs.nextseq) && sg.flags&fRST == 0 {
		fl |= LostSegment
	}
	// KEEP ALIVE: 0 or 1 byte starting one before the next expected.
	if seglen <= 1 && fs.nextseqValid && seq == fs.nextseq-1 && !sfr {
		fl |= KeepAlive
	}
	// The remaining checks look at a pure ACK repeating the last one.
	repeat := seglen == 0 && fs.windowValid && seq == fs.nextseq && ack == fs.lastAck && !sfr
	// WINDOW UPDATE
	if repeat && window != 0 && window != fs.window {
		fl |= WindowUpdate
	}
	// WINDOW FULL: data up to the right edge of the peer's window (only
	// when the peer's scale is known).
	if seglen > 0 && rs.shift >= 0 && rs.windowValid && rs.ackSeen && seq+seglen == rs.lastAck+rs.window && !sfr {
		fl |= WindowFull
	}
	// KEEP ALIVE ACK
	if repeat && window != 0 && window == fs.window && rs.lastSegFlags&KeepAlive != 0 {
		return fl | KeepAliveAck
	}
	// ZERO WINDOW PROBE ACK
	if repeat && window == 0 && window == fs.window && rs.lastSegFlags&ZeroWindowProbe != 0 {
		return fl | ZeroWindowProbeAck
	}
	// DUPLICATE ACK
	if repeat && window != 0 && window == fs.window {
		fs.dupAckNum++
		fl |= DupAck
	}
	return fl
}

// classifyResend labels a segment (not a keep-alive) that takes sequence
// space: spurious retransmission (all of it acknowledged already), then,
// when it does not advance the sequence (notAdvanced), fast
// retransmission, out-of-order or retransmission, in the order of
// Wireshark 4.0's tests.
func classifyResend(fs, rs *seqState, sg *segment, irtt int64, notAdvanced bool) PacketFlags {
	seq, seglen, t := sg.seq, sg.len, sg.t
	if seglen > 0 && rs.ackSeen && seqLE(seq+seglen, rs.lastAck) {
		return SpuriousRetransmission
	}
	if !notAdvanced {
		return 0
	}
	oooThresh := int64(3 * time.Millisecond)
	if irtt != 0 {
		oooThresh = irtt
	}
	switch {
	case rs.dupAckNum >= 2 && rs.lastAck == seq && t-rs.lastAckTime < int64(20*time.Millisecond):
		return FastRetransmission
	case t-fs.nextseqTime < oooThresh && fs.nextseq != sg.nextseq():
		// (SYN and FIN count one sequence number: a repeated SYN is a
		// retransmission, as tshark 4.0 shows it.)
		return OutOfOrder
	default:
		return Retransmission
	}
}
