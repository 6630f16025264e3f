package main

import (
	"bufio"
	"encoding/binary"
	"os"
	"testing"
	"time"
)

// craftedPcap writes a classic pcap (nanosecond, raw IPv4) of TCP packets
// built without gopacket, fast enough for the hundreds of thousands of
// connections of the budget tests.
type craftedPcap struct {
	f *os.File
	w *bufio.Writer
	t *testing.T
}

func newCraftedPcap(t *testing.T, path string) *craftedPcap {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var h [24]byte
	binary.LittleEndian.PutUint32(h[0:], 0xA1B23C4D) // nanosecond pcap
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], 65535)
	binary.LittleEndian.PutUint32(h[20:], 101) // raw IP
	w.Write(h[:])
	return &craftedPcap{f: f, w: w, t: t}
}

// TCP flags.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpACK = 0x10
)

// tcpEnd is one end of a crafted connection.
type tcpEnd struct {
	ip   [4]byte
	port uint16
}

// packet writes one IPv4/TCP packet from src to dst at ts (since the
// Unix epoch), with payload bytes of zeros (not captured beyond 64 bytes:
// the wire length says how many there were).
func (c *craftedPcap) packet(ts time.Duration, src, dst tcpEnd, seq, ack uint32, flags uint8, payload int) {
	var p [40]byte
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(40+payload))
	p[8], p[9] = 64, 6
	copy(p[12:16], src.ip[:])
	copy(p[16:20], dst.ip[:])
	binary.BigEndian.PutUint16(p[20:], src.port)
	binary.BigEndian.PutUint16(p[22:], dst.port)
	binary.BigEndian.PutUint32(p[24:], seq)
	binary.BigEndian.PutUint32(p[28:], ack)
	p[32] = 5 << 4
	p[33] = flags
	binary.BigEndian.PutUint16(p[34:], 65535)
	var r [16]byte
	binary.LittleEndian.PutUint32(r[0:], uint32(ts/time.Second))
	binary.LittleEndian.PutUint32(r[4:], uint32(ts%time.Second))
	binary.LittleEndian.PutUint32(r[8:], 40)
	binary.LittleEndian.PutUint32(r[12:], uint32(40+payload))
	c.w.Write(r[:])
	c.w.Write(p[:])
}

func (c *craftedPcap) close() {
	c.t.Helper()
	if err := c.w.Flush(); err != nil {
		c.t.Fatal(err)
	}
	if err := c.f.Close(); err != nil {
		c.t.Fatal(err)
	}
}

// craftedEpoch is when crafted captures start (2026-01-01).
const craftedEpoch = 1767225600 * time.Second

// manyConnections writes n short downloads to one server port, all open
// at once: each a handshake, one data segment and its ACK, and no FIN,
// 5 µs between packets (a second per 40,000 connections). What --like's
// concurrency and the analysis's per-connection budget are tested with.
func manyConnections(t *testing.T, path string, n int) {
	c := newCraftedPcap(t, path)
	server := tcpEnd{[4]byte{10, 0, 0, 2}, 80}
	at := craftedEpoch
	next := func() time.Duration { at += 5 * time.Microsecond; return at }
	for i := range n {
		client := tcpEnd{[4]byte{10, 1, byte(i >> 16), byte(i >> 8)}, uint16(1024 + i%60000)}
		c.packet(next(), client, server, 1000, 0, tcpSYN, 0)
		c.packet(next(), server, client, 5000, 1001, tcpSYN|tcpACK, 0)
		c.packet(next(), client, server, 1001, 5001, tcpACK, 0)
		c.packet(next(), server, client, 5001, 1001, tcpACK, 1000+i%400)
		c.packet(next(), client, server, 1001, uint32(6001+i%400), tcpACK, 0)
	}
	c.close()
}

// spanYears writes a download of n segments spread over years, each
// acknowledged a longer while after it was sent than the last (a queue
// that builds smoothly): a capture of a few kilobytes whose time span,
// not its packets, once set what the fit's rate walk cost (250 packets:
// 4.3 GB).
func spanYears(t *testing.T, path string, n int) {
	const day = 24 * time.Hour
	spanRTT(t, path, n, 5*day, 6*time.Hour, 40*day) // 250 segments: 27 years
}

// spanRTT writes a download of n segments gap apart, segment i ACKed a
// round trip of rtt + i*grow later, with a handshake of rtt: every RTT
// sample is that long, and so is the reach of each queue sample.
func spanRTT(t *testing.T, path string, n int, rtt, grow, gap time.Duration) {
	c := newCraftedPcap(t, path)
	client, server := tcpEnd{[4]byte{10, 0, 0, 1}, 40000}, tcpEnd{[4]byte{10, 0, 0, 2}, 80}
	at := craftedEpoch
	c.packet(at, client, server, 1000, 0, tcpSYN, 0)
	c.packet(at+rtt/2, server, client, 5000, 1001, tcpSYN|tcpACK, 0)
	c.packet(at+rtt, client, server, 1001, 5001, tcpACK, 0)
	at += rtt
	for i := range n {
		seq := uint32(5001 + 1000*i)
		c.packet(at, server, client, seq, 1001, tcpACK, 1000)
		c.packet(at+rtt+time.Duration(i)*grow, client, server, 1001, seq+1000, tcpACK, 0)
		at += gap
	}
	c.close()
}

// longConnection writes one download of n segments at 100 Mbit/s (120 µs
// apart), an ACK every second one a 20 ms round trip later: the
// per-connection packet budget's test.
func longConnection(t *testing.T, path string, n int) {
	c := newCraftedPcap(t, path)
	client, server := tcpEnd{[4]byte{10, 0, 0, 1}, 40000}, tcpEnd{[4]byte{10, 0, 0, 2}, 80}
	ms := time.Millisecond
	at := craftedEpoch
	c.packet(at, client, server, 1000, 0, tcpSYN, 0)
	c.packet(at+10*ms, server, client, 5000, 1001, tcpSYN|tcpACK, 0)
	c.packet(at+20*ms, client, server, 1001, 5001, tcpACK, 0)
	at += 21 * ms
	// ACKs are due 20 ms after their segment: written in time order,
	// between the segments sent meanwhile.
	type due struct {
		t   time.Duration
		ack uint32
	}
	var acks []due
	for i := range n {
		for len(acks) > 0 && acks[0].t <= at {
			c.packet(acks[0].t, client, server, 1001, acks[0].ack, tcpACK, 0)
			acks = acks[1:]
		}
		seq := uint32(5001 + 1448*i)
		c.packet(at, server, client, seq, 1001, tcpACK, 1448)
		if i%2 == 1 {
			acks = append(acks, due{at + 20*ms, seq + 1448})
		}
		at += 120 * time.Microsecond
	}
	for _, a := range acks {
		c.packet(a.t, client, server, 1001, a.ack, tcpACK, 0)
	}
	c.close()
}
