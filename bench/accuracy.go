package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/proxy/engine"
	"github.com/wanlab/wanlab/proxy/spec"
	"github.com/wanlab/wanlab/units"
)

// AccuracyGrid is the full grid of issue 7: delays with and without
// jitter in every distribution, random and Gilbert-Elliott loss, tbf
// rates with small and large buckets, and combinations (seed 002's tree
// among them). The empty spec first measures each path's own delay.
func AccuracyGrid() []string {
	g := []string{""}
	for _, d := range []string{"1ms", "10ms", "100ms"} {
		j := map[string]string{"1ms": "100us", "10ms": "1ms", "100ms": "10ms"}[d]
		g = append(g, "delay "+d, "delay "+d+" "+j)
		for _, dist := range []string{"normal", "pareto", "paretonormal"} {
			g = append(g, "delay "+d+" "+j+" distribution "+dist)
		}
	}
	g = append(g, "loss 0.1%", "loss 1%", "loss 10%", "loss gemodel 1% 30%")
	for _, r := range []units.Rate{units.Mbit, 10 * units.Mbit, 100 * units.Mbit, 1000 * units.Mbit} {
		g = append(g, tbfSpec(r, 4*units.KiB), tbfSpec(r, max(32*units.KiB, units.Size(r.BytesPerSecond()/100))))
	}
	return append(g,
		"delay 10ms loss 1%",
		"delay 100ms | tbf rate 50mbit burst 50kb limit 500kb",
		"delay 20ms 2ms distribution normal loss 0.5% | tbf rate 100mbit burst 64kb limit 1mb")
}

// QuickAccuracyGrid is the CI grid: one case of each kind.
func QuickAccuracyGrid() []string {
	return []string{"", "delay 10ms", "delay 10ms 1ms distribution normal", "loss 1%",
		"loss gemodel 1% 30%", tbfSpec(10*units.Mbit, 4*units.KiB), tbfSpec(100*units.Mbit, 64*units.KiB)}
}

// tbfSpec is a tbf stage of rate with a bucket of burst and a queue of
// burst plus 20 ms at rate.
func tbfSpec(r units.Rate, burst units.Size) string {
	limit := max(16*units.KiB, burst+units.Size(r.BytesPerSecond()/50))
	return fmt.Sprintf("tbf rate %s burst %db limit %db", rateWord(r), burst, limit)
}

func rateWord(r units.Rate) string {
	if r%units.Mbit == 0 {
		return fmt.Sprintf("%dmbit", r/units.Mbit)
	}
	return fmt.Sprintf("%dkbit", r/units.Kbit)
}

// ReadSpecs reads one spec per line; blank lines and lines starting with
// '#' are skipped.
func ReadSpecs(r io.Reader, name string) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if t == "none" || t == `""` {
			t = ""
		}
		if _, err := spec.Parse(t); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no specs", name)
	}
	return out, nil
}

// accuracyCase is a spec with the traffic that measures it.
type accuracyCase struct {
	text  string
	spec  *spec.Spec
	netem *spec.Netem
	tbf   *spec.TBF
	probe probeConfig
	bulk  time.Duration // TCP bulk after the probes (rate cases)
}

