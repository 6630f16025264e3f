package analyzer

import (
	"encoding/binary"
	"testing"
	"time"
)

// tsOpt is a TCP timestamp option (with two NOPs: 12 bytes).
func tsOpt(val, ecr uint32) []byte {
	b := []byte{1, 1, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[4:], val)
	binary.BigEndian.PutUint32(b[8:], ecr)
	return b
}

// TestPlacementWithASlowHandshake: the handshake took 300 ms (a SYN
// queued behind load) while the data's round trip is 20 ms. The capture
// is placed by the data's two legs seen from it, data to ACK and ACK to
// the data echoing it: near the sender the first is the round trip and
// the second the sender's reaction, near the receiver the other way
// round. Against the handshake, a capture next to the sender looked like
// one next to the receiver (20 ms is under half of 300).
func TestPlacementWithASlowHandshake(t *testing.T) {
	const (
		S, SA, A = 0x02, 0x12, 0x10
		ms       = time.Millisecond
		us       = time.Microsecond
		rounds   = 30
	)
	for _, c := range []struct {
		name     string
		near     string // the capture's end: the server (the sender) or the client
		wantNear string
		wantPath float64 // ms
	}{
		{"at the sender", "server", "sender", 20.1},
		{"at the receiver", "client", "receiver", 20.1},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Near the server its packets leave 0.1 ms after what they
			// answer and the client's come 20 ms after; near the client
			// the other way round.
			local, remote := 100*us, 20*ms
			if c.near == "client" {
				local, remote = remote, local
			}
			synackGap, ackGap := 100*us, 300*ms
			if c.near == "client" {
				synackGap, ackGap = 300*ms, 100*us
			}
			segs := []seg{
				{false, S, 100, 0, 65535, 0, 0, tsOpt(1, 0)},
				{true, SA, 5000, 101, 65535, 0, synackGap, tsOpt(2, 1)},
				{false, A, 101, 5001, 65535, 0, ackGap, tsOpt(3, 2)},
			}
			seq, cts := uint32(5001), uint32(3)
			for i := range uint32(rounds) {
				sts := 100 + i
				segs = append(segs,
					seg{true, A, seq, 101, 65535, 1000, local, tsOpt(sts, cts)},
					seg{true, A, seq + 1000, 101, 65535, 1000, 10 * us, tsOpt(sts, cts)})
				seq += 2000
				cts = 1000 + i
				segs = append(segs, seg{false, A, 101, seq, 65535, 0, remote, tsOpt(cts, sts)})
			}
			res, err := AnalyzeFile(writeScript(t, segs), Options{})
			if err != nil {
				t.Fatal(err)
			}
			d := res.Connections[0].Directions[1] // the server's data
			if d.CapturedNear != c.wantNear {
				t.Errorf("captured near %q, want %q (Karn min %.2f ms, echo min %.2f ms)", d.CapturedNear, c.wantNear, d.RTTMinMs, d.EchoRTTMinMs)
			}
			if d.PathRTTMs < c.wantPath-0.5 || d.PathRTTMs > c.wantPath+0.5 {
				t.Errorf("path RTT %.2f ms (%s), want about %.1f: the data's, not the handshake's 300", d.PathRTTMs, d.PathRTTSource, c.wantPath)
			}
		})
	}
}
