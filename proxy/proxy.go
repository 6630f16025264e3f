// Package proxy is wanlab's userspace impairing router: between two
// interfaces of a router host it steers forwarded packets through a TUN
// device per direction, impairs them with the engine pipeline of the
// interface they will leave through, and writes each back at its departure
// time.
//
// It is two layers. Forwarder (New) is the pure forwarder: it takes two
// devices and moves packets; tests run it over fakes. Proxy (Start) is the
// host layer around it: it claims the interfaces, opens the TUNs, routes
// forwarded traffic through them and holds the CPU latency request, and
// undoes all of it on Close. The wanlab proxy command is a thin shell over
// Start.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/proxy/control"
	"github.com/wanlab/wanlab/proxy/cpulatency"
	"github.com/wanlab/wanlab/proxy/device"
	"github.com/wanlab/wanlab/proxy/release"
	"github.com/wanlab/wanlab/proxy/route"
	"github.com/wanlab/wanlab/proxy/tap"
	"github.com/wanlab/wanlab/tc/schedule"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// Preflight says in one line what the host layer lacks before it touches
// anything: CAP_NET_ADMIN (wraps os.ErrPermission) and /dev/net/tun (wraps
// device.ErrUnavailable), with what a container needs for each.
func Preflight() error {
	var missing, fix []string
	netAdmin, err := host.SelfHasCapability(host.CapNetAdmin)
	if err == nil && !netAdmin {
		missing, fix = append(missing, "CAP_NET_ADMIN"), append(fix, "--cap-add NET_ADMIN")
	}
	if _, err := os.Stat(device.TUNPath); err != nil {
		missing, fix = append(missing, device.TUNPath), append(fix, "--device "+device.TUNPath)
	}
	if len(missing) == 0 {
		return nil
	}
	kind := device.ErrUnavailable
	if len(missing) == 2 || missing[0] == "CAP_NET_ADMIN" {
		kind = os.ErrPermission
	}
	return &host.PrivilegeError{Err: kind, Msg: fmt.Sprintf("needs %s: run as root with the tun module loaded (a container: docker run %s)",
		strings.Join(missing, " and "), strings.Join(fix, " "))}
}

// Config describes one proxy on the host.
type Config struct {
	// Ifaces are the two interfaces A and B the proxy sits between.
	Ifaces [2]string
	// Specs[i] is the impairment for packets leaving through Ifaces[i],
	// parsed where it entered (spec.ParseImpairment); the zero value means
	// none.
	Specs [2]spec.Impairment
	// Schedules: see Options.
	Schedules [2]*schedule.Schedule
	// Backend is device.Offload (default) or device.Water.
	Backend string
	// Queues is the number of queues of each TUN, each with its reader
	// (IFF_MULTI_QUEUE when more than one); 0 means DefaultQueues.
	Queues int
	// Seed and HasSeed: see Options.
	Seed    uint64
	HasSeed bool
	// Netns is the named network namespace the interfaces live in ("" =
	// the current one); TUNs and routing are set up there.
	Netns string
	// StateDir holds the route state and lock files (default
	// route.DefaultStateDir).
	StateDir string
	// Tap, Realtime and ReleaseSpin: see Options.
	Tap         *tap.Tap
	Realtime    bool
	ReleaseSpin time.Duration
	// LowLatency says when the proxy asks the kernel to keep idle CPUs
	// quick to wake (package cpulatency): "" or Auto while packets flowed
	// within LowLatencyHold (default DefaultLowLatencyHold), On for as
	// long as it runs, Off never. Auto quietly does without when the
	// request cannot be made (no /dev/cpu_dma_latency, no permission);
	// On fails Start.
	LowLatency     cpulatency.Mode
	LowLatencyHold time.Duration
	// QueueMemory: see Options.
	QueueMemory units.Size
}

