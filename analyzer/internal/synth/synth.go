// Package synth simulates one TCP bulk transfer and writes the capture a tap
// next to the receiver would record, with known losses, reorderings,
// delayed ACKs and windows, so analyzer tests know the truth.
package synth

import (
	"container/heap"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Config describes the transfer. The server sends Bytes to the client; the
// capture is taken at the client (receiver). Zero fields take defaults.
type Config struct {
	Bytes      int64         // data the server sends (default 1 MB)
	MSS        int           // default 1448 (payload per segment)
	OneWay     time.Duration // one-way delay each direction (default 10 ms)
	Rate       float64       // bottleneck, bytes/s (default 12.5e6 = 100 Mbit/s)
	Window     int           // receiver window in bytes (default 1 MB); scale 7 is used
	Flight     int           // sender's cap on bytes in flight (default: no cap beyond Window)
	DelayedAck bool          // ACK every second segment, or after 40 ms
	Drop       map[int]bool  // segment numbers (0-based) lost on their first transmission
	Reorder    map[int]bool  // segment numbers that arrive after their successor
	// SentAhead are segment numbers sent without the data's one-way delay
	// (netem's reorder: ahead of its delay line), arriving OneWay early.
	SentAhead    map[int]bool
	Snaplen      int       // default 96
	Start        time.Time // capture start (default 2026-01-01)
	NoTimestamps bool      // omit the TCP timestamp option
	ReadRate     float64   // receiving application's read rate, bytes/s (0: instant)
	Backwards    bool      // write one frame with a timestamp earlier than its predecessor
	ClientISN    uint32    // client's initial sequence number (default 1000)
	AtSender     bool      // capture next to the sender (server) instead of the receiver
	Reno         bool      // sender runs Reno congestion control (else only Window/Flight bound it)
	// CaptureFrom starts the capture this long after the SYN (a capture
	// started mid-stream: no handshake).
	CaptureFrom time.Duration
	// Jitter adds a uniformly random 0..Jitter to each data segment's
	// one-way delay (netem's "delay D J"; segments may overtake).
	Jitter time.Duration
	// LossRate drops this share of first transmissions at random.
	LossRate float64
	// Seed seeds Jitter and LossRate (default 1).
	Seed uint64
}

// Truth is what the simulation did, for assertions.
type Truth struct {
	Packets         int
	DataPackets     int // data segments captured (lost ones are not)
	Retransmissions int // retransmitted segments captured
	ReorderedArrive int
	DupAcks         int
	ZeroWindows     int
	Duration        time.Duration
}

type event struct {
	t    time.Duration
	kind int
	seq  int64 // data: segment start; ack: ack number
	n    int   // data: length
	rtx  bool
	win  int
	sack [2]int64
	idx  int
	tv   uint32 // TSval and TSecr the segment carries
	te   uint32
}

const (
	evArrive = iota // data reaches the receiver (captured)
	evAck           // ACK reaches the sender
	evDelack        // receiver's delayed-ACK timer
	evRTO           // sender's retransmission timer
	evRead          // receiving app read some bytes
	evSend          // sender may send (after link busy)
)

func (e event) order() (time.Duration, int) { return e.t, e.idx }

// timeQueue is a container/heap of events in time order, ties broken by
// a second key (the order the events were made, or the connection).
type timeQueue[E interface{ order() (time.Duration, int) }] []E

func (q timeQueue[E]) Len() int { return len(q) }
func (q timeQueue[E]) Less(i, j int) bool {
	ti, ki := q[i].order()
	tj, kj := q[j].order()
	if ti != tj {
		return ti < tj
	}
	return ki < kj
}
func (q timeQueue[E]) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *timeQueue[E]) Push(x any)   { *q = append(*q, x.(E)) }
func (q *timeQueue[E]) Pop() any     { o := *q; e := o[len(o)-1]; *q = o[:len(o)-1]; return e }

