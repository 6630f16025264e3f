package metrics

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/wanlab/wanlab/proxy/control"
	"github.com/wanlab/wanlab/proxy/tap"
	"github.com/wanlab/wanlab/tc/engine"
)

func sample() control.Stats {
	var soj engine.Histogram
	soj.Counts[10] = 5                          // (10ms, 25ms]
	soj.Counts[12] = 980                        // (50ms, 100ms]
	soj.Counts[len(engine.SojournBoundsNs)] = 5 // above 10s
	soj.SumNs = 50e9
	soj.Count = 990
	a := engine.Counters{
		PacketsIn: 1000, BytesIn: 1500000, PacketsOut: 990, BytesOut: 1485000,
		Drops:     engine.Drops{Loss: 10, Queue: 0, Oversize: 1},
		ECNMarked: 1, Duplicated: 2, Corrupted: 3, Reordered: 4,
		QueuePackets: 5, QueueBytes: 7500, Sojourn: soj,
	}
	return control.Stats{
		Directions: []control.Direction{
			{
				Iface: "veth-a",
				Spec:  "delay 50ms loss 1%",
				Engine: engine.Snapshot{Direction: "veth-a", Totals: a, Swaps: 2,
					Classes: []engine.ClassSnapshot{{Name: "default", Spec: "delay 50ms loss 1%", Totals: a}}},
				Device:  control.DeviceCounters{Malformed: 6, ReadErrors: 7, WriteErrors: 8, Written: 9800, Late1ms: 12},
				Latency: sampleLatency(),
			},
			// A snapshot without classes reports its totals as "default".
			{Iface: "veth-b", Engine: engine.Snapshot{Totals: engine.Counters{BytesIn: 64}}},
		},
		Tap: &tap.Stats{Records: 1990, Bytes: 123456, RingFull: 9, OverLimit: 0},
	}
}

// sampleLatency has 90 packets added 8 µs or less (bucket 9) and 10 in
// (40 µs, 50 µs] (bucket 17); 3 above 100 ms in dequeue_to_written.
func sampleLatency() *control.Latency {
	counts := func(at map[int]uint64) []uint64 {
		c := make([]uint64, len(control.LatencyBoundsNs)+1)
		for i, n := range at {
			c[i] = n
		}
		return c
	}
	return &control.Latency{
		BoundsNs:         control.LatencyBoundsNs[:],
		Added:            control.NewLatencyHistogram(counts(map[int]uint64{9: 90, 17: 10}), 1200*time.Microsecond, 45*time.Microsecond),
		ReadToEnqueue:    control.NewLatencyHistogram(counts(map[int]uint64{0: 100}), 20*time.Microsecond, time.Microsecond),
		DueToDequeue:     control.NewLatencyHistogram(counts(map[int]uint64{0: 100}), 30*time.Microsecond, time.Microsecond),
		DequeueToWritten: control.NewLatencyHistogram(counts(map[int]uint64{9: 97, len(control.LatencyBoundsNs): 3}), 400*time.Millisecond, 200*time.Millisecond),
	}
}

func TestCollectorLatency(t *testing.T) {
	c := NewCollector(sample)
	got := map[string]map[string]string{} // step -> le -> count
	sums := map[string]string{}
	text, err := testutil.CollectAndFormat(c, expfmt.TypeTextPlain, "wanlab_proxy_latency_seconds")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(text), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || !strings.HasPrefix(f[0], "wanlab_proxy_latency_seconds") {
			continue
		}
		if !strings.Contains(f[0], `iface="veth-a"`) {
			t.Errorf("latency series of a direction without latency: %s", line)
			continue
		}
		step := f[0][strings.Index(f[0], `step="`)+6:]
		step = step[:strings.IndexByte(step, '"')]
		switch {
		case strings.HasPrefix(f[0], "wanlab_proxy_latency_seconds_bucket"):
			le := f[0][strings.Index(f[0], `le="`)+4:]
			le = le[:strings.IndexByte(le, '"')]
			if got[step] == nil {
				got[step] = map[string]string{}
			}
			got[step][le] = f[1]
		case strings.HasPrefix(f[0], "wanlab_proxy_latency_seconds_sum"):
			sums[step] = f[1]
		}
	}
	for step, want := range map[string]map[string]string{
		"added":              {"1e-06": "0", "8e-06": "90", "4e-05": "90", "5e-05": "100", "0.1": "100", "+Inf": "100"},
		"read_to_enqueue":    {"1e-06": "100", "+Inf": "100"},
		"due_to_dequeue":     {"1e-06": "100", "+Inf": "100"},
		"dequeue_to_written": {"8e-06": "97", "0.1": "97", "+Inf": "100"},
	} {
		for le, n := range want {
			if got[step][le] != n {
				t.Errorf("%s le=%s: %q, want %s", step, le, got[step][le], n)
			}
		}
		if len(got[step]) != len(control.LatencyBoundsNs)+1 {
			t.Errorf("%s: %d buckets, want %d", step, len(got[step]), len(control.LatencyBoundsNs)+1)
		}
	}
	if sums["added"] != "0.0012" || sums["dequeue_to_written"] != "0.4" {
		t.Errorf("sums %v", sums)
	}
}

