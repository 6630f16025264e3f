package analyzer

import "github.com/wanlab/wanlab/analyzer/decode"

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
	seqSeen bool // a segment occupying sequence space was seen
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

// setBases fixes the reference of each direction's relative sequence
// numbers at the first packet that shows it.
func setBases(fs, rs *seqState, sg *segment) {
	if !fs.baseSet {
		fs.baseSet = true
		fs.base = sg.seq - 1
		if sg.flags&fSYN != 0 {
			fs.base = sg.seq
		}
	}
	if !rs.baseSet && sg.flags&fACK != 0 {
		rs.baseSet = true
		rs.base = sg.ack - 1
	}
}

// seqSpan is the unwrapped sequence range a segment occupied and how many
// of its bytes the capture had not shown before.
type seqSpan struct {
	start, end int64
	newBytes   int64
	// resent: bytes of sequence space the capture had already seen sent
	// (whatever Wireshark calls the segment). filledGap: the segment only
	// filled space the capture saw skipped, and not as a reordering.
	resent    int64
	filledGap bool
	// below: the segment started below the highest sequence sent (a
	// re-send, or a segment the capture saw late): tcptrace's rexmt or
	// outoforder, after which it takes no RTT sample from older segments.
	below bool
}

// sent advances the sender's sequence state past segment sg (classified
// as fl) and fills sp, which must be zero (the caller's new variable),
// with the range it occupied (empty for a pure ACK).
func (s *seqState) sent(sg *segment, fl PacketFlags, sp *seqSpan) {
	nextseq := sg.nextseq()
	if sg.occupiesSeq() {
		sp.start = s.rel(sg.seq)
		sp.end = sp.start + int64(nextseq-sg.seq)
		if !s.seqSeen {
			// The first segment sets the highest sequence: before it lies
			// what was sent before the capture (mid-stream), not a hole.
			s.seqSeen = true
			s.hiEnd = min(s.hiEnd, sp.start)
		}
		if sp.start < s.hiEnd {
			sp.below = true
			top := min(sp.end, s.hiEnd)
			sp.newBytes = s.fillHoles(sp.start, top)
			sp.resent = top - sp.start - sp.newBytes
		}
		if sp.end > s.hiEnd {
			if sp.start > s.hiEnd {
				s.addHole(s.hiEnd, sp.start)
			}
			sp.newBytes += sp.end - max(sp.start, s.hiEnd)
			s.hiEnd = sp.end
		}
		if sg.flags&(fSYN|fFIN) != 0 {
			sp.newBytes = min(sp.newBytes, int64(sg.len))
			sp.resent = min(sp.resent, int64(sg.len))
		}
		// A segment that re-sends data and fills a gap counts once, as a
		// re-send.
		sp.filledGap = sp.below && sp.newBytes > 0 && sp.resent == 0 && fl&OutOfOrder == 0
	}
	if fl&ZeroWindowProbe != 0 {
		return
	}
	if seqGT(nextseq, s.nextseq) || !s.nextseqValid {
		s.nextseq, s.nextseqTime, s.nextseqValid = nextseq, sg.t, true
	}
	if sg.seq == s.maxSeqToBeAcked || !s.maxSeqValid {
		s.maxSeqToBeAcked, s.maxSeqValid = s.nextseq, true
	}
}

// received records the ACK, window and flags sg carries from this side;
// it reports whether the ACK moved forward.
func (s *seqState) received(sg *segment, fl PacketFlags) (ackAdvanced bool) {
	ackAdvanced = !s.ackSeen || seqGT(sg.ack, s.lastAck)
	s.window, s.windowValid = sg.window, true
	s.lastAck, s.lastAckTime = sg.ack, sg.t
	if sg.flags&fACK != 0 {
		s.ackSeen = true
	}
	s.lastSegFlags = fl
	return ackAdvanced
}
