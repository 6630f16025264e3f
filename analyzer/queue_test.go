package analyzer

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer/internal/synth"
)

// TestQueueingDelay runs a transfer whose window is far above the path's
// bandwidth-delay product, so a standing queue builds at the bottleneck,
// and measures it from both ends: next to the sender from Karn samples
// (their spread agrees with tcptrace's RTT min and max), next to the
// receiver from the echo RTT. Both see the same queue, and the diagnosis
// names it.
func TestQueueingDelay(t *testing.T) {
	cfg := synth.Config{Bytes: 8 << 20, Window: 1 << 20, OneWay: 10 * time.Millisecond, Rate: 12.5e6}
	var delay [2]float64
	for i, atSender := range []bool{true, false} {
		cfg.AtSender = atSender
		path, _ := writeSynth(t, cfg)
		res, err := AnalyzeFile(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		d := res.Connections[0].Directions[1]
		want := "karn"
		if !atSender {
			want = "echo"
		}
		if d.QueueRTTSource != want {
			t.Fatalf("at sender %v: queue RTT from %q, want %q", atSender, d.QueueRTTSource, want)
		}
		delay[i] = d.QueueDelayMs
		if atSender {
			tt := tcptraceStats(t, path)
			lo, _ := strconv.ParseFloat(tt["RTT min"][1], 64)
			hi, _ := strconv.ParseFloat(tt["RTT max"][1], 64)
			if d.QueueDelayMs > hi-lo+0.1 || d.QueueDelayMs < 0.5*(hi-lo) {
				t.Errorf("queue delay %.1f ms; tcptrace's RTT spans %.1f..%.1f ms", d.QueueDelayMs, lo, hi)
			}
		}
		found := false
		for _, e := range d.Diagnosis.Evidence {
			found = found || strings.Contains(e, "a queue of") && strings.Contains(e, "bufferbloat")
		}
		if !found {
			t.Errorf("at sender %v: no queueing line in %q", atSender, d.Diagnosis.Evidence)
		}
		t.Logf("at sender %v: queue %.1f ms (median %.1f ms) from %s; limit %s", atSender, d.QueueDelayMs, d.QueueDelayP50Ms, d.QueueRTTSource, d.Diagnosis.Limit)
	}
	// The echo RTT carries up to 1 ms of TSval ticks.
	if math.Abs(delay[0]-delay[1]) > 0.1*delay[0]+1 {
		t.Errorf("queue delay %.1f ms at the sender, %.1f ms at the receiver", delay[0], delay[1])
	}
	if delay[0] < 20 {
		t.Errorf("queue delay %.1f ms: the window should queue ~60 ms", delay[0])
	}
}
