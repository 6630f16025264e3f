package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/lab/vm"
	"github.com/wanlab/wanlab/lab/vm/pair"
	"github.com/wanlab/wanlab/units"
)

// guestBound is the share of a core above which a VM's engine counts as
// saturated: an emulated guest's vCPU thread runs flat out.
const guestBound = 0.8

// ForwardVMs measures forwarding between two VMs (pair.Boot: the
// client and the server VM on TAPs of the router namespace): their boot
// time, then in alternation through kernel routing and through the proxy
// (offload backend) with an empty spec, the round trip (ping, median) and
// one TCP download's throughput, with the CPU time of each VM's engine
// (qemu, or linux.uml with its processes) and of the proxy, and says which
// of them set the pace.
func ForwardVMs(ctx context.Context, cfg Config) (_ *Report, err error) {
	began, load := time.Now(), loadAverage()
	cfg.progress(0, 1, "booting the client and the server VM")
	v, err := pair.Boot(ctx, pair.Config{Binary: cfg.VMBinary, Engine: cfg.VMEngine})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, v.Close()) }()
	e := &env{lab: v.Lab, stateDir: filepath.Join(StateDir, v.Lab.ID), cfg: cfg}
	if err := hostfile.Dir(e.stateDir); err != nil {
		return nil, fmt.Errorf("bench state: %w", err)
	}
	defer os.RemoveAll(e.stateDir)
	srv, stopServer, err := v.Serve(ctx, false)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stopServer()) }()

	rounds, size, pings := 3, 128*units.MiB, 20
	if cfg.Quick {
		rounds, size, pings = 1, 32*units.MiB, 10
	}
	paths := []string{PathRouting, PathProxyOffload}
	type sample struct{ rtt, mbit, cpuClient, cpuServer, cpuProxy float64 }
	got := map[string][]sample{}
	step, total := 0, rounds*len(paths)
	for round := range rounds {
		for _, pname := range paths {
			cfg.progress(step, total, fmt.Sprintf("round %d/%d %s", round+1, rounds, pname))
			step++
			p, err := e.openPath(ctx, pname)
			if err != nil {
				return nil, err
			}
			s, err := func() (sample, error) {
				var s sample
				rtt, err := v.Ping(ctx, pings)
				if err != nil {
					return s, err
				}
				s.rtt = float64(rtt) / float64(time.Millisecond)
				// The CPU time of each VM's engine and of the proxy.
				cpu := func() (client, server, proxyCPU time.Duration, err error) {
					if client, err = v.Client.EngineCPU(); err != nil {
						return
					}
					if server, err = v.Server.EngineCPU(); err != nil {
						return
					}
					proxyCPU, _, _, err = p.Usage()
					return
				}
				c0, s0, p0, err := cpu()
				if err != nil {
					return s, err
				}
				t0 := time.Now()
				dl, err := v.Download(ctx, srv, size)
				if err != nil {
					return s, err
				}
				wall := time.Since(t0)
				c1, s1, p1, err := cpu()
				if err != nil {
					return s, err
				}
				s.mbit = float64(dl.Transfer) / 1e6
				s.cpuClient = float64(c1-c0) / float64(wall)
				s.cpuServer = float64(s1-s0) / float64(wall)
				s.cpuProxy = float64(p1-p0) / float64(wall)
				return s, nil
			}()
			if cerr := p.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", pname, err)
			}
			got[pname] = append(got[pname], s)
		}
	}
	cfg.progress(total, total, "done")

	accel := string(v.Client.Engine)
	boot := Table{Name: "vm-boot", Title: "VM boot (the engine's start to the agent's hello; both VMs in parallel)", Model: "-"}
	for _, g := range []struct {
		name string
		v    *vm.VM
	}{{"client vm", v.Client}, {"server vm", v.Server}} {
		m := realizedOnly("boot", g.name, "boot time", "s", g.v.BootTime.Seconds())
		m.Note = g.v.Hello.Release + " under " + accel
		boot.Rows = append(boot.Rows, m)
	}
	fwd := Table{Name: "forward-vms", Title: "VM to VM with an empty spec (client VM → router namespace → server VM), under " + accel,
		Model: "kernel routing measured in the same run (ratio = path / kernel routing)"}
	use := Table{Name: "usage-vms", Title: "CPU during the downloads (share of one core)", Model: "-"}
	col := func(pname string, f func(sample) float64) []float64 {
		var vs []float64
		for _, s := range got[pname] {
			vs = append(vs, f(s))
		}
		return vs
	}
	for _, w := range []struct {
		label, metric, unit string
		f                   func(sample) float64
	}{
		{"ping", "rtt p50", "ms", func(s sample) float64 { return s.rtt }},
		{"tcp 1 stream", "throughput", "Mbit/s", func(s sample) float64 { return s.mbit }},
	} {
		ref := mean(col(PathRouting, w.f))
		for _, pname := range paths {
			vs := col(pname, w.f)
			var m Measurement
			if pname == PathRouting {
				m = realizedOnly(w.label, pname, w.metric, w.unit, mean(vs))
			} else {
				m = measured(w.label, pname, w.metric, w.unit, ref, mean(vs))
			}
			if len(vs) > 1 {
				m = m.withInterval(slices.Min(vs), slices.Max(vs))
			}
			fwd.Rows = append(fwd.Rows, m)
		}
	}
	for _, pname := range paths {
		for _, u := range []struct {
			who string
			f   func(sample) float64
		}{{"client vm", func(s sample) float64 { return 100 * s.cpuClient }},
			{"server vm", func(s sample) float64 { return 100 * s.cpuServer }},
			{"proxy", func(s sample) float64 { return 100 * s.cpuProxy }}} {
			if u.who == "proxy" && pname == PathRouting {
				continue
			}
			m := realizedOnly(u.who, pname, "cpu", "% of a core", mean(col(pname, u.f)))
			if u.who == "proxy" && len(cfg.ProxyExec) == 0 {
				m.Note = "whole process: proxy in-process plus the bench"
			}
			use.Rows = append(use.Rows, m)
		}
	}
	rep := &Report{Bench: "forward", Date: began.UTC(), Quick: cfg.Quick, Kernel: host.KernelRelease(), Command: cfg.Command,
		Tables: []Table{boot, fwd, use}}
	rep.Notes = append(rep.Notes,
		fmt.Sprintf("engine %s; guests %s with 1 vCPU each; %d round(s) of %d pings and one %s download per path, alternating; realized is the mean, the interval min..max",
			accel, v.Client.Hello.Release, rounds, pings, size.Human()),
		bottleneck(mean(col(PathRouting, func(s sample) float64 { return s.mbit })), mean(col(PathProxyOffload, func(s sample) float64 { return s.mbit })),
			mean(col(PathProxyOffload, func(s sample) float64 { return max(s.cpuClient, s.cpuServer) })),
			mean(col(PathRouting, func(s sample) float64 { return max(s.cpuClient, s.cpuServer) })), accel))
	return rep, rep.finish(began, load)
}

