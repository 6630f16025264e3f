package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/lab"
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
	paths := []string{PathRouting, PathProxyOffload, PathProxyOffload1, PathProxyWater}
	works := forwardWorkloads(cfg.Quick)
	// values[workload][metric index][path] over rounds
	type key struct {
		w, k int
		path string
	}
	values := map[key][]float64{}
	cpuShare := map[string][]float64{}
	cpuPerGbit := map[key][]float64{}
	rss := map[string]float64{}
	scope := map[string]string{}
	total := rounds * len(paths) * len(works)
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
				wc0, _, _, uerr := usage()
				w0 := time.Now()
				vs, err := w.run(ctx, e.lab)
				wc1, _, _, uerr1 := usage()
				if err == nil {
					err = errors.Join(uerr, uerr1)
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
						m.Note = "kernel routing forwards each stream on its sender's CPU; the proxy spreads flows over its queues (one reader per CPU)"
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
		r := realizedOnly("all workloads", pname, "rss", "MiB", rss[pname])
		r.Note = scope[pname]
		use.Rows = append(use.Rows, r)
	}
	rep := &Report{Bench: "forward", Date: began.UTC(), Quick: cfg.Quick, Kernel: host.KernelRelease(), Command: cfg.Command,
		Tables: []Table{tb, use}}
	rep.Notes = append(rep.Notes, fmt.Sprintf("%d round(s), each running every workload on every path in turn; realized is the mean, the interval min..max", rounds))
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
