package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/proxy"
	"github.com/wanlab/wanlab/proxy/control"
	"github.com/wanlab/wanlab/proxy/device"
	"github.com/wanlab/wanlab/proxy/metrics"
	"github.com/wanlab/wanlab/tc/spec"
)

// udpPacket is a minimal IPv4/UDP packet of n payload bytes.
func udpPacket(n int) []byte {
	p := make([]byte, 28+n)
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	p[8], p[9] = 64, 17
	copy(p[12:], []byte{10, 0, 1, 2, 10, 0, 2, 2})
	binary.BigEndian.PutUint16(p[24:], uint16(8+n))
	return p
}

// TestLatencyTrueUnderQueueDrops drives a burst through a bucket far
// smaller than it (each queue drop once added a "read to engine"
// sample equal to the machine's uptime, because the arrival was read after
// the engine had recycled the dropped packet). It reads the proxy's
// latency through `proxy stats --latency --json` and /metrics: no sample
// exceeds the run's duration, every packet read is counted once, and the
// Prometheus sums agree with the counts.
func TestLatencyTrueUnderQueueDrops(t *testing.T) {
	const sent = 400
	start := time.Now()
	fa := device.NewFake("fa", 1500, 8, 512)
	fb := device.NewFake("fb", 1500, 8, 512)
	p, err := proxy.New(context.Background(), [2]device.Device{fa, fb}, proxy.Options{
		Ifaces: [2]string{"eth-a", "eth-b"},
		Specs:  [2]spec.Impairment{spec.PipelineImpairment(spec.MustParse("tbf rate 8mbit burst 3kb limit 3kb")), {}},
		Seed:   1, HasSeed: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dir := t.TempDir()
	addr := "unix:" + filepath.Join(dir, "eth-a-eth-b.sock")
	srv, err := control.Start(addr, p, control.Access{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	written := make(chan int)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		k := 0
		for {
			select {
			case <-fa.Written():
				k++
			case written <- k:
			case <-stop:
				return
			}
		}
	}()
	pkt := udpPacket(1400)
	for range sent {
		if !fa.Inject(pkt) {
			t.Fatal("the fake device closed")
		}
	}
	// Wait until every packet is either written or dropped, and counted.
	var d control.Direction
	deadline := time.Now().Add(10 * time.Second)
	for {
		d = p.Stats().Directions[0]
		tot := d.Engine.Totals
		if tot.PacketsIn == sent && tot.PacketsOut+tot.Drops.Queue == sent && d.Latency != nil &&
			d.Latency.ReadToEnqueue.Packets == sent && d.Latency.Added.Packets == tot.PacketsOut {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never settled: %+v, written %d", tot, <-written)
		}
		time.Sleep(time.Millisecond)
	}
	if d.Engine.Totals.Drops.Queue == 0 {
		t.Fatalf("no queue drops: %+v; the test needs them", d.Engine.Totals)
	}

	out, code, err := runProxyCmd("stats", "--latency", "--json", "--control", addr)
	if err != nil || code != 0 {
		t.Fatalf("stats --latency --json: exit %d, %v", code, err)
	}
	ms, err := metrics.Serve("127.0.0.1:0", p.Stats, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	resp, err := http.Get("http://" + ms.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	prom := promLatency(t, resp)
	resp.Body.Close()
	run := time.Since(start)

	var st control.Stats
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("stats --latency --json: %v\n%s", err, out)
	}
	for _, d := range st.Directions {
		l := d.Latency
		if l == nil {
			t.Fatalf("%s: no latency", d.Iface)
		}
		for step, h := range map[string]control.LatencyHistogram{"added": l.Added, "read_to_enqueue": l.ReadToEnqueue,
			"due_to_dequeue": l.DueToDequeue, "dequeue_to_written": l.DequeueToWritten} {
			if h.Max > run || h.Sum > time.Duration(h.Packets)*run {
				t.Errorf("%s %s: max %v, sum %v over %d packets, in a run of %v", d.Iface, step, h.Max, h.Sum, h.Packets, run)
			}
			if h.Packets > 0 && (h.Sum < h.Max || h.Sum > time.Duration(h.Packets)*h.Max) {
				t.Errorf("%s %s: sum %v inconsistent with max %v over %d packets", d.Iface, step, h.Sum, h.Max, h.Packets)
			}
			pm, ok := prom[d.Iface+"/"+step]
			if !ok {
				t.Errorf("/metrics lacks %s %s", d.Iface, step)
				continue
			}
			if pm.count != h.Packets {
				t.Errorf("%s %s: /metrics count %d, stats %d", d.Iface, step, pm.count, h.Packets)
			}
			// The scrape came after the stats: a packet more is possible
			// only where traffic flows, and none does now.
			if pm.sum > float64(pm.count)*run.Seconds() || pm.sum < 0 {
				t.Errorf("%s %s: /metrics sum %gs over %d samples, in a run of %v", d.Iface, step, pm.sum, pm.count, run)
			}
		}
	}
	if got := st.Directions[0].Latency.ReadToEnqueue.Packets; got != sent {
		t.Errorf("read to engine counted %d packets, %d were read", got, sent)
	}
}

type promHistogram struct {
	sum   float64
	count uint64
}

// promLatency reads wanlab_proxy_latency_seconds' sums and counts from a
// /metrics response, keyed "iface/step".
func promLatency(t *testing.T, resp *http.Response) map[string]promHistogram {
	t.Helper()
	got := map[string]promHistogram{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok || (name != "wanlab_proxy_latency_seconds_sum" && name != "wanlab_proxy_latency_seconds_count") {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			t.Fatalf("/metrics line %q", line)
		}
		var iface, step string
		for _, kv := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			v = strings.Trim(v, `"`)
			switch k {
			case "iface":
				iface = v
			case "step":
				step = v
			}
		}
		h := got[iface+"/"+step]
		if name == "wanlab_proxy_latency_seconds_sum" {
			f, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("/metrics line %q: %v", line, err)
			}
			h.sum = f
		} else {
			n, err := strconv.ParseUint(value, 10, 64)
			if err != nil {
				t.Fatalf("/metrics line %q: %v", line, err)
			}
			h.count = n
		}
		got[iface+"/"+step] = h
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}
