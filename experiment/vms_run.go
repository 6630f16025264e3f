package experiment

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/capture"
	"github.com/wanlab/wanlab/lab/vm"
	"github.com/wanlab/wanlab/tc/kernel"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/tuner"
)

// HostInfo says what ran one host of the experiment.
type HostInfo struct {
	// Kernel is the release (uname -r) of the kernel the host ran on.
	Kernel string `json:"kernel"`
	// VM is true for a guest (qemu or UML), false for a namespace of this
	// host.
	VM bool `json:"vm"`
	// Engine is what ran the VM: "kvm", "uml" or "tcg".
	Engine string `json:"engine,omitempty"`
	// Accel is the former name of Engine, kept for readers of older
	// JSON: the same value.
	Accel string `json:"accel,omitempty"`
	// Boot is the VM's boot time, the engine's start to the agent's hello.
	Boot time.Duration `json:"boot_ns,omitempty"`
}

func (h HostInfo) String() string {
	if !h.VM {
		return h.Kernel + " (namespace of this host)"
	}
	return fmt.Sprintf("%s (VM, %s, booted in %.1f s)", h.Kernel, h.Engine, h.Boot.Seconds())
}

// hostKernel is this host's kernel release.
func hostKernel() string {
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	return unix.ByteSliceToString(uts.Release[:])
}

func vmHost(g *vm.VM) HostInfo {
	return HostInfo{Kernel: g.Hello.Release, VM: true, Engine: string(g.Engine), Accel: string(g.Engine), Boot: g.BootTime}
}

// runVMs is Run with VM end hosts: it boots them, runs, stops them.
func runVMs(ctx context.Context, cfg Config) (_ *Result, err error) {
	v, err := BootVMs(ctx, VMsConfig{Binary: cfg.VMBinary, Engine: vm.Engine(cfg.VMEngine), Log: cfg.Log})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, v.Close()) }()
	return RunOn(ctx, cfg, v)
}

