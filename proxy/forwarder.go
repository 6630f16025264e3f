package proxy

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/wanlab/wanlab/proxy/control"
	"github.com/wanlab/wanlab/proxy/device"
	"github.com/wanlab/wanlab/proxy/release"
	"github.com/wanlab/wanlab/proxy/tap"
	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/schedule"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// Options configure a Forwarder.
type Options struct {
	// Ifaces name the two directions: Specs[i] and the device devs[i]
	// carry the packets leaving through Ifaces[i].
	Ifaces [2]string
	// Specs[i] is the impairment for packets leaving through Ifaces[i],
	// parsed where it entered (spec.ParseImpairment); the zero value means
	// none.
	Specs [2]spec.Impairment
	// Seed seeds every stage's PRNG (direction i uses Seed+i, the engine
	// derives each stage's seed from it). Zero with HasSeed false picks a
	// random seed, reported by Seed.
	Seed    uint64
	HasSeed bool
	// Tap, when set, records every packet entering and leaving the engine
	// (and those it drops). The caller creates it with tap.New using
	// Ifaces as interface names and closes it after the forwarder.
	Tap *tap.Tap
	// Realtime runs the release loops under SCHED_FIFO (see
	// release.Config.Realtime) when the process may.
	Realtime bool
	// ReleaseSpin is how long before a departure the release loops stop
	// sleeping and spin (release.Config.Early): 0 is the default (50 µs),
	// negative turns spinning off.
	ReleaseSpin time.Duration
	// Schedules[i], when set, steps the spec of the direction leaving
	// through Ifaces[i] over time (package schedule), from New on; Specs[i]
	// holds until its first step. SetSpec on that direction ends it.
	Schedules [2]*schedule.Schedule
	// Activity, when set, is told the time of every batch the readers
	// take in (the host layer's CPU latency request, cpulatency.Adaptive).
	Activity interface{ Touch(now int64) }
	// QueueMemory bounds the memory of the packets both directions hold
	// together (engine.MemoryBudget): packets beyond it are queue drops,
	// and a spec whose queues could hold more is warned about. 0:
	// engine.DefaultQueueMemory.
	QueueMemory units.Size
}

// Forwarder is the proxy without the host: two devices, a reader, an
// impairment pipeline and a release loop per direction. It opens nothing
// and touches no routing; the host layer (Start) gives it TUNs, tests give
// it fakes (device.Fake). It implements control.Backend.
type Forwarder struct {
	opt    Options
	seed   uint64
	pool   *engine.Pool
	units  *unitPools           // GSO frames read whole (units.go)
	budget *engine.MemoryBudget // shared by both directions
	devs   [2]device.Device
	dirs   [2]*direction

	closeOnce sync.Once
	done      chan struct{}
	wg        sync.WaitGroup

	// wallOffset turns release.MonotonicNow stamps into wall-clock time
	// for the tap.
	wallOffset int64
	// stopSchedules ends the schedules' runners (Close).
	stopSchedules context.CancelFunc
}

var _ control.Backend = (*Forwarder)(nil)

// New starts forwarding between devs: packets read from devs[i] are
// impaired by Specs[i] and written back to devs[i] at their departure
// time. Cancelling ctx closes it. On an error nothing is left running and
// the devices are closed.
func New(ctx context.Context, devs [2]device.Device, opt Options) (*Forwarder, error) {
	if devs[0] == nil || devs[1] == nil {
		return nil, fmt.Errorf("proxy: need two devices")
	}
	p := &Forwarder{opt: opt, devs: devs, done: make(chan struct{}), seed: opt.Seed}
	if !opt.HasSeed {
		var b [8]byte
		_, _ = rand.Read(b[:])
		p.seed = binary.LittleEndian.Uint64(b[:])
	}
	p.wallOffset = time.Now().UnixNano() - release.MonotonicNow()
	mtu := max(devs[0].MTU(), devs[1].MTU(), 1280)
	p.pool = engine.NewPool(engine.Headroom + mtu)
	p.units = newUnitPools()
	if p.opt.QueueMemory == 0 {
		p.opt.QueueMemory = engine.DefaultQueueMemory()
	}
	p.budget = engine.NewMemoryBudget(p.opt.QueueMemory)
	for i := range 2 {
		d, err := p.newDirection(i, devs[i], opt.Specs[i])
		if err != nil {
			p.Close()
			return nil, err
		}
		p.dirs[i] = d
	}
	for _, d := range p.dirs {
		d.lat = opt.Activity
		for _, r := range d.readers {
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				d.readLoop(r)
			}()
		}
	}
	sctx, cancel := context.WithCancel(context.Background())
	p.stopSchedules = cancel
	for i, s := range opt.Schedules {
		if s == nil {
			continue
		}
		d := p.dirs[i]
		r := schedule.NewRunner(s, schedule.Real{}, func(st schedule.Step) error { return d.install(spec.PipelineImpairment(st.Spec)) })
		d.sched.Store(r)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			_ = r.Run(sctx) // errors of steps are in its State
		}()
	}
	closeWhenDone(ctx, p.done, p.Close)
	return p, nil
}

