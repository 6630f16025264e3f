package analyzer

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// seg is one scripted segment: from the client or the server, with raw
// TCP fields; dt is the time since the previous segment.
type seg struct {
	fromServer bool
	flags      uint8
	seq, ack   uint32
	win        uint16
	n          int
	dt         time.Duration
	opts       []byte // TCP options, a multiple of 4 bytes
}

// writeScript writes the segments as a raw-IPv4 pcap (no options, so no
// window scaling).
func writeScript(t *testing.T, segs []seg) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "script.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriterNanos(f)
	w.WriteFileHeader(96, layers.LinkTypeRaw)
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, s := range segs {
		ts = ts.Add(s.dt)
		hl := 20 + len(s.opts)
		b := make([]byte, 20+hl)
		b[0], b[8], b[9] = 0x45, 64, 6
		binary.BigEndian.PutUint16(b[2:], uint16(20+hl+s.n))
		copy(b[40:], s.opts)
		c, sv := []byte{10, 0, 0, 2}, []byte{10, 0, 0, 1}
		sp, dp := uint16(40000), uint16(80)
		if s.fromServer {
			c, sv, sp, dp = sv, c, dp, sp
		}
		copy(b[12:], c)
		copy(b[16:], sv)
		binary.BigEndian.PutUint16(b[20:], sp)
		binary.BigEndian.PutUint16(b[22:], dp)
		binary.BigEndian.PutUint32(b[24:], s.seq)
		binary.BigEndian.PutUint32(b[28:], s.ack)
		b[32], b[33] = byte(hl/4)<<4, s.flags
		binary.BigEndian.PutUint16(b[34:], s.win)
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(b), Length: len(b) + s.n}, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestScriptedFlags covers the rarer Wireshark flags: zero window, zero
// window probe and its ACK, window update, keep-alive and its ACK, window
// full, duplicate ACKs and a spurious retransmission.
func TestScriptedFlags(t *testing.T) {
	const (
		S, SA, A = 0x02, 0x12, 0x10
		ms       = time.Millisecond
	)
	path := writeScript(t, []seg{
		{false, S, 100, 0, 65535, 0, 0, nil},
		{true, SA, 5000, 101, 65535, 0, 10 * ms, nil},
		{false, A, 101, 5001, 2000, 0, 10 * ms, nil},
		{true, A, 5001, 101, 65535, 1000, ms, nil},    // data
		{true, A, 6001, 101, 65535, 1000, 0, nil},     // data up to the 2000-byte window: window full
		{false, A, 101, 7001, 0, 0, 10 * ms, nil},     // zero window
		{true, A, 7001, 101, 65535, 1, 200 * ms, nil}, // zero-window probe
		{false, A, 101, 7001, 0, 0, 10 * ms, nil},     // zero-window probe ACK
		{false, A, 101, 7001, 3000, 0, 50 * ms, nil},  // window update
		{true, A, 7001, 101, 65535, 500, ms, nil},
		{false, A, 101, 7501, 3000, 0, 10 * ms, nil},
		{true, A, 7500, 101, 65535, 0, 5000 * ms, nil}, // keep-alive
		{false, A, 101, 7501, 3000, 0, 10 * ms, nil},   // keep-alive ACK
		{true, A, 7501, 101, 65535, 100, ms, nil},
		{true, A, 7601, 101, 65535, 100, ms, nil},
		{false, A, 101, 7501, 3000, 0, 9 * ms, nil}, // duplicate ACKs
		{false, A, 101, 7501, 3000, 0, ms, nil},
		{false, A, 101, 7701, 3000, 0, ms, nil},
		{true, A, 7501, 101, 65535, 100, 300 * ms, nil}, // spurious retransmission
	})
	seen := PacketFlags(0)
	ours, _ := ourVerdicts(t, path)
	for _, v := range ours {
		seen |= v.flags
	}
	for _, f := range []PacketFlags{ZeroWindow, ZeroWindowProbe, ZeroWindowProbeAck, WindowUpdate, KeepAlive, KeepAliveAck, WindowFull, DupAck, SpuriousRetransmission} {
		if seen&f == 0 {
			t.Errorf("no packet flagged %v", f)
		}
	}
	if a := agreement(t, path); a != 1 {
		t.Errorf("agreement with tshark %.4f, want all %d frames", a, len(ours))
	}
}

// TestWindowScaleNeedsBothSYNs: RFC 7323 2.2 as Linux applies it: a shift
// counts only if both SYNs offered one, and never applies to the SYNs'
// own window fields.
func TestWindowScaleNeedsBothSYNs(t *testing.T) {
	ws := func(shift byte) []byte { return []byte{1, 3, 3, shift} }
	for _, c := range []struct {
		name           string
		clientSYN      []byte
		serverSYN      []byte
		wantClientMax  int64
		wantServerMax  int64
		wantScaleKnown bool
	}{
		{"both", ws(7), ws(2), 1000 << 7, 3000 << 2, true},
		{"client only", ws(7), nil, 1000, 3000, true},
		{"server only", nil, ws(2), 1000, 3000, true},
	} {
		path := writeScript(t, []seg{
			{false, 0x02, 100, 0, 20000, 0, 0, c.clientSYN},
			{true, 0x12, 5000, 101, 30000, 0, time.Millisecond, c.serverSYN},
			{false, 0x10, 101, 5001, 1000, 0, time.Millisecond, nil},
			{true, 0x10, 5001, 101, 3000, 100, time.Millisecond, nil},
		})
		res, err := AnalyzeFile(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		cl, sv := res.Connections[0].Directions[0], res.Connections[0].Directions[1]
		// The SYNs' own windows (20000, 30000) are left out of the maxima,
		// as in tcptrace's "max win adv"; the later windows show the shift.
		if cl.MaxWindowBytes != c.wantClientMax || sv.MaxWindowBytes != c.wantServerMax || cl.WindowScaleKnown != c.wantScaleKnown {
			t.Errorf("%s: client max window %d (want %d), server %d (want %d), known %v", c.name,
				cl.MaxWindowBytes, c.wantClientMax, sv.MaxWindowBytes, c.wantServerMax, cl.WindowScaleKnown)
		}
	}
}
