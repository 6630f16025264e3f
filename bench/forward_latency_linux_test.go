package bench

import (
	"testing"
	"time"

	"github.com/wanlab/wanlab/proxy/control"
)

// TestForwardLatencyRows: the proxy_latency rows are the round trip's
// share of the proxy's histograms (the reading after minus the one
// before), per direction, in µs.
func TestForwardLatencyRows(t *testing.T) {
	hist := func(sum time.Duration, maxSample time.Duration, buckets map[int]uint64) control.LatencyHistogram {
		counts := make([]uint64, len(control.LatencyBoundsNs)+1)
		for i, n := range buckets {
			counts[i] = n
		}
		return control.NewLatencyHistogram(counts, sum, maxSample)
	}
	reading := func(written uint64, added control.LatencyHistogram) control.Stats {
		var st control.Stats
		for _, iface := range []string{"veth-s", "veth-c"} {
			st.Directions = append(st.Directions, control.Direction{Iface: iface, Device: control.DeviceCounters{Written: written},
				Latency: &control.Latency{Added: added, ReadToEnqueue: added, DueToDequeue: added, DequeueToWritten: added}})
		}
		return st
	}
	// 10 packets before the round trip (at 1 µs), then 100 more: 90 at
	// 10 µs, 10 at 50 µs.
	before := reading(10, hist(10*time.Microsecond, time.Microsecond, map[int]uint64{0: 10}))
	after := reading(110, hist(10*time.Microsecond+90*10*time.Microsecond+10*50*time.Microsecond, 50*time.Microsecond,
		map[int]uint64{0: 10, 10: 90, 17: 10}))
	if n := forwarded(after) - forwarded(before); n != 200 {
		t.Errorf("forwarded %d, want 200 (both directions)", n)
	}
	got := roundTripLatency(before, after, "veth-s")
	for _, dir := range []string{"to server", "to client"} {
		m := got[dir]
		if m["added p50"] != 10 || m["added p99"] != 50 || m["due to dequeued mean"] != 14 || len(m) != len(roundTripMetrics) {
			t.Errorf("%s: %v, want p50 10, p99 50, means 14", dir, m)
		}
	}
	// An older proxy (no latency) or no packets: no rows.
	old := control.Stats{Directions: []control.Direction{{Iface: "veth-s"}}}
	if got := roundTripLatency(old, old, "veth-s"); len(got) != 0 {
		t.Errorf("without latency: %v", got)
	}
	if got := roundTripLatency(after, after, "veth-s"); len(got) != 0 {
		t.Errorf("nothing between two equal readings: %v", got)
	}
	if st, err := proxyStats(routingPath{}); st != nil || err != nil {
		t.Errorf("routing has no proxy stats: %v, %v", st, err)
	}
	if preciseCPU(routingPath{}, time.Second) != time.Second {
		t.Error("a path without an in-process proxy keeps its own CPU reading")
	}
}