// RunOn performs one experiment between the two VMs of v: the server VM
// serves, the client VM downloads (or runs the request/response load),
// the router namespace impairs with the proxy between the two TAPs or, with
// Kernel, with qdiscs (on the router's TAPs where this host's kernel has
// the spec's qdiscs, otherwise on the sending VM's NIC), and the TAPs are
// captured. What it changed in the guests (sysctls, qdiscs, the server) is
// undone before it returns, so the next RunOn starts from the same VMs.
func RunOn(ctx context.Context, cfg Config, v *VMs) (_ *Result, err error) {
	cfg.VMs = true
	cfg = cfg.withDefaults()
	specs, err := cfg.Specs()
	if err != nil {
		return nil, err
	}
	if err := cfg.CheckSysctls(); err != nil {
		return nil, err
	}
	l := v.Lab
	res := &Result{Config: cfg, Started: time.Now(), Specs: map[string]string{}, Captures: map[string]*CaptureResult{}, LabID: l.ID,
		Hosts: map[string]HostInfo{
			lab.RoleClient: vmHost(v.Client), lab.RoleServer: vmHost(v.Server),
			lab.RoleRouter: {Kernel: hostKernel()},
		}}
	for dir, s := range specs {
		res.Specs[dir] = s.String()
	}
	if res.Out, err = outDir(cfg.Out, res.Started, cfg.Force); err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(cfg.Log, format+"\n", args...) }
	logf("lab %s: client VM on %s, router %s, server VM on %s (%s)", l.ID, l.Router.ClientLink, l.Router.NS, l.Router.ServerLink, v.Client.Hello.Release)
	// Cleanup of the guests runs on its own context: a cancelled run must
	// still leave the VMs as it found them.
	cleanCtx := context.WithoutCancel(ctx)

	for _, g := range []struct {
		vm *vm.VM
		kv map[string]string
	}{{v.Client, cfg.ClientSysctls}, {v.Server, cfg.ServerSysctls}} {
		before, err := guestSysctls(ctx, g.vm, g.kv)
		if err != nil {
			return nil, fmt.Errorf("sysctls: %w", err)
		}
		defer func() {
			if rerr := restoreSysctls(cleanCtx, g.vm, before); rerr != nil {
				err = errors.Join(err, fmt.Errorf("restore sysctls: %w", rerr))
			}
		}()
	}

	if cfg.NoOffload {
		// On the router's TAPs (the guests' virtio offloads stay: busybox
		// has no ethtool), back on when the experiment ends.
		for _, tap := range []string{l.Router.ClientLink, l.Router.ServerLink} {
			for _, o := range []lab.Offload{lab.OffloadTSO, lab.OffloadGSO, lab.OffloadGRO} {
				if err := lab.SetOffload(l.Router.Handle, tap, o, false); err != nil {
					return nil, err
				}
				defer func() {
					if oerr := lab.SetOffload(l.Router.Handle, tap, o, true); oerr != nil {
						err = errors.Join(err, oerr)
					}
				}()
			}
		}
	}

	srvAddr, cliAddr := l.Server.IPv4, l.Client.IPv4
	if cfg.IPv6 {
		srvAddr, cliAddr = l.Server.IPv6, l.Client.IPv6
	}
	srv, err := startGuestServer(ctx, v.Server, GuestServe{Listen: netip.AddrPortFrom(srvAddr, 80), Sockopt: cfg.Server,
		Nagle: cfg.Requests > 0 && !cfg.NoNagle, ThinkTime: cfg.ThinkTime})
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := srv.Stop(cleanCtx); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop the server: %w", serr))
		}
	}()
	res.Server = srv.addr
	res.Client = netip.AddrPortFrom(cliAddr, 0)

	var imp impairment
	switch {
	case cfg.Kernel:
		imp, err = startVMKernel(ctx, v, specs)
	case !needsProxy(cfg, specs):
		imp = routing{}
	default:
		imp, err = startProxy(ctx, l, cfg, specs, res.Out)
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if imp != nil {
			_, serr := imp.Stop()
			err = errors.Join(err, serr)
		}
	}()
	res.Mode = imp.Mode()
	logf("impairment: %s", imp.Describe())

	if cfg.Ping > 0 {
		if res.Ping, err = guestPing(ctx, v.Client, srvAddr, cfg.Ping); err != nil {
			return nil, err
		}
		logf("ping %s: %d × average %v", srvAddr, cfg.Ping, res.Ping.Round(10*time.Microsecond))
	}

	caps := map[string]*capture.Capture{}
	defer func() {
		for _, c := range caps {
			_, _ = c.Stop()
		}
	}()
	for _, side := range []struct{ name, tap string }{{SideClient, l.Router.ClientLink}, {SideServer, l.Router.ServerLink}} {
		path := filepath.Join(res.Out, side.name+".pcapng")
		c, err := capture.StartFile(l.Router.Handle, side.tap, path, capture.Config{
			Snaplen: cfg.Snaplen, MaxBytes: cfg.MaxCapture, Comment: "TAP " + side.tap + " of the " + side.name + " VM in " + l.Router.NS, Replace: cfg.Force,
		})
		if err != nil {
			return nil, err
		}
		caps[side.name] = c
		res.Captures[side.name] = &CaptureResult{Path: path}
	}

	tctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if cfg.Requests > 0 {
		logf("request/response in the client VM: %d requests over %d connections to %s", cfg.Requests, cfg.Concurrency, srv.addr)
		rr, err := guestRR(tctx, v.Client, GuestRR{Server: srv.addr, Requests: cfg.Requests, Concurrency: cfg.Concurrency,
			BodySize: cfg.RRBody, Sockopt: cfg.Client})
		if err != nil {
			return nil, err
		}
		res.RR = rr
	} else {
		logf("download in the client VM: %s from http://%s/gen/%d", cfg.Size.Human(), srv.addr, uint64(cfg.Size))
		dl, err := guestDownload(tctx, v.Client, GuestDownload{Server: srv.addr, Size: cfg.Size, Sockopt: cfg.Client, ProgressEvery: cfg.ProgressEvery}, cfg.Progress)
		if err != nil {
			return nil, err
		}
		res.Download = dl
		res.Client = dl.Local
	}

	serverAnalysis, err := stopAndAnalyze(res, caps, &imp)
	if err != nil {
		return nil, err
	}
	if res.Download != nil {
		res.Tuning, err = planTuningWith(func(role string) (*tuner.Snapshot, error) {
			g := v.Client
			if role == lab.RoleServer {
				g = v.Server
			}
			s, err := guestSnapshot(ctx, g)
			if err != nil {
				return nil, fmt.Errorf("tuner snapshot of the %s VM: %w", role, err)
			}
			return s, nil
		}, res, serverAnalysis)
		if err != nil {
			return nil, err
		}
	}
	res.Advice = advice(res)
	if w := guestCPUWarning(res); w != "" {
		res.Advice = append(res.Advice, w)
	}
	res.Elapsed = time.Since(res.Started)
	if err := writeOutputs(res); err != nil {
		return nil, err
	}
	return res, nil
}

