package analyzer

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/wanlab/wanlab/analyzer/internal/synth"
	"github.com/wanlab/wanlab/analyzer/pcapfile"
)

// rewrite copies the frames of the synthetic captures in order into one
// pcap, keeping those keep accepts (i counts frames across inputs).
func rewrite(t *testing.T, keep func(i int) bool, cfgs ...synth.Config) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rewritten.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriterNanos(f)
	w.WriteFileHeader(96, layers.LinkTypeEthernet)
	i := 0
	for _, cfg := range cfgs {
		var buf bytes.Buffer
		if _, err := synth.Write(&buf, cfg); err != nil {
			t.Fatal(err)
		}
		r, err := pcapfile.NewReader(&buf, "synth")
		if err != nil {
			t.Fatal(err)
		}
		for {
			fr, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if keep(i) {
				w.WritePacket(gopacket.CaptureInfo{Timestamp: fr.Timestamp, CaptureLength: len(fr.Data), Length: fr.WireLen}, fr.Data)
			}
			i++
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestMidStreamCapture(t *testing.T) {
	// The capture starts 40 frames into the transfer: no handshake.
	path := rewrite(t, func(i int) bool { return i >= 40 }, synth.Config{Bytes: 1 << 20, AtSender: true})
	res, err := AnalyzeFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Connections) != 1 {
		t.Fatalf("%d connections", len(res.Connections))
	}
	c := res.Connections[0]
	if c.HandshakeSeen || c.Server.Port() != 80 || c.Client.Port() != 40000 {
		t.Errorf("handshake %v, client %v, server %v: the low port should be the server", c.HandshakeSeen, c.Client, c.Server)
	}
	d := c.Directions[1]
	if d.WindowScaleKnown || d.RetransmittedPackets != 0 || d.DataPackets == 0 || d.RTTSamples == 0 {
		t.Errorf("mid-stream stats %+v", d.DirectionStats)
	}
	if dg := c.Diagnosis; dg == nil || dg.Limit == LimitReceiveWindow || dg.Limit == LimitSendBuffer {
		t.Errorf("mid-stream diagnosis %+v: window limits need the window scale", dg)
	}
	if a := agreement(t, path); a < 0.99 {
		t.Errorf("agreement %.4f", a)
	}
}

func TestPortReuseStartsNewConnection(t *testing.T) {
	first := synth.Config{Bytes: 100_000}
	second := synth.Config{Bytes: 200_000, ClientISN: 7_000_000, Start: time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC)}
	path := rewrite(t, func(int) bool { return true }, first, second)
	res, err := AnalyzeFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Connections) != 2 {
		t.Fatalf("%d connections, want 2 (same 4-tuple, new SYN)", len(res.Connections))
	}
	if a, b := res.Connections[0].Directions[1].UniqueBytes, res.Connections[1].Directions[1].UniqueBytes; a != 100_000 || b != 200_000 {
		t.Errorf("unique bytes %d and %d", a, b)
	}
	// A long idle period also splits, a retransmitted SYN does not.
	res2, _ := AnalyzeFile(path, Options{IdleTimeout: time.Second})
	if len(res2.Connections) != 2 {
		t.Errorf("%d connections with a 1 s idle timeout", len(res2.Connections))
	}
}
