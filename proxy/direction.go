package proxy

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wanlab/wanlab/proxy/device"
	"github.com/wanlab/wanlab/proxy/engine"
	"github.com/wanlab/wanlab/proxy/release"
	"github.com/wanlab/wanlab/proxy/schedule"
	"github.com/wanlab/wanlab/proxy/spec"
	"github.com/wanlab/wanlab/proxy/tap"
)

// direction is the path of packets leaving through one interface: read
// from its TUN by readLoop, impaired by its pipeline, written back to the
// same TUN by its release loop (the kernel then routes them by the main
// table, out of iface).
//
// Goroutines: readLoop is the only caller of Enqueue. Dequeue and
// dev.Write happen under wmu, from the release loop's thread for packets
// that wait, and straight from readLoop for packets due at once (an empty
// spec, or a rate with tokens left): that saves the wake-up of the loop's
// thread, tens of µs, on every hop. Dequeuing and writing under one lock
// keeps the departure order on the wire. Control calls Swap, Spec and
// Snapshot, which the pipeline's mutex serialises.
type direction struct {
	index int
	iface string
	dev   device.Device
	pl    *engine.Pipeline
	pool  *engine.Pool
	loop  *release.Loop
	tap   *tap.Tap
	wall  int64 // wall-clock offset for the tap

	stopping atomic.Bool
	// classes is the direction's class set, nil for a plain spec
	// (classes.go).
	classes atomic.Pointer[spec.Classes]

	// sched runs the direction's schedule (Options.Schedules), nil
	// without one.
	sched atomic.Pointer[schedule.Runner]

	// lat, when set, is told of every batch (Options.Activity).
	lat interface{ Touch(now int64) }

	// late measures how far writes ran behind departures (lateness.go).
	late lateness

	malformed   atomic.Uint64
	readErrors  atomic.Uint64
	writeErrors atomic.Uint64

	// warnings caches the spec's warnings (engine.Warnings) for the spec
	// text they were computed for; warnMu guards both.
	warnMu   sync.Mutex
	warnText string
	warnings []string

	// Reader state, owned by readLoop.
	rpkts  []*engine.Packet
	rbufs  [][]byte
	sizes  []int
	rbatch []*engine.Packet

	// Release state, guarded by wmu.
	wmu   sync.Mutex
	out   []*engine.Packet
	wbufs [][]byte
}

func (p *Forwarder) newDirection(i int, dev device.Device, im spec.Impairment) (*direction, error) {
	d := &direction{index: i, iface: p.opt.Ifaces[i], dev: dev, pool: p.pool, tap: p.opt.Tap, wall: p.wallOffset}
	// RealClock: Release dequeues at the real time it runs, so a tbf
	// stage caps a late release at its bucket as the kernel's does.
	opt := engine.Options{Direction: d.iface, Seed: p.seed + uint64(i), RealClock: true, Start: release.MonotonicNow()}
	if d.tap != nil {
		opt.OnDrop = func(pk *engine.Packet, reason engine.DropReason) {
			d.tap.Dropped(d.index, d.wallTime(release.MonotonicNow()), pk.Data, reason.String())
		}
	}
	cs := im.Classes
	if cs != nil {
		var err error
		if opt, err = classOptions(cs, opt); err != nil {
			return nil, fmt.Errorf("%s: %w", d.iface, err)
		}
	}
	pl, err := engine.NewPipeline(im.Pipeline, opt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.iface, err)
	}
	d.pl = pl
	d.classes.Store(cs)
	n := max(dev.BatchSize(), 1)
	d.rpkts = make([]*engine.Packet, n)
	d.rbufs = make([][]byte, n)
	d.sizes = make([]int, n)
	d.rbatch = make([]*engine.Packet, 0, n)
	for k := range d.rpkts {
		d.rpkts[k] = d.pool.Get()
		d.rbufs[k] = d.rpkts[k].Buf()
	}
	d.out = make([]*engine.Packet, 0, 1024)
	d.wbufs = make([][]byte, 0, n)
	loop, err := release.Start(d, release.Config{Realtime: p.opt.Realtime, Early: p.opt.ReleaseSpin})
	if err != nil {
		return nil, err
	}
	d.loop = loop
	return d, nil
}

