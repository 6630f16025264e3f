package proxy

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wanlab/wanlab/proxy/device"
	"github.com/wanlab/wanlab/proxy/release"
	"github.com/wanlab/wanlab/proxy/tap"
	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/schedule"
	"github.com/wanlab/wanlab/tc/spec"
)

// direction is the path of packets leaving through one interface: read
// from its TUN by readLoop, impaired by its pipeline, written back to the
// same TUN by its release loop (the kernel then routes them by the main
// table, out of iface).
//
// Goroutines: a reader per queue of the TUN (one, or the queues of a
// device.Multi) does the per-packet work on the CPU that took the packet
// in (the offload backend's GSO split, the length check, the tap record)
// and enqueues whole batches into the direction's one pipeline, whose
// mutex orders them (a stamp older than what the pipeline processed
// counts from that time, as for a single reader that lost the lock to the
// release loop). Dequeue and the writes happen under wmu, from the release
// loop's thread for packets that wait, and straight from a reader for
// packets due at once (an empty spec, or a rate with tokens left): that
// saves the wake-up of the loop's thread, tens of µs, on every hop.
// Dequeuing and writing under one lock keeps the departure order on the
// wire. Each packet leaves through the queue it came in by, which keeps
// each flow on one queue (device.Multi) and so in order. Control calls
// Swap, Spec and Snapshot, which the pipeline's mutex serialises.
type direction struct {
	index  int
	iface  string
	dev    device.Device
	queues []device.Device // dev's queues (device.QueuesOf)
	pl     *engine.Pipeline
	pool   *engine.Pool
	loop   *release.Loop
	tap    *tap.Tap
	wall   int64 // wall-clock offset for the tap
	budget *engine.MemoryBudget

	stopping atomic.Bool
	// classes is the direction's impairment in force: its class set, a
	// plain pipeline's of one leaf (spec.PipelineClasses), nil for none.
	classes atomic.Pointer[spec.Classes]

	// sched runs the direction's schedule (Options.Schedules), nil
	// without one.
	sched atomic.Pointer[schedule.Runner]

	// lat, when set, is told of every batch (Options.Activity).
	lat interface{ Touch(now int64) }

	// late measures how far writes ran behind departures (lateness.go).
	late lateness

	malformed  atomic.Uint64
	readErrors atomic.Uint64
	// cuts counts the smaller super-packets units were cut into
	// (gsoSegmenter.Cut), where a loss or a limit parted their segments.
	cuts        atomic.Uint64
	writeErrors atomic.Uint64

	// warnings caches the spec's warnings (engine.Warnings) for the spec
	// text they were computed for; warnMu guards both.
	warnMu   sync.Mutex
	warnText string
	warnings []string

	readers []*reader

	// pass says the readers pass frames whole (passthrough.go), passed
	// counts what they passed.
	pass   atomic.Bool
	passed passCounters
	// whole says the readers hand GSO frames to the engine as units
	// (units.go); units are the pools of their buffers.
	whole atomic.Bool
	units *unitPools

	// Release state, guarded by wmu.
	wmu   sync.Mutex
	out   []*engine.Packet
	wbufs [][]byte
	// byQueue holds a release's packets per queue (more than one queue).
	byQueue [][]*engine.Packet
	// dequeued is when the packets being written left the engine
	// (lateness.record).
	dequeued int64
}

// reader is one queue's reader and its buffers, owned by its readLoop.
type reader struct {
	queue  uint16
	dev    device.Device
	batch  int     // the most packets one read returns (dev.BatchSize)
	stamps []int64 // each packet's read time (drainReads)
	rpkts  []*engine.Packet
	rbufs  [][]byte
	sizes  []int
	rbatch []*engine.Packet
	// arrivals holds rbatch's arrival stamps, copied before EnqueueBatch:
	// the engine recycles a packet it drops (and the release loop one it
	// sent) at once, so a packet's Arrival cannot be read after it.
	arrivals []int64
	arrSegs  []uint64 // rbatch's segment counts, copied with arrivals
	// readToEnqueue is control.Latency's, one per reader so that readers
	// on different CPUs do not share its counters.
	readToEnqueue latencyHistogram
	// raw is the queue's whole-frame access (nil if it has none), frame
	// the buffer of a whole frame, passing whether the last read was
	// one (passthrough.go).
	raw     device.Raw
	frame   []byte
	passing bool
	// unit is the buffer of the next frame readUnits reads (units.go).
	unit *engine.Packet
}

