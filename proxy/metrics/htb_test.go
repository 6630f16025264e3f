package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wanlab/wanlab/proxy/control"
	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/htb"
)

func TestHTBMetrics(t *testing.T) {
	st := control.Stats{Directions: []control.Direction{{Iface: "rb", Engine: engine.Snapshot{
		Classes:   []engine.ClassSnapshot{{Name: "1:2"}},
		Scheduler: []htb.ClassStats{{ID: "1:1", Bytes: 300, LentBytes: 100}, {ID: "1:2", Parent: "1:1", Leaf: true, Bytes: 300, BorrowedBytes: 100, QueuePackets: 7}},
	}}}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(func() control.Stats { return st }))
	want := `
# HELP wanlab_proxy_htb_borrowed_bytes_total IP bytes an htb class sent above its rate, on an ancestor's spare tokens.
# TYPE wanlab_proxy_htb_borrowed_bytes_total counter
wanlab_proxy_htb_borrowed_bytes_total{class="1:1",iface="rb"} 0
wanlab_proxy_htb_borrowed_bytes_total{class="1:2",iface="rb"} 100
# HELP wanlab_proxy_htb_queue_packets Packets waiting in an htb class's leaves for their turn.
# TYPE wanlab_proxy_htb_queue_packets gauge
wanlab_proxy_htb_queue_packets{class="1:1",iface="rb"} 0
wanlab_proxy_htb_queue_packets{class="1:2",iface="rb"} 7
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "wanlab_proxy_htb_borrowed_bytes_total", "wanlab_proxy_htb_queue_packets"); err != nil {
		t.Fatal(err)
	}
}
