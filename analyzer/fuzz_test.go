package analyzer

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer/decode"
)

// FuzzAnalyzer drives the TCP state machine with arbitrary segment streams:
// every 16 bytes of input become one raw-IPv4 TCP segment (direction,
// flags, sequence, ACK, window, payload length, SACK block, time step).
// Whatever the order, the analysis must not panic and must keep its
// counters consistent.
func FuzzAnalyzer(f *testing.F) {
	f.Add([]byte("\x00\x02\x00\x00\x03\xe8\x00\x00\x00\x00\x01\x00\x00\x00\x00\x01" +
		"\x01\x12\x00\x00\x07\xd0\x00\x00\x03\xe9\x01\x00\x00\x00\x00\x01" +
		"\x00\x10\x00\x00\x03\xe9\x00\x00\x07\xd1\x01\x00\x05\xa8\x00\x01"))
	f.Fuzz(fuzzAnalyzer)
}

func fuzzAnalyzer(t *testing.T, in []byte) {
	{
		a := New(Options{MaxPoints: 16})
		frame := make([]byte, 20+32)
		ts := time.Unix(1e9, 0)
		for len(in) >= 16 {
			c := in[:16]
			in = in[16:]
			fromClient := c[0]&1 == 0
			ip := frame[:20]
			ip[0] = 0x45
			ip[9] = 6
			src, dst := []byte{10, 0, 0, 2}, []byte{10, 0, 0, 1}
			sp, dp := uint16(40000), uint16(80)
			if !fromClient {
				src, dst, sp, dp = dst, src, dp, sp
			}
			copy(ip[12:], src)
			copy(ip[16:], dst)
			tcp := frame[20:]
			binary.BigEndian.PutUint16(tcp[0:], sp)
			binary.BigEndian.PutUint16(tcp[2:], dp)
			copy(tcp[4:12], c[2:10]) // seq, ack
			tcp[13] = c[1]
			copy(tcp[14:16], c[10:12])
			hdr := 20
			if c[0]&2 != 0 { // a SACK block relative to the ACK
				hdr = 32
				copy(tcp[20:], []byte{1, 1, 5, 10})
				ack := binary.BigEndian.Uint32(c[6:10])
				binary.BigEndian.PutUint32(tcp[24:], ack+uint32(c[14])*100)
				binary.BigEndian.PutUint32(tcp[28:], ack+uint32(c[14])*100+1448)
			}
			tcp[12] = byte(hdr/4) << 4
			payload := int(binary.BigEndian.Uint16(c[12:14])) % 3000
			binary.BigEndian.PutUint16(ip[2:], uint16(20+hdr+payload))
			ts = ts.Add(time.Duration(int8(c[15])) * time.Millisecond) // may go backwards
			a.Add(decode.LinkRaw, frame[:20+hdr], 20+hdr+payload, ts)
		}
		res := a.Finish()
		for _, conn := range res.Connections {
			for _, d := range conn.Directions {
				if d.DataPackets > d.Packets || d.RetransmittedPackets > d.DataPackets+d.Packets || d.UniqueBytes < 0 {
					t.Fatalf("inconsistent counters %+v", d.DirectionStats)
				}
			}
		}
	}
}