func (p *Forwarder) newDirection(i int, dev device.Device, im spec.Impairment) (*direction, error) {
	d := &direction{index: i, iface: p.opt.Ifaces[i], dev: dev, pool: p.pool, units: p.units, tap: p.opt.Tap, wall: p.wallOffset, budget: p.budget}
	// RealClock: Release dequeues at the real time it runs, so a tbf
	// stage caps a late release at its bucket as the kernel's does.
	opt := engine.Options{Direction: d.iface, Seed: p.seed + uint64(i), RealClock: true, Start: release.MonotonicNow(), Memory: p.budget,
		Segmenter: gsoSegmenter{pool: d.pool, units: d.units, cuts: &d.cuts}}
	if d.tap != nil {
		opt.OnDrop = func(pk *engine.Packet, reason engine.DropReason) {
			d.tap.Dropped(d.index, d.wallTime(release.MonotonicNow()), pk.Data, reason.String())
		}
	}
	setup, err := newSetup(im.Classes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.iface, err)
	}
	pl, err := engine.NewPipeline(nil, setup.Options(opt))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.iface, err)
	}
	d.pl = pl
	d.classes.Store(im.Classes)
	d.queues = device.QueuesOf(dev)
	n := max(dev.BatchSize(), 1)
	for q, qd := range d.queues {
		// Room for drainReads: a batch's worth more buffers than one
		// read fills at most, where a read takes several packets.
		m := n
		if n > 1 {
			m = 2 * n
		}
		r := &reader{queue: uint16(q), dev: qd, batch: n, rpkts: make([]*engine.Packet, m), rbufs: make([][]byte, m),
			sizes: make([]int, m), stamps: make([]int64, m), rbatch: make([]*engine.Packet, 0, m), arrivals: make([]int64, 0, m), arrSegs: make([]uint64, 0, m),
			raw: device.RawOf(qd)}
		for k := range r.rpkts {
			r.rpkts[k] = d.pool.Get()
			r.rbufs[k] = r.rpkts[k].Buf()
		}
		d.readers = append(d.readers, r)
	}
	d.pass.Store(d.passable(im))
	d.whole.Store(d.wholeUnits())
	d.out = make([]*engine.Packet, 0, 1024)
	d.wbufs = make([][]byte, 0, n)
	if len(d.queues) > 1 {
		d.byQueue = make([][]*engine.Packet, len(d.queues))
		for q := range d.byQueue {
			d.byQueue[q] = make([]*engine.Packet, 0, 1024)
		}
	}
	loop, err := release.Start(d, release.Config{Realtime: p.opt.Realtime, Early: p.opt.ReleaseSpin})
	if err != nil {
		return nil, err
	}
	d.loop = loop
	return d, nil
}

func (d *direction) wallTime(mono int64) time.Time { return time.Unix(0, d.wall+mono) }

// readLoop reads batches from r's queue of the TUN, stamps them once,
// drops malformed packets and hands the rest to the pipeline, waking the
// release loop when one of them is due before what it waits for.
func (d *direction) readLoop(r *reader) {
	for {
		if r.raw != nil && d.pass.Load() {
			if !d.passFrames(r) {
				return
			}
			continue
		}
		if r.passing {
			r.passing = false
			r.raw.Resume()
		}
		if r.raw != nil && d.whole.Load() {
			if !d.readUnits(r) {
				return
			}
			continue
		}
		n, now, err := r.drainReads()
		if err != nil {
			if d.stopping.Load() || errors.Is(err, os.ErrClosed) {
				return
			}
			if r.raw != nil && errors.Is(err, os.ErrDeadlineExceeded) {
				// An interrupt of the raw read that came after Resume.
				r.raw.Resume()
				continue
			}
			d.readErrors.Add(1)
			// Errors after a partial read still deliver the n packets
			// (wireguard-go's GSO split may stop short).
		}
		d.handleBatch(r, n, now)
	}
}

// handleBatch takes the n packets a read (or a drain of reads) left in
// r's buffers, the last read at now: it drops malformed ones and hands
// the rest to the pipeline, waking the release loop when one of them is
// due before what it waits for.
func (d *direction) handleBatch(r *reader, n int, now int64) {
	if n == 0 {
		return
	}
	r.rbatch = r.rbatch[:0]
	for k := range n {
		pk := r.rpkts[k]
		pk.SetLen(r.sizes[k])
		l, ok := ipLength(pk.Data)
		if !ok {
			d.malformed.Add(1)
			continue // the buffer stays in rpkts for the next read
		}
		pk.Data = pk.Data[:l]
		pk.Arrival = r.stamps[k]
		pk.Queue = r.queue
		if d.tap != nil {
			d.tap.Entered(d.index, d.wallTime(pk.Arrival), pk.Data)
		}
		r.rbatch = append(r.rbatch, pk)
		fresh := d.pool.Get()
		r.rpkts[k] = fresh
		r.rbufs[k] = fresh.Buf()
	}
	d.enqueueRead(r, now)
}