// DefaultQueues is the queues of each TUN when Config.Queues is 0: one
// per two CPUs (at least one, at most device.MaxQueues), so that the
// readers of both directions together are one per CPU. A queue per CPU in
// each direction gives two readers a CPU: on 2 CPUs one queue carried more
// in every workload of bench forward (UDP round trip p50 44 µs against 54,
// one TCP stream 8.2 Gbit/s against 7.7, 64-byte UDP 70 kpps against 65,
// four streams the same; docs/proxy.md).
func DefaultQueues() int {
	return min(max(runtime.NumCPU()/2, 1), device.MaxQueues)
}

// DefaultLowLatencyHold is how long after the last packet the Auto
// low-latency request is kept.
const DefaultLowLatencyHold = time.Second

// Proxy is a running proxy on the host: a Forwarder over two TUNs, with
// the routing and the locks that put them between the interfaces. It
// implements control.Backend.
type Proxy struct {
	*Forwarder
	cfg     Config
	lock    *route.Lock
	applied *route.Applied
	lowReq  *cpulatency.Request  // held at 0 µs for the whole run (On)
	lowAuto *cpulatency.Adaptive // held while packets flow (Auto)

	closeOnce sync.Once
	closeErr  error
	done      chan struct{}
}

var _ control.Backend = (*Proxy)(nil)

// ErrInterfaceNotFound is matched by errors about a missing interface
// (host's one such error).
var ErrInterfaceNotFound = host.ErrNotFound

// Start sets the proxy up and starts forwarding: it claims the interfaces,
// opens one TUN per direction (inside the namespace), starts the forwarder
// on them and routes forwarded traffic through them. On any error
// everything done so far is undone and a one-line error returned.
// Cancelling ctx closes the proxy.
func Start(ctx context.Context, cfg Config) (*Proxy, error) {
	if cfg.Ifaces[0] == "" || cfg.Ifaces[1] == "" || cfg.Ifaces[0] == cfg.Ifaces[1] {
		return nil, fmt.Errorf("proxy: need two different interfaces, got %q and %q", cfg.Ifaces[0], cfg.Ifaces[1])
	}
	if cfg.Backend == "" {
		cfg.Backend = device.Offload
	}
	if cfg.Queues == 0 {
		cfg.Queues = DefaultQueues()
	}
	if cfg.StateDir == "" {
		cfg.StateDir = route.DefaultStateDir
	}
	if err := Preflight(); err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, done: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			p.teardown()
		}
	}()
	devs, err := p.setupHost()
	if err != nil {
		return nil, err
	}
	if err := p.startLowLatency(); err != nil {
		for _, d := range devs {
			d.Close()
		}
		return nil, err
	}
	opt := Options{Ifaces: cfg.Ifaces, Specs: cfg.Specs, Schedules: cfg.Schedules, Seed: cfg.Seed, HasSeed: cfg.HasSeed,
		Tap: cfg.Tap, Realtime: cfg.Realtime, ReleaseSpin: cfg.ReleaseSpin, QueueMemory: cfg.QueueMemory}
	if p.lowAuto != nil {
		opt.Activity = p.lowAuto
	}
	// The forwarder is not tied to ctx: Close undoes the routing first.
	if p.Forwarder, err = New(context.Background(), devs, opt); err != nil {
		return nil, err
	}
	rc := route.Config{Ifaces: cfg.Ifaces, TUNs: [2]string{devs[0].Name(), devs[1].Name()},
		StateDir: cfg.StateDir, Netns: cfg.Netns}
	if p.applied, err = route.Apply(rc); err != nil {
		return nil, err
	}
	ok = true
	closeWhenDone(ctx, p.done, p.Close)
	return p, nil
}

// Stats returns the forwarder's counters and the CPU latency request's
// state.
func (p *Proxy) Stats() control.Stats {
	st := p.Forwarder.Stats()
	st.LowLatency = p.lowLatencyState()
	return st
}

