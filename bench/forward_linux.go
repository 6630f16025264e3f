package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/proxy/control"
)

// forwardWorkload is one traffic pattern of the forwarding bench.
type forwardWorkload struct {
	label, metric, unit string
	higherIsBetter      bool
	run                 func(ctx context.Context, l *lab.Lab) ([]float64, error)
}

func forwardWorkloads(quick bool) []forwardWorkload {
	bulkDur, floodDur, rtts := 5*time.Second, 3*time.Second, 3000
	if quick {
		bulkDur, floodDur, rtts = time.Second, time.Second, 300
	}
	bulk := func(streams int) func(ctx context.Context, l *lab.Lab) ([]float64, error) {
		return func(ctx context.Context, l *lab.Lab) ([]float64, error) {
			r, err := tcpBulk(ctx, l, false, streams, bulkDur, "")
			return []float64{r.Average / 1e9}, err
		}
	}
	// The round trip goes first, on a quiet forwarder, as ping measures a
	// path: right after the UDP flood it reads 20-30 µs higher for some
	// seconds on this kind of VM (the proxy's and the generators' threads
	// end up on different CPUs, and every hop becomes a cross-CPU wake-up).
	return []forwardWorkload{
		{label: "udp round trip", metric: "rtt p50", unit: "µs",
			run: func(ctx context.Context, l *lab.Lab) ([]float64, error) {
				r, err := udpRoundTrips(ctx, l, rtts)
				return []float64{quantile(r, .5) / 1e3, quantile(r, .99) / 1e3}, err
			}},
		{label: "tcp 1 stream", metric: "throughput", unit: "Gbit/s", higherIsBetter: true, run: bulk(1)},
		{label: "tcp 4 streams", metric: "throughput", unit: "Gbit/s", higherIsBetter: true, run: bulk(4)},
		{label: "udp 64 B payload", metric: "packet rate", unit: "kpps", higherIsBetter: true,
			run: func(ctx context.Context, l *lab.Lab) ([]float64, error) {
				pps, err := udpFlood(ctx, l, 64, floodDur)
				return []float64{pps / 1e3}, err
			}},
	}
}

