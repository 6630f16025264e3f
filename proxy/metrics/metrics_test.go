package metrics

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wanlab/wanlab/proxy/control"
	"github.com/wanlab/wanlab/proxy/tap"
)

func sample() control.Stats {
	return control.Stats{
		Directions: []control.Direction{
			{
				Iface: "veth-a",
				Spec:  "delay 50ms loss 1%",
				Engine: control.EngineSnapshot{
					PacketsIn: 1000, BytesIn: 1500000, PacketsOut: 990, BytesOut: 1485000,
					Drops:     map[string]uint64{"loss": 10, "queue": 0},
					ECNMarked: 1, Duplicated: 2, Corrupted: 3, Reordered: 4,
					QueuePackets: 5, QueueBytes: 7500,
					Sojourn: control.Histogram{
						Bounds: []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond},
						Counts: []uint64{0, 0, 980, 10},
						Sum:    50 * time.Second,
					},
				},
				Device: control.DeviceCounters{Malformed: 6, ReadErrors: 7, WriteErrors: 8},
			},
			{Iface: "veth-b"},
		},
		Tap: &tap.Stats{Records: 1990, Bytes: 123456, RingFull: 9, OverLimit: 0},
	}
}

const want = `
# HELP wanlab_proxy_bytes_in_total IP bytes that entered the impairment engine.
# TYPE wanlab_proxy_bytes_in_total counter
wanlab_proxy_bytes_in_total{iface="veth-a"} 1.5e+06
wanlab_proxy_bytes_in_total{iface="veth-b"} 0
# HELP wanlab_proxy_drops_total Packets dropped by the engine, by reason (loss: random or modelled loss; queue: a queue limit).
# TYPE wanlab_proxy_drops_total counter
wanlab_proxy_drops_total{iface="veth-a",reason="loss"} 10
wanlab_proxy_drops_total{iface="veth-a",reason="queue"} 0
# HELP wanlab_proxy_queue_bytes IP bytes held by the engine now.
# TYPE wanlab_proxy_queue_bytes gauge
wanlab_proxy_queue_bytes{iface="veth-a"} 7500
wanlab_proxy_queue_bytes{iface="veth-b"} 0
# HELP wanlab_proxy_sojourn_seconds Time packets spent in the engine, from arrival to departure.
# TYPE wanlab_proxy_sojourn_seconds histogram
wanlab_proxy_sojourn_seconds_bucket{iface="veth-a",le="0.001"} 0
wanlab_proxy_sojourn_seconds_bucket{iface="veth-a",le="0.01"} 0
wanlab_proxy_sojourn_seconds_bucket{iface="veth-a",le="0.1"} 980
wanlab_proxy_sojourn_seconds_bucket{iface="veth-a",le="+Inf"} 990
wanlab_proxy_sojourn_seconds_sum{iface="veth-a"} 50
wanlab_proxy_sojourn_seconds_count{iface="veth-a"} 990
# HELP wanlab_proxy_device_malformed_total Truncated or malformed IP packets read from the TUN and dropped.
# TYPE wanlab_proxy_device_malformed_total counter
wanlab_proxy_device_malformed_total{iface="veth-a"} 6
wanlab_proxy_device_malformed_total{iface="veth-b"} 0
# HELP wanlab_proxy_tap_lost_total Tap records not written, by reason (ring_full: the writer fell behind; over_limit: the size limit was reached).
# TYPE wanlab_proxy_tap_lost_total counter
wanlab_proxy_tap_lost_total{reason="over_limit"} 0
wanlab_proxy_tap_lost_total{reason="ring_full"} 9
`

func TestCollector(t *testing.T) {
	c := NewCollector(sample)
	err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"wanlab_proxy_bytes_in_total", "wanlab_proxy_drops_total", "wanlab_proxy_queue_bytes",
		"wanlab_proxy_sojourn_seconds", "wanlab_proxy_device_malformed_total", "wanlab_proxy_tap_lost_total")
	if err != nil {
		t.Fatal(err)
	}
	// 2 directions × 14 single-valued families + 2 drop reasons + 1 histogram + 4 tap series.
	if n := testutil.CollectAndCount(c); n != 2*13+2+1+4 {
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
		return control.Stats{Directions: []control.Direction{{Iface: "x", Engine: control.EngineSnapshot{PacketsIn: n.Load()}}}}
	}
	c := NewCollector(src)
	for _, v := range []string{"5", "42"} {
		n.Store(map[string]uint64{"5": 5, "42": 42}[v])
		exp := "# HELP wanlab_proxy_packets_in_total Packets that entered the impairment engine, by egress interface.\n" +
			"# TYPE wanlab_proxy_packets_in_total counter\n" +
			"wanlab_proxy_packets_in_total{iface=\"x\"} " + v + "\n"
		if err := testutil.CollectAndCompare(c, strings.NewReader(exp), "wanlab_proxy_packets_in_total"); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBadHistogramIsSkipped(t *testing.T) {
	st := sample()
	st.Directions[0].Engine.Sojourn.Counts = st.Directions[0].Engine.Sojourn.Counts[:2]
	c := NewCollector(func() control.Stats { return st })
	if n := testutil.CollectAndCount(c, "wanlab_proxy_sojourn_seconds"); n != 0 {
		t.Fatalf("%d sojourn series from a malformed histogram", n)
	}
}

func TestServe(t *testing.T) {
	s, err := Serve("127.0.0.1:0", sample)
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
	for _, line := range []string{
		`wanlab_proxy_packets_out_total{iface="veth-a"} 990`,
		`wanlab_proxy_sojourn_seconds_bucket{iface="veth-a",le="0.1"} 980`,
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