// startLowLatency makes the CPU latency request Config.LowLatency asks
// for.
func (p *Proxy) startLowLatency() error {
	mode := p.cfg.LowLatency
	if mode == "" {
		mode = cpulatency.Auto
	}
	if mode == cpulatency.Off {
		return nil
	}
	req, err := cpulatency.Open(cpulatency.DevicePath)
	if err != nil {
		if mode == cpulatency.On {
			return fmt.Errorf("low latency: %w", err)
		}
		return nil
	}
	if mode == cpulatency.On {
		if err := req.Set(0); err != nil {
			req.Close()
			return fmt.Errorf("low latency: %w", err)
		}
		p.lowReq = req
		return nil
	}
	hold := p.cfg.LowLatencyHold
	if hold <= 0 {
		hold = DefaultLowLatencyHold
	}
	p.lowReq = req
	p.lowAuto = cpulatency.NewAdaptive(req, hold, release.MonotonicNow)
	return nil
}

// lowLatencyState describes the CPU latency request for Stats.
func (p *Proxy) lowLatencyState() string {
	switch {
	case p.cfg.LowLatency == cpulatency.Off:
		return "off"
	case p.lowReq == nil:
		return "unavailable"
	case p.lowAuto == nil:
		return "on"
	case p.lowAuto.Armed():
		return "auto (held)"
	}
	return "auto (idle)"
}

// LowLatency reports the CPU latency request: whether one is open and
// whether it currently holds idle CPUs to 0 µs wake-ups.
func (p *Proxy) LowLatency() (open, low bool) {
	if p.lowReq == nil {
		return false, false
	}
	return true, p.lowReq.Low()
}

// setupHost claims the interfaces and opens the TUNs in the namespace.
func (p *Proxy) setupHost() ([2]device.Device, error) {
	var devs [2]device.Device
	rc := route.Config{Ifaces: p.cfg.Ifaces, StateDir: p.cfg.StateDir, Netns: p.cfg.Netns}
	ns := netns.None()
	if p.cfg.Netns != "" {
		h, err := nsrun.Open(p.cfg.Netns)
		if err != nil {
			return devs, err
		}
		defer h.Close()
		ns = h
	}
	var mtus [2]int
	err := nsrun.Do(ns, func() error {
		for i, name := range p.cfg.Ifaces {
			l, err := netlink.LinkByName(name)
			if err != nil {
				var nf netlink.LinkNotFoundError
				if errors.As(err, &nf) {
					return &host.NotFoundError{Iface: name}
				}
				return fmt.Errorf("interface %q: %w", name, err)
			}
			mtus[i] = l.Attrs().MTU
		}
		return nil
	})
	if err != nil {
		return devs, err
	}
	if p.lock, err = route.Acquire(rc); err != nil {
		return devs, err
	}
	names := route.TUNNames(p.cfg.Ifaces)
	for i := range 2 {
		d, err := device.OpenQueuesIn(ns, p.cfg.Backend, names[i], mtus[i], p.cfg.Queues)
		if err != nil {
			for _, o := range devs[:i] {
				o.Close()
			}
			return devs, err
		}
		devs[i] = d
	}
	return devs, nil
}

// teardown undoes whatever Start got done, in reverse: routing first, so
// the kernel forwards again at once, then the forwarder (closing the
// TUNs), the CPU latency request and the interfaces' locks.
func (p *Proxy) teardown() error {
	var errs []error
	if p.applied != nil {
		if err := p.applied.Undo(); err != nil {
			errs = append(errs, fmt.Errorf("undo routing: %w", err))
		}
	}
	if p.Forwarder != nil {
		p.Forwarder.Close()
	}
	if p.lowAuto != nil {
		p.lowAuto.Close()
	} else if p.lowReq != nil {
		p.lowReq.Close()
	}
	if p.lock != nil {
		p.lock.Release()
	}
	return errors.Join(errs...)
}

// Close stops forwarding and restores the host: routing undone (the
// kernel forwards directly again), TUNs removed, interfaces released.
// Packets still inside the engine are discarded. Close is idempotent.
func (p *Proxy) Close() error {
	p.closeOnce.Do(func() {
		p.closeErr = p.teardown()
		close(p.done)
	})
	return p.closeErr
}

// Done is closed once the proxy has stopped.
func (p *Proxy) Done() <-chan struct{} { return p.done }
