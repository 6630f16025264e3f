package bench

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/tuner"
	"github.com/wanlab/wanlab/units"
)

// sweepPoint is one row of a seed's table: the specs toward the client
// (the data direction: the server sends, as nginx and iperf did) and the
// server, the sysctls of each end, and the model's prediction.
type sweepPoint struct {
	label         string
	x             float64
	toClient      string
	clientSysctls map[string]string
	serverSysctls map[string]string
	streams       int
	dur           time.Duration
	// model returns the predicted rate (bit/s) from the run's result; ok
	// false when the model has nothing to say (no loss, no delay).
	model func(r bulkResult) (rate float64, ok bool, note string)
}

type sweepTable struct {
	Table
	points []sweepPoint
}

// mathis is the Mathis et al. bound for streams connections: each gets
// at most MSS/RTT × sqrt(3/2)/sqrt(p).
func mathis(streams int, mss units.Size, rtt time.Duration, p float64) float64 {
	return float64(streams) * float64(mss) * 8 / rtt.Seconds() * math.Sqrt(1.5) / math.Sqrt(p)
}

func sweepTables(quick bool, m tuner.WindowModel) []sweepTable {
	dur := func(full, q time.Duration) time.Duration {
		if quick {
			return q
		}
		return full
	}
	pick := func(full, q []float64) []float64 {
		if quick {
			return q
		}
		return full
	}
	var loss, delay, wmem, rmem sweepTable
	loss.Table = Table{Name: "loss", Title: "Seed 004: throughput against loss (5 streams, RTT 10 ms)", XLabel: "loss (%)",
		Model: "Mathis bound: 5 × MSS/RTT × sqrt(3/2)/sqrt(p), MSS 1448, RTT 10 ms"}
	for _, p := range pick([]float64{0, 0.5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, []float64{0, 1, 5}) {
		spec := "delay 10ms"
		if p > 0 {
			spec += fmt.Sprintf(" loss %g%%", p)
		}
		loss.points = append(loss.points, sweepPoint{label: fmt.Sprintf("loss %g%%", p), x: p, toClient: spec,
			streams: 5, dur: dur(8*time.Second, 1500*time.Millisecond),
			model: func(bulkResult) (float64, bool, string) {
				if p == 0 {
					return 0, false, ""
				}
				return mathis(5, tuner.DefaultMSS, 10*time.Millisecond, p/100), true, ""
			}})
	}
	const seed004Rmem = 256 << 10
	delay.Table = Table{Name: "delay", Title: "Seed 004: throughput against delay (5 streams, ±10 % jitter, client tcp_rmem max 256 KiB)", XLabel: "delay (ms)",
		Model: "window/RTT: 5 × the tuner's window for tcp_rmem max 256 KiB at the payload ratio the receiver learned / RTT"}
	for _, d := range pick([]float64{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100}, []float64{10, 50, 100}) {
		spec := ""
		if d > 0 {
			spec = fmt.Sprintf("delay %gms %gus", d, d*100)
		}
		rtt := time.Duration(d * float64(time.Millisecond))
		delay.points = append(delay.points, sweepPoint{label: fmt.Sprintf("delay %gms", d), x: d, toClient: spec,
			clientSysctls: map[string]string{"net.ipv4.tcp_rmem": fmt.Sprintf("4096 131072 %d", seed004Rmem)},
			streams:       5, dur: dur(8*time.Second, 1500*time.Millisecond),
			model: func(r bulkResult) (float64, bool, string) {
				if d == 0 {
					return 0, false, ""
				}
				mm, note := learned(m, r)
				return 5 * float64(tuner.RateFor(mm.Window(seed004Rmem), rtt)), true, note
			}})
	}
	wmem.Table = Table{Name: "seed000", Title: "Seed 000: download speed with the server's tcp_wmem 4096 4096 4096", XLabel: "RTT (ms)",
		Model: "one size-goal skb per RTT (tuner.SendWindow(4096) / RTT)"}
	for _, d := range pick([]float64{0, 10, 100, 200}, []float64{10, 100}) {
		spec := ""
		if d > 0 {
			spec = fmt.Sprintf("delay %gms", d)
		}
		rtt := time.Duration(d * float64(time.Millisecond))
		wmem.points = append(wmem.points, sweepPoint{label: fmt.Sprintf("RTT %gms", d), x: d, toClient: spec,
			serverSysctls: map[string]string{"net.ipv4.tcp_wmem": "4096 4096 4096"},
			streams:       1, dur: dur(10*time.Second, 2*time.Second),
			model: func(bulkResult) (float64, bool, string) {
				if d == 0 {
					return 0, false, ""
				}
				return float64(tuner.RateFor(tuner.SendWindow(4096, 0), rtt)), true, ""
			}})
	}
	rmem.Table = Table{Name: "seed001", Title: "Seed 001: client tcp_rmem limited against tuned at RTT 35 ms", XLabel: "tcp_rmem max (MiB)",
		Model: "the tuner's window for tcp_rmem max at the payload ratio the receiver learned / RTT"}
	for _, c := range []struct {
		label string
		max   units.Size
		rmem  string
	}{{"limited (1 MiB, seed 001 scaled)", 1 << 20, "4096 131072 1048576"}, {"tuned (seed 001's fix)", 16 << 20, "4096 2621440 16777216"}} {
		rmem.points = append(rmem.points, sweepPoint{label: c.label, x: float64(c.max) / (1 << 20), toClient: "delay 35ms",
			clientSysctls: map[string]string{"net.ipv4.tcp_rmem": c.rmem},
			streams:       1, dur: dur(8*time.Second, 3*time.Second),
			model: func(r bulkResult) (float64, bool, string) {
				mm, note := learned(m, r)
				pred := float64(tuner.RateFor(mm.Window(c.max), 35*time.Millisecond))
				if r.Steady < pred/2 {
					note += "; the path, not the window, limits this row"
				}
				return pred, true, note
			}})
	}
	return []sweepTable{loss, delay, wmem, rmem}
}

// Sweep reproduces the seeds' throughput tables through the userspace
// proxy (or, with cfg.Kernel, the kernel's qdiscs) beside their models.
func Sweep(ctx context.Context, cfg Config) (*Report, error) {
	began, load := time.Now(), loadAverage()
	snap, err := tuner.ReadSnapshot(tuner.Host, "")
	if err != nil {
		return nil, err
	}
	model := tuner.ModelFor(snap)
	tables := sweepTables(cfg.Quick, model)
	e, err := newEnv(ctx, cfg, lab.Config{})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	pname := PathProxyOffload
	if cfg.Kernel {
		pname = PathKernel
	}
	p, err := e.openPath(ctx, pname)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	rep := &Report{Bench: "sweep", Date: began.UTC(), Quick: cfg.Quick, Kernel: host.KernelRelease(), Command: cfg.Command}
	total := 0
	for _, t := range tables {
		total += len(t.points)
	}
	step := 0
	for _, t := range tables {
		for _, pt := range t.points {
			cfg.progress(step, total, t.Name+": "+pt.label)
			step++
			m, err := e.sweepPoint(ctx, p, pt)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", t.Name, pt.label, err)
			}
			t.Rows = append(t.Rows, m)
		}
		rep.Tables = append(rep.Tables, t.Table)
	}
	cfg.progress(total, total, "done")
	rep.Notes = append(rep.Notes,
		"realized = receiver goodput over the second half of each run (after slow start), payload bits; congestion control cubic (the seeds' default)",
		"impairment on the router's egress toward the client (the data direction; the server sends, as nginx and iperf did), path "+pname)
	return rep, rep.finish(began, load)
}

