// Package proxy is wanlab's userspace impairing router: between two
// interfaces of a router host it steers forwarded packets through a TUN
// device per direction, impairs them with the engine pipeline of the
// interface they will leave through, and writes each back at its departure
// time. Start runs it in-process; the wanlab proxy command is a thin shell
// over it.
package proxy

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/proxy/control"
	"github.com/wanlab/wanlab/proxy/cpulatency"
	"github.com/wanlab/wanlab/proxy/device"
	"github.com/wanlab/wanlab/proxy/engine"
	"github.com/wanlab/wanlab/proxy/release"
	"github.com/wanlab/wanlab/proxy/route"
	"github.com/wanlab/wanlab/proxy/spec"
	"github.com/wanlab/wanlab/proxy/tap"
)

// Config describes one proxy.
type Config struct {
	// Ifaces are the two interfaces A and B the proxy sits between.
	Ifaces [2]string
	// Specs[i] is the impairment for packets leaving through Ifaces[i],
	// parsed where it entered (spec.ParseImpairment); the zero value means
	// none.
	Specs [2]spec.Impairment
	// Backend is device.Offload (default) or device.Water.
	Backend string
	// Seed seeds every stage's PRNG (direction i of the proxy uses Seed+i,
	// the engine derives each stage's seed from it). Zero with HasSeed
	// false picks a random seed, reported by Proxy.Seed.
	Seed    uint64
	HasSeed bool
	// Netns is the named network namespace the interfaces live in ("" =
	// the current one); TUNs and routing are set up there.
	Netns string
	// StateDir holds the route state and lock files (default
	// route.DefaultStateDir).
	StateDir string
	// Tap, when set, records every packet entering and leaving the engine
	// (and those it drops). The caller creates it with tap.New using
	// Ifaces as interface names and closes it after the proxy.
	Tap *tap.Tap
	// Realtime runs the release loops under SCHED_FIFO (see
	// release.Config.Realtime) when the process may.
	Realtime bool
	// ReleaseSpin is how long before a departure the release loops stop
	// sleeping and spin (release.Config.Early): 0 is the default (50 µs),
	// negative turns spinning off.
	ReleaseSpin time.Duration
	// LowLatency says when the proxy asks the kernel to keep idle CPUs
	// quick to wake (package cpulatency): "" or Auto while packets flowed
	// within LowLatencyHold (default DefaultLowLatencyHold), On for as
	// long as it runs, Off never. Auto quietly does without when the
	// request cannot be made (no /dev/cpu_dma_latency, no permission);
	// On fails Start. Only with real TUNs (not Devices).
	LowLatency     cpulatency.Mode
	LowLatencyHold time.Duration

	// Devices, when both are set, replaces the TUNs (tests: device.Fake):
	// nothing is opened and no routing is touched. Devices[i] carries the
	// packets leaving through Ifaces[i].
	Devices [2]device.Device
}

// onHost reports whether the proxy works on the host (TUNs, routing,
// CPU latency request) rather than on the test devices of Devices.
func (c Config) onHost() bool { return c.Devices[0] == nil || c.Devices[1] == nil }

// DefaultLowLatencyHold is how long after the last packet the Auto
// low-latency request is kept.
const DefaultLowLatencyHold = time.Second

// Proxy is a running proxy. It implements control.Backend.
type Proxy struct {
	cfg     Config
	seed    uint64
	pool    *engine.Pool
	devs    [2]device.Device // the devices, opened or given
	dirs    [2]*direction
	lock    *route.Lock
	applied *route.Applied
	lowReq  *cpulatency.Request  // held at 0 µs for the whole run (On)
	lowAuto *cpulatency.Adaptive // held while packets flow (Auto)

	closeOnce sync.Once
	closeErr  error
	done      chan struct{}
	wg        sync.WaitGroup

	// wallOffset turns release.MonotonicNow stamps into wall-clock time
	// for the tap.
	wallOffset int64
}

var _ control.Backend = (*Proxy)(nil)

// ErrInterfaceNotFound is wrapped by errors about a missing interface.
var ErrInterfaceNotFound = errors.New("not found")