const want = `
# HELP wanlab_proxy_bytes_in_total IP bytes that entered the impairment engine.
# TYPE wanlab_proxy_bytes_in_total counter
wanlab_proxy_bytes_in_total{class="default",iface="veth-a"} 1.5e+06
wanlab_proxy_bytes_in_total{class="default",iface="veth-b"} 64
# HELP wanlab_proxy_drops_total Packets dropped by the engine, by reason (loss: netem loss model; queue: a queue limit; oversize: larger than tbf's bucket).
# TYPE wanlab_proxy_drops_total counter
wanlab_proxy_drops_total{class="default",iface="veth-a",reason="loss"} 10
wanlab_proxy_drops_total{class="default",iface="veth-a",reason="oversize"} 1
wanlab_proxy_drops_total{class="default",iface="veth-a",reason="queue"} 0
wanlab_proxy_drops_total{class="default",iface="veth-b",reason="loss"} 0
wanlab_proxy_drops_total{class="default",iface="veth-b",reason="oversize"} 0
wanlab_proxy_drops_total{class="default",iface="veth-b",reason="queue"} 0
# HELP wanlab_proxy_queue_bytes IP bytes held by the engine now.
# TYPE wanlab_proxy_queue_bytes gauge
wanlab_proxy_queue_bytes{class="default",iface="veth-a"} 7500
wanlab_proxy_queue_bytes{class="default",iface="veth-b"} 0
# HELP wanlab_proxy_spec_swaps_total Spec replacements applied at runtime.
# TYPE wanlab_proxy_spec_swaps_total counter
wanlab_proxy_spec_swaps_total{iface="veth-a"} 2
wanlab_proxy_spec_swaps_total{iface="veth-b"} 0
# HELP wanlab_proxy_device_malformed_total Truncated or malformed IP packets read from the TUN and dropped.
# TYPE wanlab_proxy_device_malformed_total counter
wanlab_proxy_device_malformed_total{iface="veth-a"} 6
wanlab_proxy_device_malformed_total{iface="veth-b"} 0
# HELP wanlab_proxy_device_late_1ms_total Packets written 1 ms or more after the departure time the engine gave them.
# TYPE wanlab_proxy_device_late_1ms_total counter
wanlab_proxy_device_late_1ms_total{iface="veth-a"} 12
wanlab_proxy_device_late_1ms_total{iface="veth-b"} 0
# HELP wanlab_proxy_tap_lost_total Tap records not written, by reason (ring_full: the writer fell behind; over_limit: the size limit was reached).
# TYPE wanlab_proxy_tap_lost_total counter
wanlab_proxy_tap_lost_total{reason="over_limit"} 0
wanlab_proxy_tap_lost_total{reason="ring_full"} 9
`

// wantSojourn is veth-a's histogram, cumulative, in seconds.
var wantSojourn = map[string]string{
	"0.01": "0", "0.025": "5", "0.05": "5", "0.1": "985", "10": "985", "+Inf": "990",
}

func TestCollector(t *testing.T) {
	c := NewCollector(sample)
	err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"wanlab_proxy_bytes_in_total", "wanlab_proxy_drops_total", "wanlab_proxy_queue_bytes",
		"wanlab_proxy_spec_swaps_total", "wanlab_proxy_device_malformed_total", "wanlab_proxy_device_late_1ms_total", "wanlab_proxy_tap_lost_total")
	if err != nil {
		t.Fatal(err)
	}
	// Per direction: 10 single-valued class families + 3 drop reasons + 1
	// histogram + 6 direction families; plus 4 tap series and veth-a's 4
	// latency histograms.
	if n := testutil.CollectAndCount(c); n != 2*(10+3+1+6)+4+4 {
		t.Errorf("collected %d series", n)
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestCollectorReadsAtScrapeTime(t *testing.T) {
	var n atomic.Uint64
	src := func() control.Stats {
		return control.Stats{Directions: []control.Direction{{Iface: "x", Engine: engine.Snapshot{
			Classes: []engine.ClassSnapshot{{Name: "default", Totals: engine.Counters{PacketsIn: n.Load()}}}}}}}
	}
	c := NewCollector(src)
	for _, v := range []string{"5", "42"} {
		n.Store(map[string]uint64{"5": 5, "42": 42}[v])
		exp := "# HELP wanlab_proxy_packets_in_total Packets that entered the impairment engine (duplicates included), by egress interface and class.\n" +
			"# TYPE wanlab_proxy_packets_in_total counter\n" +
			"wanlab_proxy_packets_in_total{class=\"default\",iface=\"x\"} " + v + "\n"
		if err := testutil.CollectAndCompare(c, strings.NewReader(exp), "wanlab_proxy_packets_in_total"); err != nil {
			t.Fatal(err)
		}
	}
}

func TestServe(t *testing.T) {
	s, err := Serve("127.0.0.1:0", sample, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Get("http://" + s.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for le, v := range wantSojourn {
		line := `wanlab_proxy_sojourn_seconds_bucket{class="default",iface="veth-a",le="` + le + `"} ` + v + "\n"
		if !strings.Contains(string(body), line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	for _, line := range []string{
		`wanlab_proxy_packets_out_total{class="default",iface="veth-a"} 990`,
		`wanlab_proxy_sojourn_seconds_count{class="default",iface="veth-a"} 990`,
		`wanlab_proxy_sojourn_seconds_sum{class="default",iface="veth-a"} 50`,
		"process_resident_memory_bytes",
		"go_goroutines",
	} {
		if !strings.Contains(string(body), line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkScrape measures one scrape of two directions (the cost is paid
// at scrape time only, never per packet).
func BenchmarkScrape(b *testing.B) {
	c := NewCollector(sample)
	ch := make(chan prometheus.Metric, 128)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		c.Collect(ch)
		for len(ch) > 0 {
			<-ch
		}
	}
}
