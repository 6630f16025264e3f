package analyzer

import (
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer/internal/synth"
)

// serverDir returns the server->client direction of the only connection.
func analyzeSynth(t *testing.T, cfg synth.Config) (*Connection, synth.Truth) {
	t.Helper()
	path, truth := writeSynth(t, cfg)
	res, err := AnalyzeFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Connections) != 1 {
		t.Fatalf("%d connections, want 1", len(res.Connections))
	}
	return res.Connections[0], truth
}

func TestScenarioCounters(t *testing.T) {
	t.Run("loss", func(t *testing.T) {
		c, truth := analyzeSynth(t, synth.Config{Bytes: 2 << 20, Drop: map[int]bool{40: true, 300: true, 900: true}})
		d := c.Directions[1]
		if d.RetransmittedPackets != truth.Retransmissions || d.RetransmittedPackets < 2 {
			t.Errorf("retransmitted %d, truth %d (want >= 2)", d.RetransmittedPackets, truth.Retransmissions)
		}
		if d.FastRetransmissions == 0 {
			t.Errorf("no fast retransmission among %d", d.RetransmittedPackets)
		}
		if d.LostSegments != truth.Retransmissions {
			t.Errorf("lost segments %d, want %d", d.LostSegments, truth.Retransmissions)
		}
		if c.Directions[0].DupAcks != truth.DupAcks || c.Directions[0].TripleDupAcks != truth.Retransmissions {
			t.Errorf("dup acks %d (truth %d), triple %d (want %d)", c.Directions[0].DupAcks, truth.DupAcks, c.Directions[0].TripleDupAcks, truth.Retransmissions)
		}
		if d.UniqueBytes != 2<<20 || d.DataBytes != 2<<20 { // lost first transmissions never reach the capture
			t.Errorf("unique %d data %d", d.UniqueBytes, d.DataBytes)
		}
	})
	t.Run("reorder", func(t *testing.T) {
		c, _ := analyzeSynth(t, synth.Config{Bytes: 1 << 20, Reorder: map[int]bool{30: true, 200: true}})
		d := c.Directions[1]
		if d.OutOfOrderPackets != 2 || d.RetransmittedPackets != 0 {
			t.Errorf("out of order %d retransmitted %d, want 2 and 0", d.OutOfOrderPackets, d.RetransmittedPackets)
		}
		if d.UniqueBytes != 1<<20 {
			t.Errorf("unique bytes %d", d.UniqueBytes)
		}
	})
	t.Run("zerowindow", func(t *testing.T) {
		c, truth := analyzeSynth(t, synth.Config{Bytes: 256 << 10, Window: 64 << 10, ReadRate: 2e5})
		if got := c.Directions[0].ZeroWindows; got == 0 || got != truth.ZeroWindows {
			t.Errorf("zero windows %d, truth %d", got, truth.ZeroWindows)
		}
	})
	t.Run("handshake", func(t *testing.T) {
		c, _ := analyzeSynth(t, synth.Config{Bytes: 100_000})
		if !c.HandshakeSeen || c.Client.Port() != 40000 || c.Server.Port() != 80 {
			t.Errorf("client %v server %v handshake %v", c.Client, c.Server, c.HandshakeSeen)
		}
		d := c.Directions[1]
		if d.MSS != 1460 || d.WindowScale != 7 || !d.SACKPermitted || !d.Timestamps || !d.WindowScaleKnown {
			t.Errorf("SYN options %+v", d.DirectionStats)
		}
		// The client advertised 1 MiB: 8192 << 7.
		if c.Directions[0].MaxWindowBytes != 1<<20 {
			t.Errorf("client max window %d", c.Directions[0].MaxWindowBytes)
		}
	})
}

func TestDiagnoses(t *testing.T) {
	// Seed 001: a 35 ms path whose receiver offers 1.5 MB: rate = window/RTT.
	t.Run("receive-window", func(t *testing.T) {
		c, _ := analyzeSynth(t, synth.Config{Bytes: 40 << 20, Window: 1536 << 10, OneWay: 17500 * time.Microsecond, Rate: 125e6})
		dg := c.Diagnosis
		if dg == nil || dg.Limit != LimitReceiveWindow {
			t.Fatalf("diagnosis %+v", dg)
		}
		// window/RTT = 1.5 MiB / 35 ms = 45 MB/s.
		if r := dg.RateBps / 8; r < 38e6 || r > 47e6 {
			t.Errorf("rate %.1f MB/s, want about 45", r/1e6)
		}
		if dg.PredictedBps <= dg.RateBps*2 {
			t.Errorf("prediction %.0f not above rate %.0f", dg.PredictedBps, dg.RateBps)
		}
		t.Logf("%+v", dg)
	})
	// Seed 000: the sender keeps only a few segments in flight.
	t.Run("send-buffer", func(t *testing.T) {
		c, _ := analyzeSynth(t, synth.Config{Bytes: 4 << 20, Flight: 8 * 1448, OneWay: 5 * time.Millisecond})
		if dg := c.Diagnosis; dg == nil || dg.Limit != LimitSendBuffer {
			t.Fatalf("diagnosis %+v", dg)
		}
	})
	t.Run("delayed-ack", func(t *testing.T) {
		// Odd segment counts per burst: the last one waits for the 40 ms timer.
		c, _ := analyzeSynth(t, synth.Config{Bytes: 3 * 1448, DelayedAck: true, OneWay: time.Millisecond})
		if dg := c.Diagnosis; dg == nil || dg.Limit != LimitDelayedAck {
			t.Fatalf("diagnosis %+v", dg)
		}
	})
	t.Run("loss", func(t *testing.T) {
		drop := map[int]bool{}
		for i := 50; i < 6000; i += 97 {
			drop[i] = true
		}
		c, _ := analyzeSynth(t, synth.Config{Bytes: 8 << 20, Drop: drop, Reno: true})
		if dg := c.Diagnosis; dg == nil || dg.Limit != LimitLoss {
			t.Fatalf("diagnosis %+v", dg)
		}
	})
}

// TestEchoRTTNextToReceiver: next to the receiver, data-to-ACK times are
// only the receiver's delay, but a TSval the receiver sends comes back in
// the data it releases one round trip later, queue included.
func TestEchoRTTNextToReceiver(t *testing.T) {
	c, _ := analyzeSynth(t, synth.Config{Bytes: 4 << 20, OneWay: 10 * time.Millisecond, Window: 256 << 10})
	d := c.Directions[1]
	if d.CapturedNear != "receiver" || d.EchoRTTSamples < 50 || d.EchoRTTMinMs < 19 || d.EchoRTTMinMs > 22 {
		t.Errorf("captured near %s: echo RTT %d samples, min %.3f ms (want about the 20 ms path)", d.CapturedNear, d.EchoRTTSamples, d.EchoRTTMinMs)
	}
	// A 20 Mbit/s bottleneck behind a 4 MB window: the queue shows.
	c, _ = analyzeSynth(t, synth.Config{Bytes: 20 << 20, Window: 4 << 20, Rate: 2.5e6, OneWay: 5 * time.Millisecond})
	d = c.Directions[1]
	if d.EchoRTTP50Ms < 5*d.EchoRTTMinMs {
		t.Errorf("echo RTT min %.1f ms, median %.1f ms: the standing queue should show", d.EchoRTTMinMs, d.EchoRTTP50Ms)
	}
}