// Forward measures forwarding speed with an empty spec: kernel routing,
// the proxy with the offload backend and with the water backend, in
// alternation (rounds × paths) within one run, with the proxy's CPU time
// and memory.
func Forward(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.VMs {
		return ForwardVMs(ctx, cfg)
	}
	began, load := time.Now(), loadAverage()
	e, err := newEnv(ctx, cfg, lab.Config{})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	rounds := 3
	if cfg.Quick {
		rounds = 1
	}
	paths := []string{PathRouting, PathProxyOffload, PathProxyOffload1, PathProxyOffloadCPU, PathProxyWater}
	works := forwardWorkloads(cfg.Quick)
	specs, err := newSpecSet(cfg)
	if err != nil {
		return nil, err
	}
	// values[workload][metric index][path] over rounds
	type key struct {
		w, k int
		path string
	}
	values := map[key][]float64{}
	cpuShare := map[string][]float64{}
	cpuPerGbit := map[key][]float64{}
	cpuPerPacket := map[key][]float64{}
	// lat[path][direction][metric] over rounds: the proxy's own latency
	// during the round trip, from its stats.
	type latKey struct{ path, dir, metric string }
	lat := map[latKey][]float64{}
	rss := map[string]float64{}
	scope := map[string]string{}
	total := rounds * (len(paths)*len(works) + specs.steps())
	step := 0
	for round := range rounds {
		for _, pname := range paths {
			p, err := e.openPath(ctx, pname)
			if err != nil {
				return nil, err
			}
			usage := func() (time.Duration, float64, string, error) {
				if pp, ok := p.(*procPath); ok {
					c, r, s, err := pp.Usage()
					return c, float64(r), s, err
				}
				c, r, err := processUsage("self")
				return c, float64(r), "whole process: proxy in-process plus the traffic generators (compare with routing)", err
			}
			cpu0, _, _, err := usage()
			if err != nil {
				p.Close()
				return nil, err
			}
			t0 := time.Now()
			for wi, w := range works {
				cfg.progress(step, total, fmt.Sprintf("round %d/%d %s: %s", round+1, rounds, pname, w.label))
				step++
				st0, serr := proxyStats(p)
				wc0, _, _, uerr := usage()
				pc0 := preciseCPU(p, wc0)
				w0 := time.Now()
				vs, err := w.run(ctx, e.lab)
				wc1, _, _, uerr1 := usage()
				pc1 := preciseCPU(p, wc1)
				st1, serr1 := proxyStats(p)
				if err == nil {
					err = errors.Join(uerr, uerr1, serr, serr1)
				}
				if err != nil {
					p.Close()
					return nil, fmt.Errorf("%s: %s: %w", pname, w.label, err)
				}
				for k, v := range vs {
					values[key{wi, k, pname}] = append(values[key{wi, k, pname}], v)
				}
				if w.unit == "Gbit/s" && len(vs) > 0 && vs[0] > 0 {
					// A core's share over the workload, per Gbit/s it carried.
					share := 100 * float64(wc1-wc0) / float64(time.Since(w0))
					cpuPerGbit[key{wi, 0, pname}] = append(cpuPerGbit[key{wi, 0, pname}], share/vs[0])
				}
				if st0 != nil && st1 != nil {
					if n := forwarded(*st1) - forwarded(*st0); n > 0 {
						cpuPerPacket[key{wi, 0, pname}] = append(cpuPerPacket[key{wi, 0, pname}], float64(pc1-pc0)/float64(time.Microsecond)/float64(n))
					}
					if w.label == "udp round trip" {
						for dir, ms := range roundTripLatency(*st0, *st1, e.toServer()) {
							for metric, v := range ms {
								lat[latKey{pname, dir, metric}] = append(lat[latKey{pname, dir, metric}], v)
							}
						}
					}
				}
			}
			cpu1, r, s, err := usage()
			wall := time.Since(t0)
			if cerr := p.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, err
			}
			cpuShare[pname] = append(cpuShare[pname], 100*float64(cpu1-cpu0)/float64(wall))
			rss[pname] = max(rss[pname], r/(1<<20))
			scope[pname] = s
		}
	}
	routing := map[int]float64{}
	for wi, w := range works {
		switch w.label {
		case "tcp 1 stream":
			routing[1] = mean(values[key{wi, 0, PathRouting}])
		case "tcp 4 streams":
			routing[4] = mean(values[key{wi, 0, PathRouting}])
		}
	}
	specTable, specUse, err := forwardSpecs(ctx, e, specs, cfg.Quick, rounds, routing, func(s string) {
		cfg.progress(step, total, s)
		step++
	})
	if err != nil {
		return nil, err
	}
	cfg.progress(total, total, "done")
	tb := Table{Name: "forward", Title: "Forwarding with an empty spec (client → router → server)",
		Model: "kernel routing measured in the same run (ratio = path / kernel routing)"}
	for wi, w := range works {
		metrics := []string{w.metric}
		if w.metric == "rtt p50" {
			metrics = append(metrics, "rtt p99")
		}
		for k, metric := range metrics {
			ref := mean(values[key{wi, k, PathRouting}])
			for _, pname := range paths {
				vs := values[key{wi, k, pname}]
				var m Measurement
				if pname == PathRouting {
					m = realizedOnly(w.label, pname, metric, w.unit, mean(vs))
				} else {
					m = measured(w.label, pname, metric, w.unit, ref, mean(vs))
					switch {
					case pname != PathProxyOffload:
					case w.label == "tcp 1 stream":
						// A bulk transfer (iperf3's default, one
						// connection): one flow is one queue's.
						m = m.withTarget("≥ 0.6 × kernel", m.Realized >= 0.6*ref)
					case w.label == "tcp 4 streams":
						m = m.withTarget("≥ 0.5 × kernel", m.Realized >= 0.5*ref)
						m.Note = "kernel routing forwards each stream on its sender's CPU; the proxy spreads flows over its queues (proxy-offload: one per two CPUs a direction; proxy-offload-cpuq: one per CPU)"
					case w.label == "udp 64 B payload":
						m = m.withTarget("≥ 0.8 × kernel", m.Realized >= 0.8*ref)
					case metric == "rtt p50":
						m = m.withTarget("≤ kernel + 20 µs", m.Realized <= ref+20)
					}
				}
				if len(vs) > 1 {
					m = m.withInterval(slices.Min(vs), slices.Max(vs))
				}
				tb.Rows = append(tb.Rows, m)
			}
		}
	}
	use := Table{Name: "usage", Title: "Forwarder CPU and memory during the workloads", Model: "-"}
	for _, pname := range paths {
		if pname == PathRouting && len(cfg.ProxyExec) > 0 {
			continue
		}
		c := realizedOnly("all workloads", pname, "cpu", "% of a core", mean(cpuShare[pname]))
		c.Note = scope[pname]
		use.Rows = append(use.Rows, c)
		for wi, w := range works {
			if vs := cpuPerGbit[key{wi, 0, pname}]; len(vs) > 0 && pname != PathRouting {
				g := realizedOnly(w.label, pname, "cpu per Gbit/s", "% of a core", mean(vs))
				g.Note = scope[pname]
				use.Rows = append(use.Rows, g)
			}
		}
		for wi, w := range works {
			if vs := cpuPerPacket[key{wi, 0, pname}]; len(vs) > 0 {
				c := realizedOnly(w.label, pname, "cpu per packet", "µs", mean(vs))
				c.Note = scope[pname] + "; over the packets the proxy wrote"
				if len(vs) > 1 {
					c = c.withInterval(slices.Min(vs), slices.Max(vs))
				}
				use.Rows = append(use.Rows, c)
			}
		}
		r := realizedOnly("all workloads", pname, "rss", "MiB", rss[pname])
		r.Note = scope[pname]
		use.Rows = append(use.Rows, r)
	}
	own := Table{Name: "proxy_latency", Title: "The proxy's own added latency during the UDP round trip, per direction (its stats: TUN write done − the engine's departure, per packet)",
		Model: "-"}
	for _, pname := range paths {
		for _, dir := range []string{"to server", "to client"} {
			for _, metric := range roundTripMetrics {
				vs := lat[latKey{pname, dir, metric}]
				if len(vs) == 0 {
					continue
				}
				m := realizedOnly("udp round trip, "+dir, pname, metric, "µs", mean(vs))
				if len(vs) > 1 {
					m = m.withInterval(slices.Min(vs), slices.Max(vs))
				}
				own.Rows = append(own.Rows, m)
			}
		}
	}
	use.Rows = append(use.Rows, specUse...)
	tables := []Table{tb, specTable, use}
	if len(own.Rows) > 0 {
		tables = append(tables, own)
	}
	rep := &Report{Bench: "forward", Date: began.UTC(), Quick: cfg.Quick, Kernel: host.KernelRelease(), Command: cfg.Command,
		Tables: tables}
	rep.Notes = append(rep.Notes, fmt.Sprintf("%d round(s), each running every workload on every path in turn; realized is the mean, the interval min..max", rounds))
	if len(own.Rows) > 0 {
		rep.Notes = append(rep.Notes, "proxy_latency: the live proxy's latency histograms over the round trip (proxy stats --latency); "+
			"p50 and p99 are bucket upper bounds (10 a decade), the means exact; added = due to dequeued + dequeued to written, "+
			"read to engine runs inside the (empty) spec's delay and so inside due to dequeued")
	}
	return rep, rep.finish(began, load)
}