// Close stops forwarding: the devices are closed (ending the readers),
// then the release loops; packets still inside the engine are discarded.
// It is idempotent.
func (p *Forwarder) Close() error {
	p.closeOnce.Do(func() {
		if p.stopSchedules != nil {
			p.stopSchedules()
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
		close(p.done)
	})
	return nil
}

// Done is closed once the forwarder has stopped.
func (p *Forwarder) Done() <-chan struct{} { return p.done }

// Seed returns the seed in use (random unless Options.HasSeed).
func (p *Forwarder) Seed() uint64 { return p.seed }

// TUNs returns the names of the devices of the two directions (the TUNs
// the host layer opened).
func (p *Forwarder) TUNs() [2]string { return [2]string{p.dirs[0].dev.Name(), p.dirs[1].dev.Name()} }

// Queues is the number of queues (and readers) of each direction's device.
func (p *Forwarder) Queues() int { return len(p.dirs[0].queues) }

// SetSpec parses text (spec.ParseChange) and installs it (Install): the
// entry for callers holding text; the control API parses where the
// request arrives and calls Install.
func (p *Forwarder) SetSpec(iface, text string) error {
	if _, err := p.targets(iface); err != nil {
		return err
	}
	ch, err := spec.ParseChange(text)
	if err != nil {
		return err
	}
	return p.Install(iface, ch)
}

// targets are the directions leaving through iface, both for "".
func (p *Forwarder) targets(iface string) ([]*direction, error) {
	var targets []*direction
	for _, d := range p.dirs {
		if iface == "" || iface == d.iface {
			targets = append(targets, d)
		}
	}
	if len(targets) == 0 {
		return nil, fmt.Errorf("interface %q: not a direction of this proxy (have %s, %s)", iface, p.opt.Ifaces[0], p.opt.Ifaces[1])
	}
	return targets, nil
}

// Install replaces the impairment of the direction leaving through iface,
// or of both when iface is "", by what ch makes of it (a class change
// patches the tree in force). A change that does not apply returns its
// error and the running impairment stays. Packets already inside keep the
// departure times the old one gave them (engine.Pipeline.Swap and
// Replace).
func (p *Forwarder) Install(iface string, ch spec.Change) error {
	targets, err := p.targets(iface)
	if err != nil {
		return err
	}
	for _, d := range targets {
		im, err := ch.Apply(d.classes.Load())
		if err != nil {
			return err // a refused request changes nothing
		}
		d.stopSchedule() // before the swap: a step due meanwhile would replace the impairment
		if err := d.install(im); err != nil {
			return err
		}
	}
	return nil
}

// install replaces d's impairment by im (a class tree, or a plain
// pipeline: engine.Pipeline.Replace swaps a pipeline for a pipeline):
// what Install and a schedule's steps do.
func (d *direction) install(im spec.Impairment) error {
	setup, err := newSetup(im.Classes)
	if err != nil {
		return err
	}
	d.setPass(false)
	if err := setup.Install(d.pl, release.MonotonicNow()); err != nil {
		d.setPass(d.passable(spec.Impairment{Classes: d.classes.Load()}))
		return err
	}
	d.classes.Store(im.Classes)
	d.whole.Store(d.wholeUnits())
	d.setPass(d.passable(im))
	// A new impairment may release earlier than the old one: wake the loop.
	if next, ok := d.pl.NextDeparture(); ok {
		d.loop.Notify(next)
	}
	return nil
}

// stopSchedule ends d's schedule, if it runs one: a spec set by hand
// takes the direction over.
func (d *direction) stopSchedule() {
	if r := d.sched.Load(); r != nil {
		r.Stop()
	}
}

// Specs maps each egress interface to its canonical spec.
func (p *Forwarder) Specs() map[string]string {
	m := make(map[string]string, 2)
	for _, d := range p.dirs {
		m[d.iface] = d.specText()
	}
	return m
}

// Warnings maps each egress interface to the warnings of its spec in
// force (empty when there are none): what a correlated probability really
// realizes (engine.Warnings). The spec is applied as written.
func (p *Forwarder) Warnings() map[string][]string {
	m := make(map[string][]string, 2)
	for _, d := range p.dirs {
		m[d.iface] = d.specWarnings()
	}
	return m
}

// Stats returns the counters of both directions.
func (p *Forwarder) Stats() control.Stats {
	var st control.Stats
	for _, d := range p.dirs {
		snap := d.pl.Snapshot()
		d.addPassed(&snap)
		var sched *schedule.State
		if r := d.sched.Load(); r != nil {
			v := r.State()
			sched = &v
		}
		st.Directions = append(st.Directions, control.Direction{
			Schedule: sched,
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
			Latency: d.latency(),
		})
	}
	if p.opt.Tap != nil {
		ts := p.opt.Tap.Stats()
		st.Tap = &ts
	}
	return st
}

// closeWhenDone calls close when ctx is cancelled, unless done is closed
// first (the proxy stopped by itself).
func closeWhenDone(ctx context.Context, done <-chan struct{}, close func() error) {
	if ctx.Done() == nil {
		return
	}
	go func() {
		select {
		case <-ctx.Done():
			close()
		case <-done:
		}
	}()
}