// guestCPUWarning says when emulated guests, not the network, may have
// set the pace: a download that was limited neither by the receive
// window, the send buffer nor the congestion window most of its time
// (TCP_INFO's busy-time split) ran as fast as the guests could send and
// receive.
func guestCPUWarning(res *Result) string {
	d := res.Download
	if d == nil || d.Server == nil || res.Hosts[lab.RoleClient].Engine != string(vm.EngineTCG) {
		return ""
	}
	if d.Server.RwndLimitedFraction()+d.Server.SndbufLimitedFraction() > 0.5 {
		return ""
	}
	if res.Captures[SideServer] != nil && res.Captures[SideServer].Diagnosis != nil {
		switch res.Captures[SideServer].Diagnosis.Limit {
		case analyzer.LimitReceiveWindow, analyzer.LimitSendBuffer:
			return ""
		}
	}
	return fmt.Sprintf("the VMs run under emulation (tcg): at %s the guests' CPUs may be what limits the transfer, not the network or the proxy (compare `wanlab bench forward --vms`)", mbps(d.Transfer))
}

// vmKernelImpairment is the specs as qdiscs: on the router's TAPs where
// this host's kernel has them, else on the egress NIC (eth0) of the VM
// that sends in that direction (the client for to-server, the server for
// to-client), as the scenarios put netem on an end host's NIC.
type vmKernelImpairment struct {
	router map[string]kernel.Target
	guest  map[string]*vm.VM
	specs  map[string]*spec.Spec
	where  []string

	once  sync.Once
	stats *ImpairStats
	err   error
}