// Start sets the proxy up and starts forwarding: it claims the interfaces,
// opens one TUN per direction (inside the namespace), routes forwarded
// traffic through them and starts a reader and a release loop per
// direction. On any error everything done so far is undone and a one-line
// error returned. Cancelling ctx closes the proxy.
func Start(ctx context.Context, cfg Config) (*Proxy, error) {
	if cfg.Ifaces[0] == "" || cfg.Ifaces[1] == "" || cfg.Ifaces[0] == cfg.Ifaces[1] {
		return nil, fmt.Errorf("proxy: need two different interfaces, got %q and %q", cfg.Ifaces[0], cfg.Ifaces[1])
	}
	if cfg.Backend == "" {
		cfg.Backend = device.Offload
	}
	if cfg.StateDir == "" {
		cfg.StateDir = route.DefaultStateDir
	}
	p := &Proxy{cfg: cfg, done: make(chan struct{}), seed: cfg.Seed}
	if !cfg.HasSeed {
		var b [8]byte
		_, _ = rand.Read(b[:])
		p.seed = binary.LittleEndian.Uint64(b[:])
	}
	p.wallOffset = time.Now().UnixNano() - release.MonotonicNow()

	ok := false
	defer func() {
		if !ok {
			p.teardown()
		}
	}()
	devs := cfg.Devices
	var err error
	if cfg.onHost() {
		if devs, err = p.setupHost(); err != nil {
			return nil, err
		}
	}
	p.devs = devs
	mtu := max(devs[0].MTU(), devs[1].MTU(), 1280)
	p.pool = engine.NewPool(engine.Headroom + mtu)
	for i := range 2 {
		d, err := p.newDirection(i, devs[i], cfg.Specs[i])
		if err != nil {
			return nil, err
		}
		p.dirs[i] = d
	}
	if cfg.onHost() {
		rc := route.Config{Ifaces: cfg.Ifaces, TUNs: [2]string{devs[0].Name(), devs[1].Name()},
			StateDir: cfg.StateDir, Netns: cfg.Netns}
		if p.applied, err = route.Apply(rc); err != nil {
			return nil, err
		}
	}
	if cfg.onHost() {
		if err := p.startLowLatency(); err != nil {
			return nil, err
		}
	}
	for _, d := range p.dirs {
		d.lat = p.lowAuto
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			d.readLoop()
		}()
	}
	ok = true
	if ctx.Done() != nil {
		go func() {
			select {
			case <-ctx.Done():
				p.Close()
			case <-p.done:
			}
		}()
	}
	return p, nil
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
	case !p.cfg.onHost():
		return "" // test devices, nothing asked
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
					return fmt.Errorf("interface %q: %w", name, ErrInterfaceNotFound)
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
		d, err := device.OpenIn(ns, p.cfg.Backend, names[i], mtus[i])
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
// the kernel forwards again at once, then the devices (ending the readers),
// then the release loops.
func (p *Proxy) teardown() error {
	var errs []error
	if p.applied != nil {
		if err := p.applied.Undo(); err != nil {
			errs = append(errs, fmt.Errorf("undo routing: %w", err))
		}
	}
	for _, d := range p.dirs {
		if d != nil {
			d.stopping.Store(true)
		}
	}
	for _, d := range p.devs {
		if d != nil {
			d.Close()
		}
	}
	p.wg.Wait()
	for _, d := range p.dirs {
		if d != nil {
			d.loop.Close()
			d.drain()
		}
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

// Seed returns the seed in use (random unless Config.HasSeed).
func (p *Proxy) Seed() uint64 { return p.seed }

// TUNs returns the names of the devices of the two directions.
func (p *Proxy) TUNs() [2]string { return [2]string{p.dirs[0].dev.Name(), p.dirs[1].dev.Name()} }

// SetSpec replaces the spec of the direction leaving through iface, or of
// both when iface is "". A spec that does not parse returns the parser's
// error unchanged and the running spec stays. Packets already inside keep
// the departure times the old spec gave them (engine.Pipeline.Swap).
func (p *Proxy) SetSpec(iface, text string) error {
	var targets []*direction
	for _, d := range p.dirs {
		if iface == "" || iface == d.iface {
			targets = append(targets, d)
		}
	}
	if len(targets) == 0 {
		return fmt.Errorf("interface %q: not a direction of this proxy (have %s, %s)", iface, p.cfg.Ifaces[0], p.cfg.Ifaces[1])
	}
	if strings.HasPrefix(strings.TrimSpace(text), "@") {
		return spec.ErrFileRef
	}
	if isClassesText(text) {
		for _, d := range targets {
			if err := d.setClasses(text); err != nil {
				return err
			}
			if next, ok := d.pl.NextDeparture(); ok {
				d.loop.Notify(next)
			}
		}
		return nil
	}
	s, err := spec.Parse(text)
	if err != nil {
		return err
	}
	now := release.MonotonicNow()
	for _, d := range targets {
		if d.classes.Load() != nil {
			if err := d.setPlain(s); err != nil {
				return err
			}
			continue
		}
		if err := d.pl.Swap(s, now); err != nil {
			return err
		}
		// A new spec may release earlier than the old one: wake the loop.
		if next, ok := d.pl.NextDeparture(); ok {
			d.loop.Notify(next)
		}
	}
	return nil
}

// Specs maps each egress interface to its canonical spec.
func (p *Proxy) Specs() map[string]string {
	m := make(map[string]string, 2)
	for _, d := range p.dirs {
		m[d.iface] = d.specText()
	}
	return m
}

// Warnings maps each egress interface to the warnings of its spec in
// force (empty when there are none): what a correlated probability really
// realizes (engine.Warnings). The spec is applied as written.
func (p *Proxy) Warnings() map[string][]string {
	m := make(map[string][]string, 2)
	for _, d := range p.dirs {
		m[d.iface] = d.specWarnings()
	}
	return m
}

// Stats returns the counters of both directions.
func (p *Proxy) Stats() control.Stats {
	var st control.Stats
	for _, d := range p.dirs {
		snap := d.pl.Snapshot()
		st.Directions = append(st.Directions, control.Direction{
			Iface:    d.iface,
			Spec:     d.specText(),
			Warnings: d.specWarnings(),
			Engine:   snap,
			Device: control.DeviceCounters{
				Malformed:   d.malformed.Load(),
				ReadErrors:  d.readErrors.Load(),
				WriteErrors: d.writeErrors.Load(),
				Written:     d.late.totalPackets.Load(),
				Late1ms:     d.late.totalLate1ms.Load(),
			},
		})
	}
	if p.cfg.Tap != nil {
		ts := p.cfg.Tap.Stats()
		st.Tap = &ts
	}
	st.LowLatency = p.lowLatencyState()
	return st
}