// enqueueRead hands r.rbatch, the packets a reader took in (the last read
// at now), to the pipeline, waking the release loop when one of them is
// due before what it waits for.
func (d *direction) enqueueRead(r *reader, now int64) {
	if len(r.rbatch) == 0 {
		return
	}
	if d.lat != nil {
		d.lat.Touch(now)
	}
	// The arrival stamps and segment counts are copied before the engine
	// owns the packets (a dropped one is back in the pool, its Arrival
	// zeroed): read after, a drop's stamp was 0 and its sample the
	// machine's uptime.
	r.arrivals, r.arrSegs = r.arrivals[:0], r.arrSegs[:0]
	for _, pk := range r.rbatch {
		r.arrivals = append(r.arrivals, pk.Arrival)
		r.arrSegs = append(r.arrSegs, uint64(pk.Segments()))
	}
	next, ok := d.pl.EnqueueBatch(r.rbatch, now)
	clear(r.rbatch)
	r.rbatch = r.rbatch[:0]
	// One stamp per batch, for the histogram and a release at once;
	// a drained batch's reads each have their own arrival. A unit
	// counts as its segments.
	enqueued := release.MonotonicNow()
	t := tally{h: &r.readToEnqueue}
	for i, j := 0, 0; i < len(r.arrivals); i = j {
		a, segs := r.arrivals[i], r.arrSegs[i]
		for j = i + 1; j < len(r.arrivals) && r.arrivals[j] == a; j++ {
			segs += r.arrSegs[j]
		}
		t.addN(enqueued-a, segs)
	}
	t.flush()
	if ok && next <= now {
		d.Release(enqueued)
		next, ok = d.pl.NextDeparture()
	}
	if ok {
		d.loop.Notify(next)
	}
}

// drainReads reads a batch, blocking until one comes, then reads on while
// the queue holds more and a whole read's room is left: the packets that
// queued while the last ones were handled go through the engine and out
// together, and the writer's GRO joins a flow's packets into one write
// (64-byte UDP: a write per packet otherwise). One poll that does not wait
// a read more. Each read's packets arrive when it returns (stamps), so
// that none leaves before its delay from when the proxy had it; now is the
// last read's.
func (r *reader) drainReads() (n int, now int64, err error) {
	n, err = r.dev.Read(r.rbufs, r.sizes, engine.Headroom)
	now = release.MonotonicNow()
	stamp(r.stamps[:n], now)
	for err == nil && n > 0 && len(r.rbufs)-n >= r.batch && device.Pending(r.dev) {
		var m int
		m, err = r.dev.Read(r.rbufs[n:], r.sizes[n:], engine.Headroom)
		now = release.MonotonicNow()
		stamp(r.stamps[n:n+m], now)
		n += m
		if m == 0 {
			break
		}
	}
	return n, now, err
}

func stamp(s []int64, now int64) {
	for i := range s {
		s[i] = now
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
	// Stamped after the lock and the engine's work, which a late
	// departure waited for too.
	d.dequeued = release.MonotonicNow()
	if d.byQueue == nil {
		d.writeBatches(0, d.out)
	} else {
		// Each queue's packets in departure order: a flow is on one
		// queue, so its order on the wire is kept.
		for _, pk := range d.out {
			q := int(pk.Queue)
			if q >= len(d.byQueue) {
				q = 0
			}
			d.byQueue[q] = append(d.byQueue[q], pk)
		}
		for q, pkts := range d.byQueue {
			d.writeBatches(q, pkts)
			clear(pkts)
			d.byQueue[q] = pkts[:0]
		}
	}
	for k, pk := range d.out {
		d.pl.Release(pk) // to its own pool: a unit's is not d.pool
		d.out[k] = nil
	}
}

// writeBatches writes pkts to queue q in batches of its size, a unit
// (units.go) alone and whole.
func (d *direction) writeBatches(q int, pkts []*engine.Packet) {
	dev := d.queues[q]
	batch := max(dev.BatchSize(), 1)
	start := 0
	for k, pk := range pkts {
		if pk.Segments() > 1 {
			d.write(dev, pkts[start:k])
			d.writeUnit(d.readers[q].raw, pkts[k:k+1])
			start = k + 1
			continue
		}
		if pk.Flags&engine.FlagCorrupted != 0 {
			d.write(dev, pkts[start:k])
			d.write(dev, pkts[k:k+1])
			start = k + 1
			continue
		}
		if k+1-start == batch {
			d.write(dev, pkts[start:k+1])
			start = k + 1
		}
	}
	d.write(dev, pkts[start:])
}

func (d *direction) write(dev device.Device, pkts []*engine.Packet) {
	if len(pkts) == 0 {
		return
	}
	d.wbufs = d.wbufs[:0]
	for _, pk := range pkts {
		d.wbufs = append(d.wbufs, pk.Buf()[:engine.Headroom+len(pk.Data)])
	}
	if _, err := dev.Write(d.wbufs, engine.Headroom); err != nil && !d.stopping.Load() {
		d.writeErrors.Add(1)
	}
	mono := release.MonotonicNow()
	d.late.record(d.dequeued, mono, pkts)
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
		d.pl.Release(pk)
	}
	d.out = d.out[:0]
	for _, r := range d.readers {
		for _, pk := range r.rpkts {
			d.pool.Put(pk)
		}
		if r.unit != nil {
			d.pl.Release(r.unit)
		}
	}
}