func startVMKernel(ctx context.Context, v *VMs, specs map[string]*spec.Spec) (impairment, error) {
	l := v.Lab
	dir := filepath.Join(StateDir, l.ID)
	if err := hostfile.Dir(dir); err != nil {
		return nil, fmt.Errorf("kernel qdisc state: %w", err)
	}
	ki := &vmKernelImpairment{router: map[string]kernel.Target{}, guest: map[string]*vm.VM{}, specs: specs}
	fail := func(err error) (impairment, error) {
		_, cerr := ki.Stop()
		return nil, errors.Join(err, cerr)
	}
	for _, d := range []string{ToClient, ToServer} {
		if specs[d].IsEmpty() {
			continue
		}
		t := kernel.Target{Iface: egress(l, d), Netns: l.Router.NS, StateDir: dir}
		err := kernel.Apply(t, spec.PipelineImpairment(specs[d]))
		if err == nil {
			ki.router[d] = t
			ki.where = append(ki.where, d+" on the router's "+t.Iface)
			continue
		}
		if !errors.Is(err, kernel.ErrNotSupported) {
			return fail(fmt.Errorf("--kernel %s on %s: %w", d, t.Iface, err))
		}
		g, name := v.Client, "client"
		if d == ToClient {
			g, name = v.Server, "server"
		}
		r, rerr := g.Run(ctx, "wanlab", "kernel", "apply", "--iface", "eth0", specs[d].String())
		switch {
		case rerr != nil:
			return fail(fmt.Errorf("--kernel %s in the %s VM: %w", d, name, rerr))
		case r.ExitCode == 4:
			return fail(fmt.Errorf("--kernel %s: neither this host's kernel nor the VM's has it: %s: %w", d, strings.TrimSpace(string(r.Stderr)), kernel.ErrNotSupported))
		case r.ExitCode != 0:
			return fail(fmt.Errorf("--kernel %s in the %s VM: exit %d: %s", d, name, r.ExitCode, strings.TrimSpace(string(r.Stderr))))
		}
		ki.guest[d] = g
		ki.where = append(ki.where, fmt.Sprintf("%s on the %s VM's eth0 (this host's kernel: %v)", d, name, err))
	}
	return ki, nil
}

func (ki *vmKernelImpairment) Mode() string { return "kernel" }

func (ki *vmKernelImpairment) Describe() string {
	return "kernel qdiscs, " + strings.Join(ki.where, "; ") + "; " + describe(ki.specs)
}

func (ki *vmKernelImpairment) Stop() (*ImpairStats, error) {
	ki.once.Do(func() {
		st := &ImpairStats{Kernel: map[string]string{}}
		var errs []error
		for d, t := range ki.router {
			if shown, err := kernel.Show(t); err == nil {
				st.Kernel[d] = shown
			}
			if err := kernel.Clear(t); err != nil {
				errs = append(errs, fmt.Errorf("clear qdiscs on %s: %w", t.Iface, err))
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for d, g := range ki.guest {
			if out, err := guestRun(ctx, g, "wanlab", "kernel", "show", "--iface", "eth0"); err == nil {
				st.Kernel[d] = "in the VM: " + strings.TrimSpace(string(out))
			}
			if _, err := guestRun(ctx, g, "wanlab", "kernel", "clear", "--iface", "eth0"); err != nil {
				errs = append(errs, fmt.Errorf("clear qdiscs in the VM: %w", err))
			}
		}
		ki.stats, ki.err = st, errors.Join(errs...)
	})
	return ki.stats, ki.err
}

var pingTime = regexp.MustCompile(`time=([0-9.]+) ms`)

// guestPing pings dst n times, 200 ms apart, from a guest (busybox's ping)
// and returns the median round trip (the first echo may also pay for a
// neighbour resolution or a cold path).
func guestPing(ctx context.Context, g *vm.VM, dst netip.Addr, n int) (time.Duration, error) {
	out, err := guestRun(ctx, g, "ping", "-c", strconv.Itoa(n), "-i", "0.2", "-W", "5", dst.String())
	if err != nil {
		return 0, fmt.Errorf("ping %s: %w", dst, err)
	}
	rtts := parsePing(out)
	if len(rtts) == 0 {
		return 0, fmt.Errorf("ping %s: no echo in %q", dst, out)
	}
	slices.Sort(rtts)
	return rtts[len(rtts)/2], nil
}

// parsePing returns the round trips of ping's "time=X ms" lines.
func parsePing(out []byte) []time.Duration {
	var rtts []time.Duration
	for _, m := range pingTime.FindAllSubmatch(out, -1) {
		f, err := strconv.ParseFloat(string(m[1]), 64)
		if err == nil && f >= 0 && f < 1e9 {
			rtts = append(rtts, time.Duration(f*float64(time.Millisecond)))
		}
	}
	return rtts
}
