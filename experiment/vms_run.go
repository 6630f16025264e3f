package experiment

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netns"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/traffic"
	"github.com/wanlab/wanlab/lab/vm"
	"github.com/wanlab/wanlab/lab/vm/pair"
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

func vmHost(g *vm.VM) HostInfo {
	return HostInfo{Kernel: g.Hello.Release, VM: true, Engine: string(g.Engine), Accel: string(g.Engine), Boot: g.BootTime}
}

// runVMs is Run with VM end hosts: it boots them, runs, stops them.
func runVMs(ctx context.Context, cfg Config) (_ *Result, err error) {
	v, err := pair.Boot(ctx, pair.Config{Binary: cfg.VMBinary, Engine: vm.Engine(cfg.VMEngine), Log: cfg.Log})
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
func RunOn(ctx context.Context, cfg Config, v *pair.VMs) (*Result, error) {
	cfg.VMs = true
	return run(ctx, cfg, &guests{v: v})
}

// guests are the endpoints of an experiment between two booted VMs (RunOn).
type guests struct {
	v *pair.VMs
	// undo restores, in reverse order, what open changed.
	undo []func() error
	// cleanCtx runs the cleanup in the guests: a cancelled run must still
	// leave the VMs as it found them.
	cleanCtx context.Context
}

func (e *guests) open(ctx context.Context, cfg Config, logf func(string, ...any)) (*lab.Lab, map[string]HostInfo, error) {
	v, l := e.v, e.v.Lab
	e.cleanCtx = context.WithoutCancel(ctx)
	logf("lab %s: client VM on %s, router %s, server VM on %s (%s)", l.ID, l.Router.ClientLink, l.Router.NS, l.Router.ServerLink, v.Client.Hello.Release)
	for _, g := range []struct {
		vm *vm.VM
		kv map[string]string
	}{{v.Client, cfg.ClientSysctls}, {v.Server, cfg.ServerSysctls}} {
		before, err := pair.SetSysctls(ctx, g.vm, g.kv)
		if err != nil {
			return nil, nil, fmt.Errorf("sysctls: %w", err)
		}
		e.undo = append(e.undo, func() error {
			if err := pair.RestoreSysctls(e.cleanCtx, g.vm, before); err != nil {
				return fmt.Errorf("restore sysctls: %w", err)
			}
			return nil
		})
	}
	if cfg.NoOffload {
		// On the router's TAPs (the guests' virtio offloads stay: busybox
		// has no ethtool), back on when the experiment ends.
		for _, tap := range []string{l.Router.ClientLink, l.Router.ServerLink} {
			for _, o := range []lab.Offload{lab.OffloadTSO, lab.OffloadGSO, lab.OffloadGRO} {
				if err := lab.SetOffload(l.Router.Handle, tap, o, false); err != nil {
					return nil, nil, err
				}
				e.undo = append(e.undo, func() error { return lab.SetOffload(l.Router.Handle, tap, o, true) })
			}
		}
	}
	return l, map[string]HostInfo{
		lab.RoleClient: vmHost(v.Client), lab.RoleServer: vmHost(v.Server),
		lab.RoleRouter: {Kernel: host.KernelRelease()},
	}, nil
}

// close restores the guests and the TAPs and removes the state of this
// run's impairment (the VMs, and the lab, stay for the next RunOn).
func (e *guests) close() error {
	var errs []error
	for _, undo := range slices.Backward(e.undo) {
		errs = append(errs, undo())
	}
	_ = os.RemoveAll(filepath.Join(StateDir, e.v.Lab.ID))
	return errors.Join(errs...)
}

func (e *guests) serve(ctx context.Context, c traffic.ServerConfig) (netip.AddrPort, func() error, error) {
	srv, err := pair.StartServer(ctx, e.v.Server, c)
	if err != nil {
		return netip.AddrPort{}, nil, err
	}
	return srv.Addr, func() error {
		if err := srv.Stop(e.cleanCtx); err != nil {
			return fmt.Errorf("stop the server: %w", err)
		}
		return nil
	}, nil
}

func (e *guests) startKernel(ctx context.Context, specs map[string]*spec.Spec) (impairment, error) {
	return startVMKernel(ctx, e.v, specs)
}

func (e *guests) capturePoint(side string) (netns.NsHandle, string, string) {
	r := &e.v.Lab.Router
	tap := r.ClientLink
	if side == SideServer {
		tap = r.ServerLink
	}
	return r.Handle, tap, "TAP " + tap + " of the " + side + " VM in " + r.NS
}

func (e *guests) in() string { return " in the client VM" }

func (e *guests) ping(ctx context.Context, dst netip.Addr, n int) (time.Duration, error) {
	return pair.Ping(ctx, e.v.Client, dst, n)
}

func (e *guests) download(ctx context.Context, c traffic.DownloadConfig) (*traffic.DownloadResult, error) {
	return pair.Download(ctx, e.v.Client, pair.GuestDownload{Server: c.Server, Size: c.Size, Sockopt: c.Sockopt, ProgressEvery: c.ProgressEvery}, c.Progress)
}

func (e *guests) requestResponse(ctx context.Context, c traffic.RRConfig) (*traffic.RRResult, error) {
	return pair.RR(ctx, e.v.Client, c)
}

func (e *guests) snapshot(ctx context.Context, role string) (*tuner.Snapshot, error) {
	g := e.v.Client
	if role == lab.RoleServer {
		g = e.v.Server
	}
	s, err := pair.Snapshot(ctx, g)
	if err != nil {
		return nil, fmt.Errorf("tuner snapshot of the %s VM: %w", role, err)
	}
	return s, nil
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

// startVMKernel applies the specs as qdiscs on the router's TAPs where
// this host's kernel has them, else on the egress NIC (eth0) of the VM
// that sends in that direction (the client for to-server, the server for
// to-client), as the scenarios put netem on an end host's NIC.
func startVMKernel(ctx context.Context, v *pair.VMs, specs map[string]*spec.Spec) (impairment, error) {
	l := v.Lab
	dir := filepath.Join(StateDir, l.ID)
	if err := hostfile.Dir(dir); err != nil {
		return nil, fmt.Errorf("kernel qdisc state: %w", err)
	}
	ki := &kernelImpairment{targets: map[string]kernel.Target{}, guest: map[string]*vm.VM{}, offloads: map[string]guestOffloads{}, specs: specs}
	var where []string
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
			ki.targets[d] = t
			where = append(where, d+" on the router's "+t.Iface)
			continue
		}
		if !errors.Is(err, kernel.ErrNotSupported) {
			return fail(fmt.Errorf("--kernel %s on %s: %w", d, t.Iface, err))
		}
		g, name := v.Client, "client"
		if d == ToClient {
			g, name = v.Server, "server"
		}
		// The guest's TCP hands its qdiscs GSO packets of up to 64 KiB
		// (whatever the NIC's gso says: Linux segments them after the
		// qdiscs), which netem drops, duplicates and reorders whole,
		// where the proxy and a router's NIC see wire-size packets: TSO
		// and GSO go off and GSO packets down to one segment while the
		// qdiscs run, and back in Stop.
		before, oerr := pair.SetOffloads(ctx, g, "eth0", map[string]int{"tso": 0, "gso": 0, "gso_max_segs": 1})
		if oerr != nil {
			return fail(fmt.Errorf("--kernel %s in the %s VM: %w", d, name, oerr))
		}
		ki.offloads[d] = guestOffloads{g, before}
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
		where = append(where, fmt.Sprintf("%s on the %s VM's eth0, TSO and GSO off, one segment a packet (this host's kernel: %v)", d, name, err))
	}
	ki.where = ", " + strings.Join(where, "; ")
	return ki, nil
}
