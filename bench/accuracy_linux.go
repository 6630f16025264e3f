package bench

import (
	"context"
	"fmt"
	"github.com/wanlab/wanlab/units"
	"math"
	"strings"
	"time"

	"github.com/wanlab/wanlab/internal/binom"
	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/vm"
	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/spec"
)

// Accuracy runs the accuracy grid through the proxy (each backend) and the
// kernel's qdiscs.
func Accuracy(ctx context.Context, cfg Config) (*Report, error) {
	began, load := time.Now(), loadAverage()
	texts := cfg.Specs
	if len(texts) == 0 {
		texts = AccuracyGrid()
		if cfg.Quick {
			texts = QuickAccuracyGrid()
		}
		if cfg.Kernel {
			texts = append(texts, KernelVMGrid(cfg.Quick)...)
		}
	}
	cases := make([]accuracyCase, len(texts))
	for i, t := range texts {
		c, err := newCase(t, cfg.Quick)
		if err != nil {
			return nil, err
		}
		cases[i] = c
	}
	e, err := newEnv(ctx, cfg, lab.Config{})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	rep := &Report{Bench: "accuracy", Date: began.UTC(), Quick: cfg.Quick, Kernel: host.KernelRelease(), Command: cfg.Command}
	tables := map[string]*Table{
		"delay": {Name: "delay", Title: "Delay (one-way, UDP probes)", Model: "the spec's engine on a virtual clock fed the run's own send times"},
		"loss":  {Name: "loss", Title: "Loss (UDP probes; realized with its 99.9 % Wilson interval)", Model: "the loss model's stationary loss; gemodel burst length from the chain"},
		"rate":  {Name: "rate", Title: "Rate (UDP offered at 1.5 × rate, IP bytes, once the bucket is empty; TCP bulk over its second half: goodput read by the receiver, and IP bytes at the receiver's link)", Model: "tbf rate; 1 ms burst bound = burst + rate × 1 ms; TCP goodput = rate × 1448/1500; TCP wire rate = rate"},
		"trace": {Name: "trace", Title: "Trace replay (UDP at 1.1 × the trace's peak; IP bytes delivered per 100 ms window against the trace's capacity in it)", Model: "the trace: 1500 B per delivery opportunity"},
		"aqm": {Name: "aqm", Title: "Managed queues (UDP probes every 10 ms beside a TCP bulk transfer through the bottleneck: the queueing delay the AQM leaves)",
			Model: "codel: the standing queue near target, so a probe waits about target; fq_codel: a sparse flow goes ahead of the bulk flow, so below target"},
		"other": {Name: "other", Title: "Reordering (packets that left ahead of an earlier one) and duplication (with its 99.9 % Wilson interval)", Model: "the spec's engine on a virtual clock fed the run's own send times"},
	}
	paths := []string{PathProxyOffload, PathProxyWater, PathKernel}
	if cfg.Kernel && cfg.KernelVM != VMOff {
		paths = append(paths, PathKernelVM)
	}
	total := len(paths) * len(cases)
	step := 0
	var runID uint64 = uint64(began.UnixNano())
	for _, pname := range paths {
		var p path
		var base *vmBaseline
		if pname == PathKernelVM {
			if cfg.KernelVM != VMOn && !lacksNetem(tables) {
				rep.Notes = append(rep.Notes, "kernel-vm: not run, the host's kernel has netem (--kernel-vm on runs it anyway)")
				continue
			}
			cfg.progress(step, total, pname+": booting the reference VM")
			vp, err := e.openKernelVM(ctx)
			if err != nil {
				return nil, err
			}
			p, pname, base = vp, vp.Name(), &vmBaseline{}
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: the spec as qdiscs of the reference VM (Linux %s under %s, booted in %.1f s): client traffic toward the server is routed through the VM and impaired on its egress", pname, vp.v.Hello.Release, vmAccelWords(vp.v.Engine), vp.v.BootTime.Seconds()))
			if vp.boots > 1 {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%s: booted %d times: the earlier guests' NICs carried no frames", pname, vp.boots))
			}
		} else if p, err = e.openPath(ctx, pname); err != nil {
			return nil, err
		}
		for _, c := range cases {
			cfg.progress(step, total, pname+": "+label(c.text))
			step++
			text := c.proxyText
			if pname == PathKernel || base != nil {
				text = c.text // the kernel's own randomness: the model cannot replay it
			}
			if base != nil && c.netem == nil && c.aqm == nil && c.text != "" {
				tables[c.table()].Rows = append(tables[c.table()].Rows, notAvailable(label(c.text), pname, "n/a: no netem; the host's kernel runs it (kernel rows)"))
				continue
			}
			if err := p.Set(text, ""); err != nil {
				if why := naReason(err); why != "" {
					tables[c.table()].Rows = append(tables[c.table()].Rows, notAvailable(label(c.text), pname, why))
					continue
				}
				p.Close()
				return nil, fmt.Errorf("%s: %s: %w", pname, label(c.text), err)
			}
			runID++
			c.probe.RunID = runID
			lt, _ := p.(latenessTaker)
			if lt != nil {
				lt.TakeLateness()
			}
			var aqmBulk chan bulkOutcome
			if c.aqm != nil {
				// The bulk transfer first, so the queue stands when the
				// probes start.
				aqmBulk = make(chan bulkOutcome, 1)
				go func() {
					b, err := tcpBulk(ctx, e.lab, false, 1, c.bulk, "")
					aqmBulk <- bulkOutcome{b, err}
				}()
				select {
				case <-time.After(time.Second):
				case <-ctx.Done():
				}
			}
			run, err := udpProbe(ctx, e.lab, c.probe)
			var bulk *bulkResult
			if aqmBulk != nil {
				o := <-aqmBulk
				if err == nil && o.err != nil {
					err = fmt.Errorf("tcp: %w", o.err)
				}
				bulk = &o.res
			}
			if err != nil {
				p.Close()
				return nil, fmt.Errorf("%s: %s: %w", pname, label(c.text), err)
			}
			if lt != nil {
				l := lt.TakeLateness()
				run.late = &l
			}
			st := analyze(run.arrivals, c.probe.Count, c.probe.Steady)
			if c.bulk > 0 && c.aqm == nil {
				b, err := tcpBulk(ctx, e.lab, false, 1, c.bulk, "")
				if err != nil {
					p.Close()
					return nil, fmt.Errorf("%s: %s: tcp: %w", pname, label(c.text), err)
				}
				bulk = &b
			}
			if base != nil && c.text == "" {
				base.p50, base.spread, base.ok = st.DelayP50, st.DelayP99-st.DelayP50, true
				rep.Notes = append(rep.Notes, fmt.Sprintf("%s timing noise (empty spec): one-way delay p50 %.0f µs, p99 %.0f µs; its delay rows subtract the p50 and are within target when |err| ≤ p99 − p50 = %.0f µs",
					pname, us(st.DelayP50), us(st.DelayP99), us(base.spread)))
			}
			ms, err := c.measure(pname, st, bulk, run, base)
			if err != nil {
				p.Close()
				return nil, err
			}
			if vp, ok := p.(*kernelVMPath); ok && c.netem != nil && c.netem.Loss.Kind != spec.LossNone && c.tbf == nil {
				q, err := vp.qdiscCounters()
				if err != nil {
					p.Close()
					return nil, err
				}
				seen := int(q.Packets) + int(q.Drops)
				lo, hi := binom.Wilson(int(q.Drops), seen, z999)
				want := 100 * engine.StationaryLoss(c.netem.Loss)
				m := measured(label(c.text), pname, "loss at the VM's netem", "%", want, 100*float64(q.Drops)/float64(max(seen, 1))).
					withInterval(100*lo, 100*hi).withTarget("in 99.9 % CI", want >= 100*lo && want <= 100*hi)
				m.Note = fmt.Sprintf("the qdisc's own counters: %d dropped of %d it saw", q.Drops, seen)
				ms = append(ms, m)
			}
			for _, m := range ms {
				t := tables[m.Metric]
				if t == nil {
					t = tables[metricTable(m.Metric)]
				}
				if c.aqm != nil {
					t = tables["aqm"]
				}
				t.Rows = append(t.Rows, m)
			}
		}
		// The trace row belongs to the built-in grid: --specs runs only
		// the file's specs.
		switch {
		case len(cfg.Specs) > 0:
		case pname == PathProxyOffload || pname == PathProxyWater:
			cfg.progress(step, total, pname+": trace replay")
			runID++
			lt, _ := p.(latenessTaker)
			ms, err := traceRows(ctx, e.lab, p, lt, pname, cfg.Quick, runID)
			if err != nil {
				p.Close()
				return nil, err
			}
			tables["trace"].Rows = append(tables["trace"].Rows, ms...)
		case pname == PathKernel:
			tables["trace"].Rows = append(tables["trace"].Rows, notAvailable(traceLabel, pname, "n/a: the kernel has no trace qdisc"))
		}
		if err := p.Set("", ""); err != nil && naReason(err) == "" {
			p.Close()
			return nil, err
		}
		if err := p.Close(); err != nil {
			return nil, err
		}
	}
	cfg.progress(total, total, "done")
	compareWithKernel(tables["rate"].Rows)
	for _, k := range []string{"delay", "loss", "rate", "aqm", "trace", "other"} {
		if len(tables[k].Rows) > 0 {
			rep.Tables = append(rep.Tables, *tables[k])
		}
	}
	rep.Notes = append(rep.Notes,
		"one-way delay = kernel receive stamp (SO_TIMESTAMPNS) minus the sender's stamp before send(), same clock; it includes the path's own forwarding delay (the empty spec rows)",
		"kernel tbf counts the Ethernet header (14 B per packet) against the rate; the proxy counts IP bytes",
	)
	return rep, rep.finish(began, load)
}