// Write runs the simulation and writes a pcap (nanosecond, Ethernet) to w.
func Write(w io.Writer, cfg Config) (Truth, error) {
	if cfg.Bytes == 0 {
		cfg.Bytes = 1 << 20
	}
	if cfg.MSS == 0 {
		cfg.MSS = 1448
	}
	if cfg.OneWay == 0 {
		cfg.OneWay = 10 * time.Millisecond
	}
	if cfg.Rate == 0 {
		cfg.Rate = 12.5e6
	}
	if cfg.Window == 0 {
		cfg.Window = 1 << 20
	}
	if cfg.Flight == 0 {
		cfg.Flight = 1 << 30
	}
	pw, err := newCapture(w, &cfg.Snaplen, &cfg.Start)
	if err != nil {
		return Truth{}, err
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	s := &sim{cfg: cfg, w: pw, frame: make([]byte, 128), rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed))}
	s.run()
	return s.truth, s.err
}

// newCapture gives snaplen (default 96) and start (default 2026-01-01)
// their defaults and writes the header of a nanosecond Ethernet pcap to w.
func newCapture(w io.Writer, snaplen *int, start *time.Time) (*pcapgo.Writer, error) {
	if *snaplen == 0 {
		*snaplen = 96
	}
	if start.IsZero() {
		*start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	pw := pcapgo.NewWriterNanos(w)
	return pw, pw.WriteFileHeader(uint32(*snaplen), layers.LinkTypeEthernet)
}

type sim struct {
	cfg   Config
	rng   *rand.Rand
	w     *pcapgo.Writer
	err   error
	truth Truth
	q     timeQueue[event]
	seqn  int
	frame []byte
	lastT time.Duration

	// sender (server)
	una, nxt       int64
	linkFree       time.Duration
	dupacks        int
	peerWin        int
	sentOnce       map[int64]bool
	finSent        bool
	rtoArmedUna    int64
	cwnd, ssthresh float64
	// receiver (client)
	rcvNxt     int64
	ooo        map[int64]int // start -> len of buffered out-of-order segments
	unacked    int           // in-order segments not yet acknowledged
	delackSet  bool
	unread     int64
	readerFree time.Duration
	clientISN  uint32
	serverISN  uint32
	backDone   bool
	// TCP timestamps: the sim clock in ms is both hosts' TS clock; each
	// side echoes the latest TSval it received (TS.Recent).
	tsVal, tsEcr               uint32 // for the next captured segment
	serverRecent, clientRecent uint32
}

func (s *sim) push(e event) {
	s.seqn++
	e.idx = s.seqn
	heap.Push(&s.q, e)
}

func (s *sim) rcvWindow() int {
	w := s.cfg.Window - int(s.unread)
	if w < 0 {
		w = 0
	}
	return w
}

func (s *sim) run() {
	s.clientISN, s.serverISN = 1000, 500000
	if s.cfg.ClientISN != 0 {
		s.clientISN = s.cfg.ClientISN
	}
	s.ooo = map[int64]int{}
	s.sentOnce = map[int64]bool{}
	s.peerWin = s.cfg.Window
	s.cwnd, s.ssthresh = float64(10*s.cfg.MSS), 1e12
	d := s.cfg.OneWay
	// Handshake as seen at the client.
	msd := uint32(d / time.Millisecond)
	s.clientRecent, s.serverRecent = msd, 2*msd // SYN-ACK's and the ACK's TSvals
	s.tsVal, s.tsEcr = 2*msd, msd
	if s.cfg.AtSender {
		s.capture(d, false, s.clientISN, 0, 0, flagSYN, 64240, true, [2]int64{})
		s.capture(d, true, s.serverISN, s.clientISN+1, 0, flagSYN|flagACK, 65160, true, [2]int64{})
		s.capture(3*d, false, s.clientISN+1, s.serverISN+1, 0, flagACK, s.cfg.Window>>7, false, [2]int64{})
	} else {
		s.capture(0, false, s.clientISN, 0, 0, flagSYN, 64240, true, [2]int64{})
		s.capture(2*d, true, s.serverISN, s.clientISN+1, 0, flagSYN|flagACK, 65160, true, [2]int64{})
		s.capture(2*d, false, s.clientISN+1, s.serverISN+1, 0, flagACK, s.cfg.Window>>7, false, [2]int64{})
	}
	// The server learns of the ACK one way later and starts sending.
	s.rcvNxt = 0
	s.trySend(3 * d)
	for s.q.Len() > 0 && s.err == nil {
		e := heap.Pop(&s.q).(event)
		switch e.kind {
		case evArrive:
			s.arrive(e)
		case evAck:
			s.ackArrive(e)
		case evDelack:
			if s.delackSet {
				s.delackSet = false
				s.sendAck(e.t, [2]int64{})
			}
		case evRTO:
			if s.una == e.seq && s.una < s.nxt {
				s.transmit(e.t, s.una, true)
				s.push(event{t: e.t + 200*time.Millisecond + 2*d, kind: evRTO, seq: s.una})
			}
		case evRead:
			wasZero := s.rcvWindow() < s.cfg.MSS
			s.unread -= int64(e.n)
			if wasZero && s.rcvWindow() >= s.cfg.MSS {
				s.sendAck(e.t, [2]int64{}) // window update
			}
		case evSend:
			s.trySend(e.t)
		}
	}
	s.truth.Duration = s.lastT
}

// trySend sends new segments the window allows, at time t, at the sender.
func (s *sim) trySend(t time.Duration) {
	win := min(int64(s.peerWin), int64(s.cfg.Flight))
	if s.cfg.Reno {
		win = min(win, int64(s.cwnd))
	}
	for s.nxt < s.cfg.Bytes && s.nxt-s.una+int64(s.cfg.MSS) <= win {
		s.transmit(t, s.nxt, false)
		n := min(int64(s.cfg.MSS), s.cfg.Bytes-s.nxt)
		s.nxt += n
	}
	if !s.cfg.Reno && s.nxt < s.cfg.Bytes && s.nxt-s.una < win && win-(s.nxt-s.una) < int64(s.cfg.MSS) && s.peerWin > 0 {
		// Send what fits (window full).
		n := win - (s.nxt - s.una)
		s.transmitN(t, s.nxt, int(n), false)
		s.nxt += n
	}
	if s.nxt >= s.cfg.Bytes && s.una >= s.cfg.Bytes && !s.finSent {
		s.finSent = true
	}
}

func (s *sim) transmit(t time.Duration, seq int64, rtx bool) {
	n := int(min(int64(s.cfg.MSS), s.cfg.Bytes-seq))
	s.transmitN(t, seq, n, rtx)
}

func (s *sim) transmitN(t time.Duration, seq int64, n int, rtx bool) {
	dep := max(t, s.linkFree)
	tx := time.Duration(float64(n+66) / s.cfg.Rate * 1e9)
	s.linkFree = dep + tx
	segNo := int(seq / int64(s.cfg.MSS))
	tv := uint32(t / time.Millisecond)
	if s.cfg.AtSender {
		// The sender's tap sees the segment when TCP hands it down, before
		// the bottleneck queue.
		s.truth.DataPackets++
		if rtx {
			s.truth.Retransmissions++
		}
		s.tsVal, s.tsEcr = tv, s.serverRecent
		s.capture(t, true, s.serverISN+1+uint32(seq), s.clientISN+1, n, flagACK|flagPSH, 502, true, [2]int64{})
	}
	first := !s.sentOnce[seq]
	s.sentOnce[seq] = true
	if !rtx {
		s.push(event{t: dep + 200*time.Millisecond + 2*s.cfg.OneWay, kind: evRTO, seq: s.una})
	}
	if first && seq%int64(s.cfg.MSS) == 0 && s.cfg.Drop[segNo] {
		return
	}
	if first && s.cfg.LossRate > 0 && s.rng.Float64() < s.cfg.LossRate {
		return
	}
	arr := dep + tx + s.cfg.OneWay
	if s.cfg.Jitter > 0 {
		arr += time.Duration(s.rng.Int64N(int64(s.cfg.Jitter)))
	}
	if first && seq%int64(s.cfg.MSS) == 0 && s.cfg.Reorder[segNo] {
		arr += tx + 5*time.Microsecond // just after its successor
		s.truth.ReorderedArrive++
	}
	if first && seq%int64(s.cfg.MSS) == 0 && s.cfg.SentAhead[segNo] {
		arr -= s.cfg.OneWay
		s.truth.ReorderedArrive++
	}
	s.push(event{t: arr, kind: evArrive, seq: seq, n: n, rtx: rtx, tv: tv, te: s.serverRecent})
}

func (s *sim) arrive(e event) {
	s.truth.DataPackets++
	if e.rtx {
		s.truth.Retransmissions++
	}
	if !s.cfg.AtSender {
		s.tsVal, s.tsEcr = e.tv, e.te
		s.capture(e.t, true, s.serverISN+1+uint32(e.seq), s.clientISN+1, e.n, flagACK|flagPSH, 502, true, [2]int64{})
	}
	s.clientRecent = e.tv
	if e.seq+int64(e.n) <= s.rcvNxt {
		s.sendAck(e.t, [2]int64{e.seq, e.seq + int64(e.n)}) // D-SACK style immediate ACK
		return
	}
	if e.seq > s.rcvNxt {
		s.ooo[e.seq] = e.n
		s.truth.DupAcks++
		s.sendAck(e.t, [2]int64{e.seq, e.seq + int64(e.n)})
		return
	}
	// In order (possibly overlapping).
	hole := len(s.ooo) > 0
	s.deliver(e.t, e.seq+int64(e.n))
	for {
		n, ok := s.ooo[s.rcvNxt]
		if !ok {
			break
		}
		delete(s.ooo, s.rcvNxt)
		s.deliver(e.t, s.rcvNxt+int64(n))
	}
	s.unacked++
	if !s.cfg.DelayedAck || hole || s.unacked >= 2 {
		s.sendAck(e.t, [2]int64{})
		return
	}
	if !s.delackSet {
		s.delackSet = true
		s.push(event{t: e.t + 40*time.Millisecond, kind: evDelack})
	}
}

func (s *sim) deliver(t time.Duration, upTo int64) {
	n := upTo - s.rcvNxt
	if n <= 0 {
		return
	}
	s.rcvNxt = upTo
	if s.cfg.ReadRate > 0 {
		// The application reads serially at ReadRate.
		s.unread += n
		s.readerFree = max(s.readerFree, t) + time.Duration(float64(n)/s.cfg.ReadRate*1e9)
		s.push(event{t: s.readerFree, kind: evRead, n: int(n)})
	}
}

// sendAck makes the client send an ACK (captured now, at the sender one way later).
func (s *sim) sendAck(t time.Duration, sack [2]int64) {
	t += ackProcessing
	s.unacked = 0
	s.delackSet = false
	win := s.rcvWindow()
	if win < s.cfg.MSS && s.cfg.ReadRate > 0 {
		win = 0 // receiver silly-window avoidance: advertise zero
	}
	if win == 0 {
		s.truth.ZeroWindows++
	}
	tv := uint32(t / time.Millisecond)
	if !s.cfg.AtSender {
		s.tsVal, s.tsEcr = tv, s.clientRecent
		s.capture(t, false, s.clientISN+1, s.serverISN+1+uint32(s.rcvNxt), 0, flagACK, win>>7, true, sack)
	}
	s.push(event{t: t + s.cfg.OneWay, kind: evAck, seq: s.rcvNxt, win: (win >> 7) << 7, sack: sack, tv: tv, te: s.clientRecent})
}

func (s *sim) ackArrive(e event) {
	if s.cfg.AtSender {
		s.tsVal, s.tsEcr = e.tv, e.te
		s.capture(e.t, false, s.clientISN+1, s.serverISN+1+uint32(e.seq), 0, flagACK, e.win>>7, true, e.sack)
	}
	s.serverRecent = e.tv
	s.peerWin = e.win
	if e.seq > s.una {
		acked := float64(e.seq - s.una)
		s.una = e.seq
		s.dupacks = 0
		if s.una < s.nxt {
			s.push(event{t: e.t + 200*time.Millisecond + 2*s.cfg.OneWay, kind: evRTO, seq: s.una})
		}
		if s.cwnd < s.ssthresh {
			s.cwnd += acked
		} else {
			s.cwnd += float64(s.cfg.MSS) * acked / s.cwnd
		}
	} else if e.seq == s.una && s.una < s.nxt && e.sack[1] > 0 {
		s.dupacks++
		if s.dupacks == 3 {
			s.ssthresh = max(s.cwnd/2, float64(2*s.cfg.MSS))
			s.cwnd = s.ssthresh
			s.transmit(e.t, s.una, true)
		}
	}
	if s.una >= s.cfg.Bytes {
		return
	}
	if s.peerWin == 0 {
		// Zero-window probe after 200 ms.
		return
	}
	s.trySend(e.t)
}

// ackProcessing is the receiver's time from a segment's arrival to its ACK.
const ackProcessing = 15 * time.Microsecond

const (
	flagFIN = 0x01
	flagSYN = 0x02
	flagPSH = 0x08
	flagACK = 0x10
)

// capture writes one frame at time t. fromServer picks the direction.
func (s *sim) capture(t time.Duration, fromServer bool, seq, ack uint32, n int, flags uint8, win int, opts bool, sack [2]int64) {
	if s.err != nil {
		return
	}
	if t < s.lastT {
		t = s.lastT
	}
	s.lastT = t
	if t < s.cfg.CaptureFrom {
		return
	}
	b := s.frame[:0]
	client := [4]byte{10, 0, 0, 2}
	server := [4]byte{10, 0, 0, 1}
	src, dst := client, server
	sport, dport := uint16(40000), uint16(80)
	if fromServer {
		src, dst, sport, dport = server, client, 80, 40000
	}
	// Ethernet
	b = append(b, 2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00)
	var o []byte
	if flags&flagSYN != 0 {
		o = append(o, 2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 3, 7)
		binary.BigEndian.PutUint32(o[8:], uint32(t/time.Millisecond))
	} else if !s.cfg.NoTimestamps {
		o = append(o, 1, 1, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0)
		binary.BigEndian.PutUint32(o[4:], s.tsVal)
		binary.BigEndian.PutUint32(o[8:], s.tsEcr)
	}
	if sack[1] > 0 {
		o = append(o, 1, 1, 5, 10, 0, 0, 0, 0, 0, 0, 0, 0)
		k := len(o) - 8
		binary.BigEndian.PutUint32(o[k:], s.serverISN+1+uint32(sack[0]))
		binary.BigEndian.PutUint32(o[k+4:], s.serverISN+1+uint32(sack[1]))
	}
	tcpLen := 20 + len(o)
	ipLen := 20 + tcpLen + n
	b = append(b, 0x45, 0, byte(ipLen>>8), byte(ipLen), 0, 0, 0x40, 0, 64, 6, 0, 0)
	b = append(b, src[:]...)
	b = append(b, dst[:]...)
	b = binary.BigEndian.AppendUint16(b, sport)
	b = binary.BigEndian.AppendUint16(b, dport)
	b = binary.BigEndian.AppendUint32(b, seq)
	b = binary.BigEndian.AppendUint32(b, ack)
	b = append(b, byte(tcpLen/4)<<4, flags)
	b = binary.BigEndian.AppendUint16(b, uint16(min(win, 65535)))
	b = append(b, 0, 0, 0, 0)
	b = append(b, o...)
	wire := len(b) + n
	for len(b) < min(wire, s.cfg.Snaplen) {
		b = append(b, 0)
	}
	b = b[:min(len(b), s.cfg.Snaplen)]
	s.frame = b[:0]
	ts := s.cfg.Start.Add(t)
	if s.cfg.Backwards && !s.backDone && s.truth.Packets == 10 {
		s.backDone = true
		ts = ts.Add(-time.Second)
	}
	s.truth.Packets++
	s.err = s.w.WritePacket(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(b), Length: wire}, b)
}