func (d *direction) wallTime(mono int64) time.Time { return time.Unix(0, d.wall+mono) }

// readLoop reads batches from the TUN, stamps them once, drops malformed
// packets and hands the rest to the pipeline, waking the release loop
// when one of them is due before what it waits for.
func (d *direction) readLoop() {
	for {
		n, err := d.dev.Read(d.rbufs, d.sizes, engine.Headroom)
		if err != nil {
			if d.stopping.Load() || errors.Is(err, os.ErrClosed) {
				return
			}
			d.readErrors.Add(1)
			// Errors after a partial read still deliver the n packets
			// (wireguard-go's GSO split may stop short).
		}
		if n == 0 {
			continue
		}
		now := release.MonotonicNow()
		if d.lat != nil {
			d.lat.Touch(now)
		}
		d.rbatch = d.rbatch[:0]
		for k := range n {
			pk := d.rpkts[k]
			pk.SetLen(d.sizes[k])
			l, ok := ipLength(pk.Data)
			if !ok {
				d.malformed.Add(1)
				continue // the buffer stays in rpkts for the next read
			}
			pk.Data = pk.Data[:l]
			pk.Arrival = now
			if d.tap != nil {
				d.tap.Entered(d.index, d.wallTime(now), pk.Data)
			}
			d.rbatch = append(d.rbatch, pk)
			fresh := d.pool.Get()
			d.rpkts[k] = fresh
			d.rbufs[k] = fresh.Buf()
		}
		if len(d.rbatch) == 0 {
			continue
		}
		next, ok := d.pl.EnqueueBatch(d.rbatch, now)
		if ok && next <= now {
			d.Release(release.MonotonicNow())
			next, ok = d.pl.NextDeparture()
		}
		if ok {
			d.loop.Notify(next)
		}
	}
}

// Release implements release.Queue: it writes every packet due by now to
// the TUN in batches and recycles them. Corrupted packets go out alone: in
// a batch, GRO could merge them and have the kernel recompute the
// checksum, hiding the corruption netem is meant to show.
func (d *direction) Release(now int64) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	d.out = d.pl.Dequeue(now, d.out[:0])
	if len(d.out) == 0 {
		return
	}
	batch := max(d.dev.BatchSize(), 1)
	start := 0
	for k, pk := range d.out {
		if pk.Flags&engine.FlagCorrupted != 0 {
			d.write(d.out[start:k])
			d.write(d.out[k : k+1])
			start = k + 1
			continue
		}
		if k+1-start == batch {
			d.write(d.out[start : k+1])
			start = k + 1
		}
	}
	d.write(d.out[start:])
	for k, pk := range d.out {
		d.pool.Put(pk)
		d.out[k] = nil
	}
}

func (d *direction) write(pkts []*engine.Packet) {
	if len(pkts) == 0 {
		return
	}
	d.wbufs = d.wbufs[:0]
	for _, pk := range pkts {
		d.wbufs = append(d.wbufs, pk.Buf()[:engine.Headroom+len(pk.Data)])
	}
	if _, err := d.dev.Write(d.wbufs, engine.Headroom); err != nil && !d.stopping.Load() {
		d.writeErrors.Add(1)
	}
	mono := release.MonotonicNow()
	d.late.record(mono, pkts)
	if d.tap != nil {
		now := d.wallTime(mono)
		for _, pk := range pkts {
			d.tap.Left(d.index, now, pk.Data)
		}
	}
	clear(d.wbufs)
}

// NextDeparture implements release.Queue.
func (d *direction) NextDeparture() (int64, bool) { return d.pl.NextDeparture() }

// drain discards what is still inside the pipeline after the loop and
// the reader stopped.
func (d *direction) drain() {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	d.out = d.pl.Drain(d.out[:0])
	for _, pk := range d.out {
		d.pool.Put(pk)
	}
	d.out = d.out[:0]
	for _, pk := range d.rpkts {
		d.pool.Put(pk)
	}
}