func mean(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := 0.0
	for _, v := range vs {
		s += v
	}
	return s / float64(len(vs))
}

// proxyStats reads the counters of the proxy on path p, in-process or
// over its control API; nil for a path without a proxy.
func proxyStats(p path) (*control.Stats, error) {
	switch pp := p.(type) {
	case *proxyPath:
		st := pp.p.Stats()
		return &st, nil
	case *procPath:
		st, err := pp.ctl.Stats()
		if err != nil {
			return nil, fmt.Errorf("%s: stats: %w", pp.name, err)
		}
		return &st, nil
	}
	return nil, nil
}

// preciseCPU is the CPU time of a proxy in-process from getrusage (1 µs
// resolution, where /proc's ticks are 10 ms: a round trip's few thousand
// packets need it), otherwise coarse, the path's own Usage reading.
func preciseCPU(p path, coarse time.Duration) time.Duration {
	if _, ok := p.(*proxyPath); !ok {
		return coarse
	}
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return coarse
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// forwarded is the number of packets the proxy wrote, both directions.
func forwarded(st control.Stats) uint64 {
	var n uint64
	for _, d := range st.Directions {
		n += d.Device.Written
	}
	return n
}

// roundTripMetrics are the proxy_latency table's rows per direction.
var roundTripMetrics = []string{"added p50", "added p99", "read to engine mean", "due to dequeued mean", "dequeued to written mean"}

// roundTripLatency is the proxy's own latency between two readings of
// its stats, per direction ("to server", "to client") and metric
// (roundTripMetrics), in µs; a direction without latency or packets is
// left out.
func roundTripLatency(before, after control.Stats, toServer string) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for _, d := range after.Directions {
		if d.Latency == nil {
			continue
		}
		var prev control.Latency
		for _, b := range before.Directions {
			if b.Iface == d.Iface && b.Latency != nil {
				prev = *b.Latency
			}
		}
		added := d.Latency.Added.Since(prev.Added)
		if added.Packets == 0 {
			continue
		}
		us := func(v time.Duration) float64 { return float64(v) / float64(time.Microsecond) }
		meanOf := func(h, p control.LatencyHistogram) float64 {
			h = h.Since(p)
			if h.Packets == 0 {
				return 0
			}
			return us(h.Sum) / float64(h.Packets)
		}
		dir := "to client"
		if d.Iface == toServer {
			dir = "to server"
		}
		out[dir] = map[string]float64{
			"added p50":                us(added.P50),
			"added p99":                us(added.P99),
			"read to engine mean":      meanOf(d.Latency.ReadToEnqueue, prev.ReadToEnqueue),
			"due to dequeued mean":     meanOf(d.Latency.DueToDequeue, prev.DueToDequeue),
			"dequeued to written mean": meanOf(d.Latency.DequeueToWritten, prev.DequeueToWritten),
		}
	}
	return out
}
