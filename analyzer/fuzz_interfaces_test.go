package analyzer

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer/decode"
)

// FuzzInterfaces drives the merge of interfaces and the duplicate filter:
// every 16 bytes become one segment on one of three interfaces, with an
// IP ID and a time step that may go backwards. The analysis must not
// panic, must analyze or count every frame, and must keep its counters
// consistent.
func FuzzInterfaces(f *testing.F) {
	f.Add([]byte("\x00\x02\x00\x00\x03\xe8\x00\x00\x00\x00\x01\x00\x00\x00\x01\x01" +
		"\x05\x12\x00\x00\x07\xd0\x00\x00\x03\xe9\x01\x00\x00\x00\x02\xff" +
		"\x08\x10\x00\x00\x03\xe9\x00\x00\x07\xd1\x01\x00\x05\xa8\x03\x02"))
	f.Fuzz(func(t *testing.T, in []byte) {
		analyzed := 0
		a := New(Options{MaxPoints: 16, OnPacket: func(*PacketInfo) { analyzed++ }})
		a.ExpectInterfaces(2)
		frame := make([]byte, 40)
		ts := time.Unix(1e9, 0)
		n := 0
		for ; len(in) >= 16; in = in[16:] {
			c := in[:16]
			n++
			ip, tcp := frame[:20], frame[20:]
			ip[0], ip[9] = 0x45, 6
			binary.BigEndian.PutUint16(ip[4:], uint16(c[14])) // IP ID: repeats make duplicates
			src, dst, sp, dp := []byte{10, 0, 0, 2}, []byte{10, 0, 0, 1}, uint16(40000), uint16(80)
			if c[0]&1 != 0 {
				src, dst, sp, dp = dst, src, dp, sp
			}
			copy(ip[12:], src)
			copy(ip[16:], dst)
			binary.BigEndian.PutUint16(tcp[0:], sp)
			binary.BigEndian.PutUint16(tcp[2:], dp)
			copy(tcp[4:12], c[2:10])
			tcp[12], tcp[13] = 5<<4, c[1]
			copy(tcp[14:16], c[10:12])
			payload := int(binary.BigEndian.Uint16(c[12:14])) % 3000
			binary.BigEndian.PutUint16(ip[2:], uint16(40+payload))
			ts = ts.Add(time.Duration(int8(c[15])) * time.Millisecond)
			a.AddFrom(int(c[0]>>1)%3, decode.LinkRaw, frame, 40+payload, ts)
		}
		res := a.Finish()
		if res.Frames != n || analyzed+res.DuplicateFrames != res.TCPPackets {
			t.Fatalf("%d frames, %d TCP: %d analyzed, %d duplicates", res.Frames, res.TCPPackets, analyzed, res.DuplicateFrames)
		}
		for _, conn := range res.Connections {
			for _, d := range conn.Directions {
				if d.DataPackets > d.Packets || d.ResentPackets+d.GapFills > d.DataPackets || d.UniqueBytes < 0 || d.LossRate < 0 || d.LossRate > 1 {
					t.Fatalf("inconsistent counters %+v", d.DirectionStats)
				}
			}
		}
	})
}
