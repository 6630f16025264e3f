package proxy

import (
	"fmt"
	"testing"
	"time"

	"github.com/wanlab/wanlab/proxy/control"
	"github.com/wanlab/wanlab/tc/engine"
)

// TestLatencyHistograms sends packets through an empty spec (written by
// the reader at once) and through `delay 2ms` (written by the release
// loop): every packet is counted in each histogram, each packet's added
// latency is the sum of its release lateness and its write, and what the
// proxy adds stays below the delay it emulates.
func TestLatencyHistograms(t *testing.T) {
	const n = 120
	p, devs := fakeProxy(t, [2]string{"", "delay 2ms"})
	for dir, f := range devs {
		got := make(chan int)
		go func() {
			k := 0
			for range n {
				select {
				case <-f.Written():
					k++
				case <-time.After(5 * time.Second):
				}
			}
			got <- k
		}()
		for i := range n {
			f.Inject(ipv4(17, []byte(fmt.Sprintf("packet %d", i)), 0, false))
			if i%10 == 9 {
				time.Sleep(100 * time.Microsecond) // batches of a few, as traffic comes
			}
		}
		if k := <-got; k != n {
			t.Fatalf("direction %d: %d of %d packets written", dir, k, n)
		}
	}
	// The write is recorded after it returns, so after the packet
	// reached the fake: wait for the counts.
	var st control.Stats
	deadline := time.Now().Add(5 * time.Second)
	for {
		st = p.Stats()
		if st.Directions[0].Latency.Added.Packets == n && st.Directions[1].Latency.Added.Packets == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("latency counts never reached %d: %+v %+v", n, st.Directions[0].Latency.Added, st.Directions[1].Latency.Added)
		}
		time.Sleep(time.Millisecond)
	}
	delay := 2 * time.Millisecond
	for dir, d := range st.Directions {
		l := d.Latency
		if len(l.BoundsNs) != len(control.LatencyBoundsNs) {
			t.Fatalf("%s: %d bounds, want %d", d.Iface, len(l.BoundsNs), len(control.LatencyBoundsNs))
		}
		hists := map[string]control.LatencyHistogram{"added": l.Added, "read_to_enqueue": l.ReadToEnqueue,
			"due_to_dequeue": l.DueToDequeue, "dequeue_to_written": l.DequeueToWritten}
		for name, h := range hists {
			if h.Packets != n || len(h.Counts) != len(l.BoundsNs)+1 {
				t.Errorf("%s %s: %d packets in %d buckets, want %d in %d", d.Iface, name, h.Packets, len(h.Counts), n, len(l.BoundsNs)+1)
			}
			if h.Sum < 0 || h.Max < 0 || h.P50 > h.P90 || h.P90 > h.P99 || h.P99 > h.Max {
				t.Errorf("%s %s: inconsistent %+v", d.Iface, name, h)
			}
			if h.Max > 0 && h.Sum < h.Max {
				t.Errorf("%s %s: sum %v below max %v", d.Iface, name, h.Sum, h.Max)
			}
		}
		if d.Device.Written != l.Added.Packets {
			t.Errorf("%s: written %d, added latency of %d packets", d.Iface, d.Device.Written, l.Added.Packets)
		}
		// Per packet added = due→dequeued + dequeued→written, so the sums
		// agree exactly.
		if sum := l.DueToDequeue.Sum + l.DequeueToWritten.Sum; l.Added.Sum != sum {
			t.Errorf("%s: added sums to %v, its components to %v", d.Iface, l.Added.Sum, sum)
		}
		if l.Added.P50 >= delay {
			t.Errorf("%s: the proxy's added latency p50 %v, not below the delay %v", d.Iface, l.Added.P50, delay)
		}
		if dir == 1 {
			// The delay is not counted: the engine's time is the spec's.
			if mean := l.Added.Sum / n; mean >= delay {
				t.Errorf("%s: mean added latency %v includes the delay %v", d.Iface, mean, delay)
			}
		}
	}
}

func TestLatencyBucket(t *testing.T) {
	b := control.LatencyBoundsNs
	for i, ns := range b {
		if got := latencyBucket(ns); got != i {
			t.Errorf("bucket(%d) = %d, want %d (bounds are inclusive)", ns, got, i)
		}
		if got := latencyBucket(ns + 1); got != i+1 {
			t.Errorf("bucket(%d) = %d, want %d", ns+1, got, i+1)
		}
	}
	if latencyBucket(0) != 0 || latencyBucket(1<<62) != len(b) {
		t.Error("the first bucket holds 0, the last everything above the bounds")
	}
	var h latencyHistogram
	tl := tally{h: &h}
	for _, ns := range []int64{-5, 500, 900, 1100, 1200, 5e8} {
		tl.addN(ns, 2)
	}
	tl.flush()
	got := readHistograms(&h, &h) // two readers merged
	if got.Packets != 24 || got.Counts[0] != 12 || got.Counts[1] != 8 || got.Counts[len(b)] != 4 {
		t.Errorf("counts %v (%d packets)", got.Counts, got.Packets)
	}
	if got.Sum != 2*2*(500+900+1100+1200+5e8) || got.Max != 5e8 {
		t.Errorf("sum %v max %v", got.Sum, got.Max)
	}
	if got.P50 != time.Microsecond || got.P90 != 5e8 || got.Quantile(0.8) != 1250 {
		t.Errorf("quantiles p50 %v p80 %v p90 %v", got.P50, got.Quantile(0.8), got.P90)
	}
	before := readHistograms(&h)
	tl.addN(3000, 1)
	tl.flush()
	now := readHistograms(&h)
	if d := now.Since(before); d.Packets != 1 || d.Sum != 3000 || d.P99 != 3150 {
		t.Errorf("since the earlier reading: %+v", d)
	}
	if d := now.Since(control.NewLatencyHistogram(make([]uint64, len(b)+1), 0, 0)); d.Packets != now.Packets {
		t.Errorf("since an empty reading: %d packets, want %d", d.Packets, now.Packets)
	}
}

// BenchmarkLatencyRecord is what a written batch of 64 packets costs
// lateness.record (Late1ms and the three release-side histograms), per
// packet; it allocates nothing.
//
//	go test -run '^$' -bench LatencyRecord ./proxy/
func BenchmarkLatencyRecord(b *testing.B) {
	pkts := make([]*engine.Packet, 64)
	for i := range pkts {
		pkts[i] = &engine.Packet{Depart: int64(1e6 + 100*i)}
	}
	var l lateness
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		l.record(1e6+8000, 1e6+12000+int64(i%1000), pkts)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(pkts)), "ns/packet")
}
