package analyzer

import (
	"testing"
	"time"
)

// TestClassify checks the flag classifier rule by rule against the tests
// of tcp_analyze_sequence_number in Wireshark's packet-tcp.c. The sender
// (fs) has sent up to 5000 at 1 s with window 65535 and last ACKed 9000;
// the receiver (rs) has ACKed 4000 with window 65535.
func TestClassify(t *testing.T) {
	const sec = int64(time.Second)
	sender := func() seqState {
		return seqState{shift: 0, nextseq: 5000, nextseqValid: true, nextseqTime: sec,
			maxSeqToBeAcked: 5000, maxSeqValid: true, window: 65535, windowValid: true,
			lastAck: 9000, lastAckTime: sec, ackSeen: true}
	}
	receiver := func() seqState {
		return seqState{shift: 0, nextseq: 9000, nextseqValid: true, nextseqTime: sec,
			maxSeqToBeAcked: 9000, maxSeqValid: true, window: 65535, windowValid: true,
			lastAck: 4000, lastAckTime: sec, ackSeen: true}
	}
	data := func(seq, n uint32, dt time.Duration) segment {
		return segment{seq: seq, ack: 9000, len: n, flags: fACK, window: 65535, t: sec + int64(dt)}
	}
	ack := func(win uint32) segment {
		return segment{seq: 5000, ack: 9000, flags: fACK, window: win, t: sec + int64(time.Millisecond)}
	}
	cases := []struct {
		name   string
		fs, rs func(*seqState)
		sg     segment
		irtt   time.Duration
		want   PacketFlags
	}{
		{name: "in order", sg: data(5000, 1000, time.Millisecond), want: 0},
		{name: "beyond next expected: lost segment", sg: data(6000, 1000, time.Millisecond), want: LostSegment},
		{name: "old data after the iRTT: retransmission", sg: data(4000, 1000, 50*time.Millisecond), irtt: 20 * time.Millisecond, want: Retransmission},
		{name: "old data within the iRTT: out-of-order", sg: data(4200, 500, 10*time.Millisecond), irtt: 20 * time.Millisecond, want: OutOfOrder},
		{name: "within the iRTT but ending at next expected: retransmission", sg: data(4000, 1000, 10*time.Millisecond), irtt: 20 * time.Millisecond, want: Retransmission},
		{name: "without iRTT the threshold is 3 ms", sg: data(4500, 200, 2*time.Millisecond), want: OutOfOrder},
		{name: "already acknowledged: spurious", sg: data(2000, 1000, 50*time.Millisecond), want: SpuriousRetransmission},
		{name: "after two dup ACKs at its start: fast retransmission",
			rs: func(s *seqState) { s.dupAckNum = 2 }, sg: data(4000, 1000, 5*time.Millisecond), want: FastRetransmission},
		{name: "dup ACKs older than 20 ms: retransmission",
			rs: func(s *seqState) { s.dupAckNum = 2; s.lastAckTime = 0 }, sg: data(4000, 1000, 5*time.Millisecond), want: Retransmission},
		{name: "repeated pure ACK: duplicate ACK", sg: ack(65535), want: DupAck},
		{name: "same ACK, new window: window update", sg: ack(30000), want: WindowUpdate},
		{name: "zero window", sg: ack(0), want: ZeroWindow},
		{name: "one byte into a zero window: probe", rs: func(s *seqState) { s.window = 0 }, sg: data(5000, 1, time.Millisecond), want: ZeroWindowProbe},
		{name: "keep-alive: one before next expected", sg: segment{seq: 4999, ack: 9000, flags: fACK, window: 65535, t: sec}, want: KeepAlive},
		{name: "answer to a keep-alive", rs: func(s *seqState) { s.lastSegFlags = KeepAlive }, sg: ack(65535), want: KeepAliveAck},
		{name: "answer to a zero-window probe", fs: func(s *seqState) { s.window = 0 }, rs: func(s *seqState) { s.lastSegFlags = ZeroWindowProbe },
			sg: ack(0), want: ZeroWindow | ZeroWindowProbeAck},
		{name: "data up to the peer's right edge: window full", rs: func(s *seqState) { s.window = 2000 }, sg: data(5000, 1000, time.Millisecond), want: WindowFull},
		{name: "ACK beyond what was seen: acked unseen", sg: segment{seq: 5000, ack: 9500, flags: fACK, window: 65535, t: sec}, want: AckedUnseen},
		{name: "SYN repeated: retransmission", fs: func(s *seqState) { s.nextseq = 1001 },
			sg: segment{seq: 1000, flags: fSYN, window: 64240, t: sec + int64(time.Millisecond)}, irtt: 0, want: Retransmission},
		{name: "FIN is not a duplicate ACK", sg: segment{seq: 5000, ack: 9000, flags: fACK | fFIN, window: 65535, t: sec}, want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs, rs := sender(), receiver()
			if tc.fs != nil {
				tc.fs(&fs)
			}
			if tc.rs != nil {
				tc.rs(&rs)
			}
			sg := tc.sg
			if got := classify(&fs, &rs, &sg, int64(tc.irtt)); got != tc.want {
				t.Errorf("flags %v, want %v", got, tc.want)
			}
		})
	}
}

// TestClassifyCountsDupAcks checks the duplicate-ACK counter Wireshark
// keeps while classifying: it grows with each repeat and restarts when
// the ACK moves.
func TestClassifyCountsDupAcks(t *testing.T) {
	fs := seqState{shift: 0, nextseq: 100, nextseqValid: true, window: 1000, windowValid: true, lastAck: 50, ackSeen: true}
	rs := seqState{shift: 0}
	sg := segment{seq: 100, ack: 50, flags: fACK, window: 1000}
	for i := 1; i <= 3; i++ {
		if fl := classify(&fs, &rs, &sg, 0); fl != DupAck || fs.dupAckNum != i {
			t.Fatalf("repeat %d: flags %v, count %d", i, fl, fs.dupAckNum)
		}
	}
	sg.ack = 60
	if fl := classify(&fs, &rs, &sg, 0); fl != 0 || fs.dupAckNum != 0 {
		t.Fatalf("new ACK: flags %v, count %d", fl, fs.dupAckNum)
	}
}
