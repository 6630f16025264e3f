package analyzer

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer/internal/synth"
)

// diagnoseBothEnds analyzes the transfer cfg describes as captured next
// to the receiver and next to the sender, and returns the data
// direction of each.
func diagnoseBothEnds(t *testing.T, cfg synth.Config) (receiver, sender *Direction) {
	t.Helper()
	for _, atSender := range []bool{false, true} {
		cfg.AtSender = atSender
		path, _ := writeSynth(t, cfg)
		res, err := AnalyzeFile(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		d := res.Connections[0].Directions[1]
		if atSender {
			sender = d
		} else {
			receiver = d
		}
	}
	return receiver, sender
}

func evidence(d *Direction) string { return strings.Join(d.Diagnosis.Evidence, "\n") }

// TestDiagnoseMidStream: a lossy transfer captured from the middle (no
// handshake). Next to the receiver the data-to-ACK time is the receiver's
// ACK delay (15 µs); the bound must use the round trip its timestamps
// show (20 ms), and say so.
func TestDiagnoseMidStream(t *testing.T) {
	cfg := synth.Config{Bytes: 16 << 20, Window: 4 << 20, LossRate: 0.01, CaptureFrom: 300 * time.Millisecond}
	rcv, snd := diagnoseBothEnds(t, cfg)
	for _, c := range []struct {
		side   string
		d      *Direction
		source string
	}{{"receiver", rcv, "the receiver's timestamps echoed by new data"}, {"sender", snd, "TCP timestamp echoes"}} {
		d := c.d
		if d.Diagnosis.Limit != LimitLoss {
			t.Errorf("%s: limit %s, want loss\n%s", c.side, d.Diagnosis.Limit, evidence(d))
		}
		ev := evidence(d)
		if !strings.Contains(ev, "min RTT 20.1 ms (from "+c.source+")") || !strings.Contains(ev, "/ (20.") {
			t.Errorf("%s: the bound does not use the 20 ms round trip from %s:\n%s", c.side, c.source, ev)
		}
	}
	if rcv.PathRTTSource != "echo" || rcv.PathRTTMs < 19 || rcv.PathRTTMs > 22 {
		t.Errorf("receiver: path RTT %.3f ms from %q, want about 20 ms from the echo", rcv.PathRTTMs, rcv.PathRTTSource)
	}
}

// TestDiagnoseLossTolerantSender: a sender that does not back off on loss
// (as BBR) with 1.5 % of segments lost. Wherever the capture was taken
// the loss is seen (re-sends near the sender, filled gaps near the
// receiver) and named; nothing claims the transfer was without loss.
func TestDiagnoseLossTolerantSender(t *testing.T) {
	rcv, snd := diagnoseBothEnds(t, synth.Config{Bytes: 16 << 20, Window: 4 << 20, LossRate: 0.015})
	for side, d := range map[string]*Direction{"receiver": rcv, "sender": snd} {
		ev := evidence(d)
		if d.Diagnosis.Limit != LimitLoss || d.LossRate < 0.01 || d.LossRate > 0.025 {
			t.Errorf("%s: limit %s at loss rate %.4f, want loss at about 0.015\n%s", side, d.Diagnosis.Limit, d.LossRate, ev)
		}
		if strings.Contains(ev, "without significant loss") || !strings.Contains(ev, "sent again (p = 1.") {
			t.Errorf("%s: evidence hides the loss:\n%s", side, ev)
		}
	}
}

// TestDiagnoseJitterOnly: a fast path whose only impairment is delay
// jitter (netem's "delay 10ms 5ms", reordering included) and a 512 KiB
// receive window. The window limits; reordered, smoothed arrivals are no
// sign of a saturated bottleneck.
func TestDiagnoseJitterOnly(t *testing.T) {
	cfg := synth.Config{Bytes: 16 << 20, Window: 512 << 10, Rate: 1.25e9, OneWay: 10 * time.Millisecond, Jitter: 5 * time.Millisecond}
	rcv, snd := diagnoseBothEnds(t, cfg)
	for side, d := range map[string]*Direction{"receiver": rcv, "sender": snd} {
		if d.Diagnosis.Limit != LimitReceiveWindow {
			t.Errorf("%s: limit %s, want receive-window\n%s", side, d.Diagnosis.Limit, evidence(d))
		}
	}
}

// TestDiagnoseDuplicateCapture: a capture holding every packet twice (two
// interfaces of one router) gets the diagnosis of one copy: the second
// copies are not retransmissions, and the loss that is there is named.
func TestDiagnoseDuplicateCapture(t *testing.T) {
	frames := synthFrames(t, synth.Config{Bytes: 4 << 20, Window: 2 << 20, LossRate: 0.015})
	var once, twice []ifaceFrame
	for i, f := range frames {
		f.data[18], f.data[19] = byte((i+1)>>8), byte(i+1) // IP ID
		once = append(once, ifaceFrame{f, 0})
		c := memFrame{append([]byte(nil), f.data...), f.wire, f.ts.Add(20 * time.Microsecond)}
		c.data[22]-- // TTL
		twice = append(twice, ifaceFrame{f, 0}, ifaceFrame{c, 1})
	}
	dir := t.TempDir()
	writePcapng(t, dir+"/once.pcapng", once)
	writePcapng(t, dir+"/twice.pcapng", twice)
	r1, err := AnalyzeFile(dir+"/once.pcapng", Options{})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := AnalyzeFile(dir+"/twice.pcapng", Options{})
	if err != nil {
		t.Fatal(err)
	}
	d1, d2 := r1.Connections[0].Directions[1], r2.Connections[0].Directions[1]
	if !reflect.DeepEqual(d1.Diagnosis, d2.Diagnosis) {
		t.Errorf("doubled capture diagnosed differently:\n once %+v\ntwice %+v", d1.Diagnosis, d2.Diagnosis)
	}
	if d2.Diagnosis.Limit != LimitLoss || strings.Contains(evidence(d2), "without significant loss") {
		t.Errorf("doubled capture: limit %s\n%s", d2.Diagnosis.Limit, evidence(d2))
	}
}

// TestEchoesAboveAReorderingsHoles: next to the receiver, a segment
// netem's reorder sent ahead of its 25 ms delay line echoes a round trip
// 25 ms short; those (and the segments sent ahead after them, above the
// same hole) are no round trip, and no queue of 25 ms built. Above a
// loss's hole the echoes are the path's, and a jitter's early segments
// echo its lowest delays.
func TestEchoesAboveAReorderingsHoles(t *testing.T) {
	ahead := map[int]bool{}
	for i := 100; i < 12000; i += 37 {
		ahead[i] = true
		if i%5 == 0 {
			ahead[i+1] = true // a correlated one sent ahead after it
		}
	}
	ms := time.Millisecond
	for _, c := range []struct {
		name     string
		cfg      synth.Config
		min, max float64 // ms: the echo minimum's range
	}{
		{"sent ahead", synth.Config{Bytes: 16 << 20, Window: 4 << 20, Flight: 70 * 1448, OneWay: 25 * ms, Rate: 4e6, SentAhead: ahead}, 49.9, 51},
		{"losses", synth.Config{Bytes: 16 << 20, Window: 4 << 20, Flight: 70 * 1448, OneWay: 25 * ms, Rate: 4e6, LossRate: 0.01}, 49.9, 51},
		{"jitter", synth.Config{Bytes: 4 << 20, Window: 4 << 20, Flight: 60 * 1448, OneWay: 5 * ms, Rate: 12.5e6, Jitter: 4 * ms}, 9.9, 10.3},
	} {
		path, _ := writeSynth(t, c.cfg)
		res, err := AnalyzeFile(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		d := res.Connections[0].Directions[1]
		if d.EchoRTTMinMs < c.min || d.EchoRTTMinMs > c.max || d.EchoRTTSamples < 100 {
			t.Errorf("%s: echo RTT min %.2f ms of %d samples, want %.1f-%.1f ms", c.name, d.EchoRTTMinMs, d.EchoRTTSamples, c.min, c.max)
		}
		if d.Diagnosis.Limit == LimitBandwidth {
			t.Errorf("%s: limit bandwidth with no bottleneck\n%s", c.name, evidence(d))
		}
	}
}

// TestReorderingIsNoSendBuffer: next to the sender, a flight held flat
// with nothing lost is a send buffer, unless the receiver SACKed more
// than its losses explain: data above holes no re-send filled (a
// reordering, whose spurious recoveries hold a congestion window flat as
// well; the grid's reordering path at 50 ms, 1684 SACKs with none
// re-sent).
func TestReorderingIsNoSendBuffer(t *testing.T) {
	c, _ := analyzeSynth(t, synth.Config{Bytes: 16 << 20, Window: 4 << 20, Flight: 70 * 1448, OneWay: 25 * time.Millisecond, Rate: 4e6, AtSender: true})
	d, peer := c.Directions[1], c.Directions[0]
	for _, sacks := range []int{0, 35, 1684} {
		peer.SACKPackets = sacks
		dg := diagnoseDirection("server->client", d, peer, c, DefaultWindowRatio)
		if want := sacks < 70; (dg.Limit == LimitSendBuffer) != want {
			t.Errorf("%d SACKs, none re-sent: limit %s, want send-buffer %v\n%s", sacks, dg.Limit, want, strings.Join(dg.Evidence, "\n"))
		}
	}
}
