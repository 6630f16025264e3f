package synth

import (
	"container/heap"
	"encoding/binary"
	"io"
	"time"

	"github.com/gopacket/gopacket"
)

// ManyConfig describes a capture of many short HTTP-like connections to
// one server, taken next to the clients: each connection is a handshake,
// a request, a four-segment response ending with the server's FIN, and
// the close, 13 packets in all. Zero fields take defaults.
type ManyConfig struct {
	Conns      int           // connections (default 20,000)
	Concurrent int           // connections open at a time (default 250)
	RTT        time.Duration // round-trip time (default 20 ms)
	Snaplen    int           // default 96
	Start      time.Time     // capture start (default 2026-01-01)
}

// Packets per connection of WriteMany.
const ManyPacketsPerConn = 13

// manyStep is one packet of a connection's script.
type manyStep struct {
	rtts     int           // whole RTTs after the SYN
	extra    time.Duration // plus this
	fromSrv  bool
	flags    uint8
	seq, ack uint32 // offsets from the sender's and the receiver's ISN
	n        int
}

const (
	manyReq  = 400
	manyResp = 3*1448 + 600
)

var manyScript = [ManyPacketsPerConn]manyStep{
	{0, 0, false, flagSYN, 0, 0, 0},
	{1, 0, true, flagSYN | flagACK, 0, 1, 0},
	{1, 10 * time.Microsecond, false, flagACK, 1, 1, 0},
	{1, 20 * time.Microsecond, false, flagACK | flagPSH, 1, 1, manyReq},
	{2, 20 * time.Microsecond, true, flagACK, 1, 1 + manyReq, 0},
	{2, 30 * time.Microsecond, true, flagACK, 1, 1 + manyReq, 1448},
	{2, 150 * time.Microsecond, true, flagACK, 1 + 1448, 1 + manyReq, 1448},
	{2, 160 * time.Microsecond, false, flagACK, 1 + manyReq, 1 + 2*1448, 0},
	{2, 270 * time.Microsecond, true, flagACK, 1 + 2*1448, 1 + manyReq, 1448},
	{2, 390 * time.Microsecond, true, flagACK | flagPSH | flagFIN, 1 + 3*1448, 1 + manyReq, 600},
	{2, 400 * time.Microsecond, false, flagACK, 1 + manyReq, 2 + manyResp, 0},
	{2, 420 * time.Microsecond, false, flagACK | flagFIN, 1 + manyReq, 2 + manyResp, 0},
	{3, 420 * time.Microsecond, true, flagACK, 2 + manyResp, 2 + manyReq, 0},
}

type manyEvent struct {
	t    time.Duration
	conn int
	step int
}

func (e manyEvent) order() (time.Duration, int) { return e.t, e.conn }

// WriteMany writes the capture (pcap, nanosecond, Ethernet) to w. The
// connections start at even intervals, so that about Concurrent are open
// at a time; connection i comes from 10.1.x.y:port with a distinct
// address and port, so no 4-tuple is reused.
func WriteMany(w io.Writer, cfg ManyConfig) (Truth, error) {
	if cfg.Conns == 0 {
		cfg.Conns = 20000
	}
	if cfg.Concurrent == 0 {
		cfg.Concurrent = 250
	}
	if cfg.RTT == 0 {
		cfg.RTT = 20 * time.Millisecond
	}
	pw, err := newCapture(w, &cfg.Snaplen, &cfg.Start)
	if err != nil {
		return Truth{}, err
	}
	last := manyScript[ManyPacketsPerConn-1]
	life := time.Duration(last.rtts)*cfg.RTT + last.extra
	every := life / time.Duration(cfg.Concurrent)
	at := func(conn, step int) time.Duration {
		s := manyScript[step]
		return time.Duration(conn)*every + time.Duration(s.rtts)*cfg.RTT + s.extra
	}
	var tr Truth
	q := timeQueue[manyEvent]{}
	next := 0 // next connection to start
	frame := make([]byte, 0, 128)
	for next < cfg.Conns || q.Len() > 0 {
		if next < cfg.Conns && (q.Len() == 0 || at(next, 0) <= q[0].t) {
			heap.Push(&q, manyEvent{at(next, 0), next, 0})
			next++
			continue
		}
		e := heap.Pop(&q).(manyEvent)
		frame = manyFrame(frame[:0], cfg, e)
		wire := len(frame) + manyScript[e.step].n
		capLen := min(wire, cfg.Snaplen)
		for len(frame) < capLen {
			frame = append(frame, 0)
		}
		frame = frame[:capLen]
		if err := pw.WritePacket(gopacket.CaptureInfo{Timestamp: cfg.Start.Add(e.t), CaptureLength: capLen, Length: wire}, frame); err != nil {
			return tr, err
		}
		tr.Packets++
		if manyScript[e.step].n > 0 {
			tr.DataPackets++
		}
		tr.Duration = e.t
		if e.step+1 < ManyPacketsPerConn {
			heap.Push(&q, manyEvent{at(e.conn, e.step+1), e.conn, e.step + 1})
		}
	}
	return tr, nil
}

// manyFrame appends the headers of event e's packet to b.
func manyFrame(b []byte, cfg ManyConfig, e manyEvent) []byte {
	s := manyScript[e.step]
	client := [4]byte{10, 1, byte(e.conn / 50000 >> 8), byte(e.conn / 50000)}
	server := [4]byte{10, 0, 0, 1}
	cport, sport := uint16(10000+e.conn%50000), uint16(80)
	cisn, sisn := uint32(e.conn)*7919, uint32(e.conn)*104729+1<<30
	src, dst, p1, p2, isn, peer := client, server, cport, sport, cisn, sisn
	if s.fromSrv {
		src, dst, p1, p2, isn, peer = server, client, sport, cport, sisn, cisn
	}
	ack := uint32(0)
	if s.flags&flagACK != 0 {
		ack = peer + s.ack
	}
	ms := uint32(e.t / time.Millisecond)
	b = append(b, 2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00)
	var o [20]byte
	opts := o[:0]
	if s.flags&flagSYN != 0 {
		opts = append(opts, 2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 3, 7)
		binary.BigEndian.PutUint32(opts[8:], ms)
	} else {
		opts = append(opts, 1, 1, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0)
		binary.BigEndian.PutUint32(opts[4:], ms)
		binary.BigEndian.PutUint32(opts[8:], ms-uint32(cfg.RTT/time.Millisecond))
	}
	tcpLen := 20 + len(opts)
	ipLen := 20 + tcpLen + s.n
	b = append(b, 0x45, 0, byte(ipLen>>8), byte(ipLen), byte(e.step), byte(e.conn), 0x40, 0, 64, 6, 0, 0)
	b = append(b, src[:]...)
	b = append(b, dst[:]...)
	b = binary.BigEndian.AppendUint16(b, p1)
	b = binary.BigEndian.AppendUint16(b, p2)
	b = binary.BigEndian.AppendUint32(b, isn+s.seq)
	b = binary.BigEndian.AppendUint32(b, ack)
	b = append(b, byte(tcpLen/4)<<4, s.flags)
	b = binary.BigEndian.AppendUint16(b, 502)
	b = append(b, 0, 0, 0, 0)
	return append(b, opts...)
}