// bottleneck says what set the pace of VM-to-VM throughput: the guests'
// CPU when a VM's engine ran near a whole core on both paths and the proxy
// kept up with kernel routing, else the proxy when it fell behind.
func bottleneck(routing, proxy, guestProxy, guestRouting float64, accel string) string {
	ratio := proxy / routing
	switch {
	case routing == 0:
		return "no throughput measured"
	case guestRouting >= guestBound && ratio >= 0.85:
		return fmt.Sprintf("bottleneck: the guests' CPU, not the proxy: a VM's engine ran %.0f %% of a core through kernel routing and %.0f %% through the proxy (%s), and the proxy carried %.0f %% of what kernel routing did",
			100*guestRouting, 100*guestProxy, accel, 100*ratio)
	case ratio < 0.85 && guestProxy < guestBound:
		return fmt.Sprintf("bottleneck: the proxy: %.0f %% of kernel routing while no VM's engine was saturated (%.0f %% of a core at most)", 100*ratio, 100*guestProxy)
	default:
		return fmt.Sprintf("bottleneck: the guests' CPU and the machine's two cores together: a VM's engine ran %.0f %% of a core through kernel routing, %.0f %% through the proxy, which carried %.0f %% of kernel routing (the engines and the proxy share the cores)",
			100*guestRouting, 100*guestProxy, 100*ratio)
	}
}