func newCase(text string, quick bool) (accuracyCase, error) {
	s, err := spec.Parse(text)
	if err != nil {
		return accuracyCase{}, err
	}
	c := accuracyCase{text: text, spec: s}
	for _, st := range s.Stages {
		switch st := st.(type) {
		case *spec.Netem:
			if c.netem == nil {
				c.netem = st
			}
		case *spec.TBF:
			if c.tbf == nil || st.Rate < c.tbf.Rate {
				c.tbf = st
			}
		}
	}
	secs := 5.0
	if quick {
		secs = 1
	}
	var maxDelay time.Duration
	if c.netem != nil {
		maxDelay = c.netem.Latency + 10*c.netem.Jitter
	}
	switch {
	case c.tbf != nil:
		// Offer 50 % more than the rate in 1400-byte packets; the
		// bucket empties after burst / (0.5 × rate), and the long-run
		// rate is measured from then on.
		size := 1400
		bps := c.tbf.Rate.BytesPerSecond()
		pps := 1.5 * bps / float64(size)
		empty := time.Duration(float64(c.tbf.Burst) / (0.5 * bps) * float64(time.Second))
		if quick {
			secs = 1.5
		} else {
			secs = 4
		}
		queue := time.Duration(float64(c.tbf.QueueLimit()) / c.tbf.Rate.BytesPerSecond() * float64(time.Second))
		c.probe = probeConfig{PPS: pps, Count: int(pps * (secs + empty.Seconds())), IPLen: size,
			Steady: empty + empty/5 + 20*time.Millisecond + maxDelay,
			Drain:  200*time.Millisecond + queue + maxDelay}
		// TCP refills the bucket whenever it backs off; give it 20
		// bucketfuls of time so the bursts weigh little in the figure.
		c.bulk = min(10*time.Second, max(3*time.Second, 20*time.Duration(float64(c.tbf.Burst)/bps*float64(time.Second))))
		if quick {
			c.bulk = time.Second
		}
	case c.netem != nil && c.netem.Loss.Kind != spec.LossNone:
		pps := 5000.0
		c.probe = probeConfig{PPS: pps, Count: int(pps * secs * 2), IPLen: 100, Drain: 200*time.Millisecond + maxDelay}
	default:
		pps := 1000.0
		if quick {
			secs = 0.8
		}
		c.probe = probeConfig{PPS: pps, Count: int(pps * secs), IPLen: 200, Drain: 200*time.Millisecond + maxDelay}
	}
	return c, nil
}

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
	rep := &Report{Bench: "accuracy", Date: began.UTC(), Quick: cfg.Quick, Kernel: kernelRelease(), Command: cfg.Command}
	tables := map[string]*Table{
		"delay": {Name: "delay", Title: "Delay (one-way, UDP probes)", Model: "the spec's delay distribution on a virtual clock (engine.Simulate, same packet rate)"},
		"loss":  {Name: "loss", Title: "Loss (UDP probes; realized with its 99.9 % Wilson interval)", Model: "the loss model's stationary loss; gemodel burst length from the chain"},
		"rate":  {Name: "rate", Title: "Rate (UDP offered at 1.5 × rate, IP bytes, once the bucket is empty; TCP bulk goodput)", Model: "tbf rate; 1 ms burst bound = burst + rate × 1 ms; TCP goodput = rate × 1448/1500"},
		"other": {Name: "other", Title: "Reordering and duplicates", Model: "the same traffic through the spec on a virtual clock (engine.Simulate)"},
	}
	paths := []string{PathProxyOffload, PathProxyWater, PathKernel}
	total := len(paths) * len(cases)
	step := 0
	var runID uint64 = uint64(began.UnixNano())
	for _, pname := range paths {
		p, err := e.openPath(ctx, pname)
		if err != nil {
			return nil, err
		}
		for _, c := range cases {
			cfg.progress(step, total, pname+": "+label(c.text))
			step++
			if err := p.Set(c.text, ""); err != nil {
				if why := naReason(err); why != "" {
					tables[c.table()].Rows = append(tables[c.table()].Rows, notAvailable(label(c.text), pname, why))
					continue
				}
				p.Close()
				return nil, fmt.Errorf("%s: %s: %w", pname, label(c.text), err)
			}
			runID++
			c.probe.RunID = runID
			arr, offered, err := udpProbe(ctx, e.lab, c.probe)
			if err != nil {
				p.Close()
				return nil, fmt.Errorf("%s: %s: %w", pname, label(c.text), err)
			}
			st := analyze(arr, c.probe.Count, c.probe.Steady)
			var bulk *bulkResult
			if c.bulk > 0 {
				b, err := tcpBulk(ctx, e.lab, false, 1, c.bulk, "")
				if err != nil {
					p.Close()
					return nil, fmt.Errorf("%s: %s: tcp: %w", pname, label(c.text), err)
				}
				bulk = &b
			}
			ms, err := c.measure(pname, st, bulk, offered)
			if err != nil {
				p.Close()
				return nil, err
			}
			for _, m := range ms {
				t := tables[m.Metric]
				if t == nil {
					t = tables[metricTable(m.Metric)]
				}
				t.Rows = append(t.Rows, m)
			}
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
	for _, k := range []string{"delay", "loss", "rate", "other"} {
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

func label(text string) string {
	if text == "" {
		return "(none)"
	}
	return text
}

func (c accuracyCase) table() string {
	switch {
	case c.tbf != nil:
		return "rate"
	case c.netem != nil && c.netem.Loss.Kind != spec.LossNone:
		return "loss"
	}
	return "delay"
}

func metricTable(metric string) string {
	switch {
	case strings.HasPrefix(metric, "delay"):
		return "delay"
	case strings.HasPrefix(metric, "loss"):
		return "loss"
	case strings.HasPrefix(metric, "rate"), strings.HasPrefix(metric, "burst"), strings.HasPrefix(metric, "tcp"):
		return "rate"
	}
	return "other"
}

// measure turns a probe run into measurements against the spec's model.
func (c accuracyCase) measure(path string, st probeStats, bulk *bulkResult, offered float64) ([]Measurement, error) {
	lbl := label(c.text)
	if st.Received == 0 {
		return nil, fmt.Errorf("%s: %s: no probe arrived", path, lbl)
	}
	sim, err := engine.Simulate(engine.SimConfig{Spec: c.spec, Packets: min(c.probe.Count, 200000), PPS: c.probe.PPS, Size: c.probe.IPLen, Seed: 1})
	if err != nil {
		return nil, fmt.Errorf("%s: model: %w", lbl, err)
	}
	var out []Measurement
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	if c.tbf == nil || (c.netem != nil && c.netem.Latency > 0) {
		p50 := measured(lbl, path, "delay p50", "µs", sim.Delay.P50*1e3, us(st.DelayP50))
		p99 := measured(lbl, path, "delay p99", "µs", sim.Delay.P99*1e3, us(st.DelayP99))
		if c.tbf == nil {
			p50 = p50.withTarget("|err| ≤ 20µs", math.Abs(p50.Error) <= 20)
			p99 = p99.withTarget("|err| ≤ 100µs", math.Abs(p99.Error) <= 100)
		}
		out = append(out, p50, p99)
	}
	lossPct := 100 * float64(st.Sent-st.Received) / float64(st.Sent)
	if c.netem != nil && c.netem.Loss.Kind != spec.LossNone {
		want := 100 * engine.StationaryLoss(c.netem.Loss)
		lo, hi := wilson(st.Sent-st.Received, st.Sent, z999)
		m := measured(lbl, path, "loss", "%", want, lossPct).withInterval(100*lo, 100*hi)
		if c.tbf == nil {
			m = m.withTarget("in 99.9 % CI", want >= 100*lo && want <= 100*hi)
		}
		out = append(out, m)
		if c.netem.Loss.Kind == spec.LossGE {
			out = append(out, measured(lbl, path, "loss burst length", "pkts", geMeanBurst(c.netem.Loss, 2000000, 7), st.MeanLossRun))
		}
	} else if c.tbf == nil {
		lo, hi := wilson(st.Sent-st.Received, st.Sent, z999)
		out = append(out, measured(lbl, path, "loss", "%", 0, lossPct).withInterval(100*lo, 100*hi).
			withTarget("in 99.9 % CI", lo == 0))
	}
	if c.tbf != nil {
		rate := float64(c.tbf.Rate)
		m := measured(lbl, path, "rate", "Mbit/s", rate/1e6, st.RateBps/1e6)
		m = m.withTarget("±0.5 %", math.Abs(m.Error) <= 0.005*m.Configured)
		// A sender that could not offer more than the rate measures
		// itself, not the shaper.
		m.Note = fmt.Sprintf("offered %.4g Mbit/s", offered/1e6)
		if offered < rate {
			m.Note += " (below the rate: sender-limited)"
		}
		out = append(out, m)
		bound := float64(c.tbf.Burst) + rate/8/1000
		b := measured(lbl, path, "burst 1ms", "B", bound, float64(st.Burst1ms))
		out = append(out, b.withTarget("≤ burst+rate×1ms", b.Realized <= bound))
		if bulk != nil {
			out = append(out, measured(lbl, path, "tcp goodput", "Mbit/s", rate*1448/1500/1e6, bulk.Steady/1e6))
		}
	}
	if st.Received > 0 {
		want := 0.0
		if sim.PacketsOut > 0 {
			want = 100 * float64(sim.Reordered) / float64(sim.PacketsOut)
		}
		out = append(out, measured(lbl, path, "reordered", "%", want, 100*float64(st.Reordered)/float64(st.Received)))
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