// vmBaseline is the reference VM path's own delay, measured with the empty
// spec: its p50 is subtracted from the path's delays, and p99 − p50 is the
// timing noise its delay rows are judged against.
type vmBaseline struct {
	p50, spread time.Duration
	ok          bool
}

// lacksNetem reports whether the host kernel's rows so far say it has no
// netem.
func lacksNetem(tables map[string]*Table) bool {
	for _, t := range tables {
		for _, m := range t.Rows {
			if m.Path == PathKernel && strings.Contains(m.NA, "netem") {
				return true
			}
		}
	}
	return false
}

func vmAccelWords(a vm.Engine) string {
	switch a {
	case vm.EngineKVM:
		return "KVM"
	case vm.EngineUML:
		return "User-Mode Linux (uml)"
	}
	return "emulation (TCG)"
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// KernelVMGrid is what the accuracy bench adds with Config.Kernel: the
// netem features the reference VM's kernel can set beside the proxy's.
func KernelVMGrid(quick bool) []string {
	if quick {
		return []string{"duplicate 2%", "delay 10ms reorder 25% 50% gap 5"}
	}
	return []string{"loss state 1% 10% 5% 80% 1%", "duplicate 2%", "duplicate 5% 25%", "corrupt 1%",
		"delay 10ms reorder 25% 50% gap 5", "delay 10ms reorder 10%", "rate 2mbit",
		"slot 1ms 5ms", "slot distribution normal 5ms 1ms"}
}

// measure turns a probe run into measurements against the spec's model.
// base, for the reference VM's path, is its own delay to take off.
func (c accuracyCase) measure(path string, st probeStats, bulk *bulkResult, run probeRun, base *vmBaseline) ([]Measurement, error) {
	offered := run.offered
	lbl := label(c.text)
	if st.Received == 0 {
		return nil, fmt.Errorf("%s: %s: no probe arrived", path, lbl)
	}
	model, err := replay(c.spec, run.sends, c.probe.IPLen, 1)
	if err != nil {
		return nil, fmt.Errorf("%s: model: %w", lbl, err)
	}
	if c.aqm != nil {
		return c.measureAQM(path, st, bulk, base), nil
	}
	var out []Measurement
	if c.tbf == nil || (c.netem != nil && c.netem.Latency > 0) {
		d50, d99 := st.DelayP50, st.DelayP99
		if base != nil && base.ok && c.text != "" {
			d50, d99 = d50-base.p50, d99-base.p50
		}
		p50 := measured(lbl, path, "delay p50", "µs", us(model.DelayP50), us(d50))
		p99 := measured(lbl, path, "delay p99", "µs", us(model.DelayP99), us(d99))
		switch {
		case base != nil && c.text == "":
			p50.Note, p99.Note = "the VM's own delay", "the VM's own delay"
		case base != nil && base.ok:
			noise := us(base.spread)
			t := fmt.Sprintf("|err| ≤ VM noise %.0fµs", noise)
			p50 = p50.withTarget(t, math.Abs(p50.Error) <= noise)
			p99 = p99.withTarget(t, math.Abs(p99.Error) <= noise)
		case c.tbf == nil && base == nil:
			p50 = p50.withTarget("|err| ≤ 20µs", math.Abs(p50.Error) <= 20)
			p99 = p99.withTarget("|err| ≤ 100µs", math.Abs(p99.Error) <= 100)
		}
		out = append(out, p50, p99)
	}
	lossPct := 100 * float64(st.Sent-st.Received) / float64(st.Sent)
	if c.netem != nil && c.netem.Loss.Kind != spec.LossNone {
		want := 100 * engine.StationaryLoss(c.netem.Loss)
		if c.tbf != nil {
			// Offered above the rate, the tbf queue drops too: the
			// model's loss counts both.
			want = 100 * model.Loss
		}
		lo, hi := binom.Wilson(st.Sent-st.Received, st.Sent, z999)
		m := measured(lbl, path, "loss", "%", want, lossPct).withInterval(100*lo, 100*hi)
		if c.tbf == nil {
			m = m.withTarget("in 99.9 % CI", want >= 100*lo && want <= 100*hi)
		}
		out = append(out, m)
		if c.netem.Loss.Kind == spec.LossGE {
			out = append(out, measured(lbl, path, "loss burst length", "pkts", geMeanBurst(c.netem.Loss, 2000000, 7), st.MeanLossRun))
		}
	} else if c.tbf == nil {
		lo, hi := binom.Wilson(st.Sent-st.Received, st.Sent, z999)
		want := 0.0
		m := measured(lbl, path, "loss", "%", want, lossPct)
		if c.netem != nil && c.netem.Corrupt > 0 {
			// A probe with a flipped bit fails the IP or UDP checksum and
			// is dropped by the receiver's kernel.
			want = float64(c.netem.Corrupt)
			m = measured(lbl, path, "loss (corrupted)", "%", want, lossPct)
			m.Note = "corrupted probes fail the checksum at the receiver"
		}
		out = append(out, m.withInterval(100*lo, 100*hi).withTarget("in 99.9 % CI", want >= 100*lo && want <= 100*hi))
	}
	if c.netem != nil && c.netem.Duplicate > 0 && st.Received > 0 {
		lo, hi := binom.Wilson(st.Duplicates, st.Received, z999)
		want := float64(c.netem.Duplicate)
		m := measured(lbl, path, "duplicated", "%", want, 100*float64(st.Duplicates)/float64(st.Received))
		if c.netem.DuplicateCorr > 0 {
			// sch_netem's correlated draws (get_crandom) do not keep the
			// configured mean; the engine mirrors them, so its replay is
			// the model.
			want = 100 * model.Duplicated
			m = measured(lbl, path, "duplicated", "%", want, m.Realized)
			m.Note = fmt.Sprintf("correlated: the engine's replay; nominal %g %%", float64(c.netem.Duplicate))
		}
		out = append(out, m.withInterval(100*lo, 100*hi).withTarget("in 99.9 % CI", want >= 100*lo && want <= 100*hi))
	}
	if c.tbf != nil {
		rate := float64(c.tbf.Rate)
		m := measured(lbl, path, "rate", "Mbit/s", rate/1e6, st.RateBps/1e6)
		m = m.withTarget("±0.5 %", math.Abs(m.Error) <= 0.005*m.Configured)
		// A sender that could not offer more than the rate measures
		// itself, not the shaper.
		m.Note = units.Sprintf("offered %.4g Mbit/s", offered/1e6)
		if offered < rate {
			m.Note += " (below the rate: sender-limited)"
		}
		out = append(out, m)
		bound := float64(c.tbf.Burst) + rate/8/1000
		b := measured(lbl, path, "burst 1ms", "B", bound, float64(st.Burst1ms))
		if l := run.late; l != nil {
			// A burst above the bound with late writes is the release
			// loop catching up after a stall, not the engine's schedule.
			b.Note = units.Sprintf("%d of %d packets written ≥ 1 ms after their departure, the latest %.3g ms", l.Late1ms, l.Packets, float64(l.Max)/1e6)
		}
		// The kernel's tbf may send one packet past an empty bucket's
		// worth in a window (a packet straddles its edge): the bound
		// allows one MTU (the lab's 1500 bytes) above burst + rate × 1 ms.
		out = append(out, b.withTarget("≤ burst+rate×1ms+MTU", b.Realized <= bound+1500))
		if bulk != nil {
			g := measured(lbl, path, "tcp goodput", "Mbit/s", rate*1448/1500/1e6, bulk.Steady/1e6)
			g.Note = fmt.Sprintf("arrived unread (out of order) at the half %d kB, at the end %d kB", bulk.HeldHalf/1000, bulk.HeldEnd/1000)
			out = append(out, g, measured(lbl, path, "tcp wire rate", "Mbit/s", rate/1e6, bulk.Wire/1e6))
		}
	}
	if st.Received > 0 {
		out = append(out, measured(lbl, path, "reordered", "%", 100*model.Reordered, 100*float64(st.Reordered)/float64(st.Received)))
	}
	return out, nil
}

// compareWithKernel notes, on each proxy rate row, the kernel tbf's error
// on the same spec: the target is a proxy error no larger than
// the kernel's.
func compareWithKernel(rows []Measurement) {
	kernelErr := map[string]float64{}
	for _, m := range rows {
		if m.Path == PathKernel && m.NA == "" && m.Metric == "rate" && m.Configured != 0 {
			kernelErr[m.Label] = math.Abs(m.Error / m.Configured)
		}
	}
	for i, m := range rows {
		k, ok := kernelErr[m.Label]
		if !ok || m.Path == PathKernel || m.Metric != "rate" || m.Configured == 0 {
			continue
		}
		e := math.Abs(m.Error / m.Configured)
		verdict := "≤"
		if e > k {
			verdict = ">"
		}
		rows[i].Note = strings.TrimSpace(fmt.Sprintf("%s; |err| %.2f %% %s kernel %.2f %%", m.Note, 100*e, verdict, 100*k))
	}
}

// bulkOutcome is a TCP bulk transfer's result, from its goroutine.
type bulkOutcome struct {
	res bulkResult
	err error
}

// measureAQM sets an AQM case's probes against the AQM's target: their
// one-way delay less the netem delay (and, in the VM, its own delay) is
// the queueing delay the AQM left beside a TCP flow that fills the link.
func (c accuracyCase) measureAQM(path string, st probeStats, bulk *bulkResult, base *vmBaseline) []Measurement {
	lbl := label(c.text)
	var fixed time.Duration
	if c.netem != nil {
		fixed = c.netem.Latency
	}
	if base != nil && base.ok {
		fixed += base.p50
	}
	target := float64(c.aqmKind.target(c.aqm)) / 1e6
	q50 := float64(st.DelayP50-fixed) / 1e6
	q99 := float64(st.DelayP99-fixed) / 1e6
	m50 := measured(lbl, path, "queueing delay p50", "ms", target, q50)
	m99 := measured(lbl, path, "queueing delay p99", "ms", target, q99)
	m50 = m50.withTarget(c.aqmKind.want, q50 <= c.aqmKind.bound*target)
	m50.Note = c.aqmKind.note
	out := []Measurement{m50, m99}
	if bulk != nil && c.tbf != nil {
		rate := float64(c.tbf.Rate)
		g := measured(lbl, path, "tcp goodput beside", "Mbit/s", rate*1448/1500/1e6, bulk.Steady/1e6)
		g.Note = "the bulk flow under the AQM (rate × 1448/1500 is the link's full use)"
		out = append(out, g)
	}
	return out
}
