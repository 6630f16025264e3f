package analyzer

import (
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer/internal/synth"
)

// TestDiagnosisAtBothEnds runs each limit's scenario captured next to the
// receiver and next to the sender: the verdict must not depend on where
// tcpdump ran.
func TestDiagnosisAtBothEnds(t *testing.T) {
	drop := map[int]bool{}
	for i := 50; i < 6000; i += 97 {
		drop[i] = true
	}
	for _, sc := range []struct {
		want string
		cfg  synth.Config
	}{
		// Seed 001: 1.5 MB window, 35 ms: 43 MB/s.
		{LimitReceiveWindow, synth.Config{Bytes: 40 << 20, Window: 1536 << 10, OneWay: 17500 * time.Microsecond, Rate: 125e6}},
		// Seed 000: a pinned send buffer keeps 8 segments in flight.
		{LimitSendBuffer, synth.Config{Bytes: 4 << 20, Flight: 8 * 1448, OneWay: 5 * time.Millisecond}},
		{LimitLoss, synth.Config{Bytes: 8 << 20, Drop: drop, Reno: true}},
		// A 20 Mbit/s bottleneck with a 4 MB window: a standing queue.
		{LimitBandwidth, synth.Config{Bytes: 20 << 20, Window: 4 << 20, Rate: 2.5e6, OneWay: 5 * time.Millisecond}},
		// Seed 003: the last odd segment waits for the 40 ms timer.
		{LimitDelayedAck, synth.Config{Bytes: 3 * 1448, DelayedAck: true, OneWay: time.Millisecond}},
		// A receiver that reads 200 kB/s: zero windows.
		{LimitApplication, synth.Config{Bytes: 1 << 20, Window: 64 << 10, ReadRate: 2e5}},
	} {
		for _, at := range []bool{false, true} {
			cfg := sc.cfg
			cfg.AtSender = at
			c, _ := analyzeSynth(t, cfg)
			if dg := c.Diagnosis; dg == nil || dg.Limit != sc.want {
				t.Errorf("%s, captured at the sender %v: diagnosis %+v", sc.want, at, dg)
			}
		}
	}
}

// TestSendBufferNeedsNoLossNearTheReceiver: near the receiver the flight
// is the rate over a round trip, which a congestion window held down by
// losses gives as well as a send buffer; with segments lost the verdict
// there is not the send buffer, while next to the sender, where the
// flight is seen flat, it still is.
func TestSendBufferNeedsNoLossNearTheReceiver(t *testing.T) {
	cfg := synth.Config{Bytes: 4 << 20, Flight: 8 * 1448, OneWay: 5 * time.Millisecond, Drop: map[int]bool{700: true, 2100: true}}
	for _, at := range []bool{false, true} {
		cfg.AtSender = at
		c, _ := analyzeSynth(t, cfg)
		d := c.Directions[1]
		if d.GapFills+d.ResentPackets == 0 || d.LossRate >= lossMinRate {
			t.Fatalf("at the sender %v: %d gap fills, %d re-sent, loss rate %.4f: want a few segments lost, under %.1f %%", at, d.GapFills, d.ResentPackets, d.LossRate, lossMinRate*100)
		}
		dg := c.Diagnosis
		if dg == nil {
			t.Fatalf("at the sender %v: no diagnosis", at)
		}
		if at && dg.Limit != LimitSendBuffer {
			t.Errorf("at the sender: limit %q, want %q (the flight is seen flat): %v", dg.Limit, LimitSendBuffer, dg.Evidence)
		}
		if !at && (dg.Limit == LimitSendBuffer || !strings.Contains(strings.Join(dg.Evidence, " "), "sent again: a congestion window")) {
			t.Errorf("near the receiver: limit %q, evidence %v: want no send buffer, and why", dg.Limit, dg.Evidence)
		}
	}
}