// sweepPoint sets a point's sysctls and spec, runs the transfer and puts
// everything back.
func (e *env) sweepPoint(ctx context.Context, p path, pt sweepPoint) (Measurement, error) {
	restore, err := e.setSysctls(pt.clientSysctls, pt.serverSysctls)
	if err != nil {
		return Measurement{}, err
	}
	defer restore()
	if err := p.Set("", pt.toClient); err != nil {
		if why := naReason(err); why != "" {
			m := notAvailable(pt.label, p.Name(), why)
			m.X = pt.x
			return m, nil
		}
		return Measurement{}, err
	}
	defer p.Set("", "")
	r, err := tcpBulk(ctx, e.lab, true, pt.streams, pt.dur, "cubic")
	if err != nil {
		return Measurement{}, err
	}
	var m Measurement
	rate, ok, note := pt.model(r)
	if ok {
		m = measured(pt.label, p.Name(), "throughput", "Mbit/s", rate/1e6, r.Steady/1e6)
	} else {
		m = realizedOnly(pt.label, p.Name(), "throughput", "Mbit/s", r.Steady/1e6)
	}
	m.X = pt.x
	m.Note = note
	return m, nil
}

// setSysctls writes per-namespace sysctls on the client and server and
// returns a function that writes the old values back.
func (e *env) setSysctls(client, server map[string]string) (func(), error) {
	old := map[string]map[string]string{}
	for ns, kv := range map[string]map[string]string{e.lab.Client.NS: client, e.lab.Server.NS: server} {
		if len(kv) == 0 {
			continue
		}
		old[ns] = map[string]string{}
		for k := range kv {
			v, err := lab.ReadSysctl(ns, k)
			if err != nil {
				return func() {}, err
			}
			old[ns][k] = strings.Join(strings.Fields(v), " ")
		}
		if err := lab.WriteSysctls(ns, kv); err != nil {
			return func() {}, err
		}
	}
	return func() {
		for ns, kv := range old {
			_ = lab.WriteSysctls(ns, kv)
		}
	}, nil
}

// learned is the window model with the payload/truesize ratio the
// receiving socket learned on this path (what `tune show` cannot know).
func learned(m tuner.WindowModel, r bulkResult) (tuner.WindowModel, string) {
	if ratio := r.Receiver.WindowRatio(r.ReceiverEff.RcvBuf); ratio > 0 {
		m.PayloadRatio = ratio
		return m, fmt.Sprintf("learned payload ratio %.2f", ratio)
	}
	return m, "kernel default payload ratio " + fmt.Sprintf("%.2f", m.Ratio())
}
