package engine

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/wanlab/wanlab/tc/spec"
)

// stage is one qdisc of a chain. A stage holds packets, knows when its head
// leaves (next) and hands it over at that time (pop). Stages never read a
// clock: every call carries the time it happens at.
type stage interface {
	kind() string
	spec() string
	counters() *Counters
	// enqueue takes p at time now. It keeps p, or drops it through
	// c.drop, or re-enters packets at the root through c.enqueueAt.
	enqueue(p *Packet, now int64, c *chain, idx int)
	// next is when the stage's next packet leaves it (ok false: empty).
	next() (t int64, ok bool)
	// pop is called at time now = the t next returned. It returns the
	// packet leaving (nil if a slot or similar postponed it) and whether
	// it bypasses the rest of the chain (netem's reordered packets).
	pop(now int64) (p *Packet, bypass bool)
	// len is the number of packets the stage holds.
	len() int
	// head is the packet next refers to (nil if none or if the event is
	// not a packet leaving, e.g. a slot opening) and whether it will
	// bypass the rest of the chain.
	head() (p *Packet, bypass bool)
	// earliest is a lower bound on when a packet of size bytes entering
	// at time t would leave the stage, given its current state.
	earliest(t int64, size int) int64
}

// chain is the stage list built from one spec: stage i's child is stage
// i+1, and the last stage's output leaves the pipeline.
type chain struct {
	pl     *Pipeline
	class  *class
	spec   *spec.Spec
	stages []stage
	// units: every stage takes a unit whole (carriesUnits).
	units bool
	// pending segments of a unit being cut into stage pendingAbove
	// (splitInto) count as held by the stages above it.
	pending, pendingAbove int
}

// heldFrom is the number of packets held by stage i and its descendants:
// a qdisc's q.qlen counts its children's packets too.
func (c *chain) heldFrom(i int) int {
	n := 0
	if i < c.pendingAbove {
		n = c.pending
	}
	for _, s := range c.stages[i:] {
		n += s.len()
	}
	return n
}

func (c *chain) empty() bool { return c.heldFrom(0) == 0 }

// enqueueAt hands p to stage i at time now (or out of the pipeline after
// the last stage).
func (c *chain) enqueueAt(i int, p *Packet, now int64) {
	if i >= len(c.stages) {
		c.pl.deliver(c, p, now)
		return
	}
	if !c.class.busy && !c.class.removed {
		c.pl.markBusy(c.class)
	}
	p.stageIn = now
	c.stages[i].enqueue(p, now, c, i)
}

// drop discards p, which stage i had counted in.
func (c *chain) drop(p *Packet, i int, reason DropReason) {
	c.stages[i].counters().dropped(p, reason)
	c.class.totals.dropped(p, reason)
	c.pl.discard(p, reason)
}

// dropUnstaged discards p, which was admitted but never entered a stage
// (a duplicate refused by the queue limit together with its original).
func (c *chain) dropUnstaged(p *Packet, reason DropReason) {
	c.class.totals.dropped(p, reason)
	c.pl.discard(p, reason)
}

// Options configure a Pipeline.
type Options struct {
	// Direction names the pipeline in snapshots (e.g. the egress
	// interface).
	Direction string
	// Seed seeds the stages' PRNGs: stage i of a chain gets a seed derived
	// from Seed, its class and i, unless its spec carries "seed N". With
	// the same Seed, the same packets and the same times, every decision
	// repeats bit for bit.
	Seed uint64
	// OnDrop, if set, is called (under the pipeline's lock, so it must not
	// block or call the pipeline) with each packet the engine discards,
	// before the packet goes back to its pool. It must not keep p.
	OnDrop func(p *Packet, reason DropReason)
	// Classes, if non-empty, makes the pipeline a set of traffic classes:
	// Classifier picks a class per packet, each class runs its
	// own chain, and their outputs merge in departure order. Without
	// Classes the pipeline has one class, "default", running the spec
	// given to NewPipeline.
	Classes []ClassSpec
	// Classifier picks a class index for a packet; out-of-range results
	// go to class 0. Nil sends everything to class 0.
	Classifier Classifier
	// RealClock says Dequeue's now is the real time packets leave (the
	// proxy's release loop, which may wake late), not merely a time up to
	// which events are due: a tbf stage then caps what a late dequeue
	// sends at its bucket, as the kernel's tbf does, and times the rest
	// again (see tbfStage). Without it (Simulate, the tests of the model)
	// every departure is the one a perfect watchdog gives.
	RealClock bool
	// Start is the time the stages NewPipeline builds start at (a trace
	// stage's millisecond 0, a tbf's full bucket); Swap starts the new
	// stages at its own time.
	Start int64
	// Memory, if set, bounds the memory of the packets inside (shared with
	// other pipelines holding the same budget): a packet arriving, or a
	// duplicate made, while it is spent is dropped as a queue drop.
	Memory *MemoryBudget
	// Segmenter cuts units (Packet.SetUnit) into their segments where a
	// stage does not take them whole; required to enqueue units.
	Segmenter Segmenter
	// Scheduler, if set, takes each packet leaving its class's chain and
	// decides when it leaves the pipeline (a class hierarchy sharing one
	// link: package htb). Nil: packets leave when their chain releases
	// them.
	Scheduler Scheduler
}

// ClassSpec is one traffic class: a name and its stage pipeline.
type ClassSpec struct {
	Name string
	Spec *spec.Spec
}

// Classifier maps a packet (its IP header and payload) to a class index.
// It is called on the reader's goroutine under the pipeline's lock and
// must not allocate or block.
type Classifier interface {
	Classify(data []byte) int
}

// class is one traffic class: its current chain and the chains of earlier
// specs still draining after a Swap.
type class struct {
	name     string
	index    int
	current  *chain
	retiring []*chain
	totals   Counters
	removed  bool // Replace took the class out; its chains drain into successor
	// busy: the class is in Pipeline.busy (its chains may hold packets).
	busy bool
	// successor is the class of the same name after a Replace (nil: none).
	successor *class
}

// Pipeline is one direction's impairment engine. See the package comment
// for who calls what.
type Pipeline struct {
	mu         sync.Mutex
	opt        Options
	classes    []*class
	totals     Counters
	out        fifo
	last       int64 // latest time the pipeline has processed
	seq        uint64
	swaps      uint64
	generation uint64
	// orphans are chains of classes a Replace removed, draining.
	orphans []*chain
	// busy are the classes whose chains may hold packets, in class order:
	// the only ones the event scans visit, so that a tree of thousands of
	// classes costs per event what its classes holding packets cost. A
	// class joins when a packet enters one of its chains and leaves when
	// a scan finds every chain of it empty.
	busy []*class
	// clock is the real time of the call in progress, which the tbf
	// stages read (RealClock); draining turns it off (Drain).
	clock    realClock
	draining bool
	// arriving and moving hold the segments of a unit cut on entry
	// (enqueueUnit) and at a stage (chain.splitInto).
	arriving, moving []*Packet
	// handing holds the segments of a unit handed to a scheduler
	// (deliver, handOver).
	handing []*Packet
}

// DefaultClass is the name of a plain pipeline's one class.
const DefaultClass = "default"

// NewPipeline builds a pipeline running s (nil or empty: no impairment).
// When opt.Classes is set, s is ignored and each class runs its own spec.
func NewPipeline(s *spec.Spec, opt Options) (*Pipeline, error) {
	pl := &Pipeline{opt: opt}
	specs := opt.Classes
	if len(specs) == 0 {
		specs = []ClassSpec{{Name: DefaultClass, Spec: s}}
	}
	for i, cs := range specs {
		cl := &class{name: cs.Name, index: i}
		c, err := pl.build(cl, cs.Spec, opt.Start)
		if err != nil {
			if cs.Name != DefaultClass { // a plain pipeline's errors are its own
				return nil, fmt.Errorf("class %q: %w", cs.Name, err)
			}
			return nil, err
		}
		cl.current = c
		pl.classes = append(pl.classes, cl)
	}
	if sd, ok := opt.Scheduler.(SchedulerDropper); ok {
		sd.SetDrop(pl.dropsOf(pl.classes))
	}
	return pl, nil
}

// ErrBadSpec wraps errors about specs the engine cannot run.
var ErrBadSpec = errors.New("bad spec")

// build makes a chain for s whose stages start at time now.
func (pl *Pipeline) build(cl *class, s *spec.Spec, now int64) (*chain, error) {
	if s == nil {
		s = &spec.Spec{}
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSpec, err)
	}
	c := &chain{pl: pl, class: cl, spec: s}
	pl.generation++
	for i := 0; i < len(s.Stages); i++ {
		st := s.Stages[i]
		seed := mix(pl.opt.Seed, uint64(cl.index), uint64(i), pl.generation)
		k, ok := stageKinds[st.Kind()]
		if !ok {
			return nil, fmt.Errorf("%w: stage %d: unknown kind %q", ErrBadSpec, i+1, st.Kind())
		}
		if IsChild(s, i) {
			// One stage holding the shaper and its child qdisc, and a
			// view of the child in the child's place.
			child := s.Stages[i+1]
			q := queueKinds[child.Kind()](child, mix(pl.opt.Seed, uint64(cl.index), uint64(i+1), pl.generation), now)
			sh := newShapedStage(st, k.shaper(st, now), child, q)
			if pl.opt.RealClock {
				sh.clock = &pl.clock
			}
			c.stages = append(c.stages, sh, &childView{s: sh})
			i++
			continue
		}
		c.stages = append(c.stages, k.build(st, seed, now, pl))
	}
	c.units = c.carriesUnits()
	return c, nil
}

// mix derives a stage seed (splitmix64 over the inputs).
func mix(vs ...uint64) uint64 {
	var h uint64 = 0x243f6a8885a308d3
	for _, v := range vs {
		h ^= v + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)
		h ^= h >> 30
		h *= 0xbf58476d1ce4e5b9
		h ^= h >> 27
		h *= 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

// Enqueue gives p to the pipeline; the pipeline owns it from now on.
// p.Arrival is its arrival stamp (set to now when zero); all its timing is
// computed from it. It returns the pipeline's next departure time
// afterwards, so the caller can wake its release loop (release.Loop.Notify).
//
// Arrivals should come in non-decreasing order. A packet stamped before
// the time the pipeline already processed (the release goroutine got the
// lock first) still has its timing computed from its stamp; if that puts
// its departure before the processed time, the next Dequeue returns it.
func (pl *Pipeline) Enqueue(p *Packet, now int64) (next int64, ok bool) {
	pl.mu.Lock()
	pl.enqueueLocked(p, now)
	next, ok = pl.nextLocked()
	pl.mu.Unlock()
	return next, ok
}

// EnqueueBatch enqueues ps in order under one lock acquisition.
func (pl *Pipeline) EnqueueBatch(ps []*Packet, now int64) (next int64, ok bool) {
	pl.mu.Lock()
	for _, p := range ps {
		pl.enqueueLocked(p, now)
	}
	next, ok = pl.nextLocked()
	pl.mu.Unlock()
	return next, ok
}

func (pl *Pipeline) enqueueLocked(p *Packet, now int64) {
	if p.Arrival == 0 {
		p.Arrival = now
	}
	entry := max(p.Arrival, pl.last)
	pl.advance(entry)
	if p.isUnit() {
		pl.enqueueUnit(p, now)
		return
	}
	pl.seq++
	p.Seq = pl.seq
	p.Flags = 0
	cl := pl.classes[0]
	if pl.opt.Classifier != nil && len(pl.classes) > 1 {
		if i := pl.opt.Classifier.Classify(p.Data); i > 0 && i < len(pl.classes) {
			cl = pl.classes[i]
		}
	}
	pl.admit(cl, p)
	if pl.overBudget() {
		cl.totals.dropped(p, DropQueue)
		pl.discard(p, DropQueue)
		return
	}
	// The root stage computes from the arrival stamp itself, even when the
	// release goroutine already processed a later time.
	cl.current.enqueueAt(0, p, p.Arrival)
}

// overBudget reports whether the packets inside (the one just admitted
// included) take more than the memory budget.
func (pl *Pipeline) overBudget() bool {
	b := pl.opt.Memory
	return b != nil && b.held.Load() > b.limit
}

// markBusy adds cl to pl.busy, keeping class order (ties between
// classes' events go to the lower class, as a scan of all classes would).
func (pl *Pipeline) markBusy(cl *class) {
	cl.busy = true
	i := sort.Search(len(pl.busy), func(i int) bool { return pl.busy[i].index > cl.index })
	pl.busy = append(pl.busy, nil)
	copy(pl.busy[i+1:], pl.busy[i:])
	pl.busy[i] = cl
}

// pruneBusy drops the classes whose chains are all empty from pl.busy.
func (pl *Pipeline) pruneBusy() {
	w := 0
	for _, cl := range pl.busy {
		if len(cl.retiring) == 0 && cl.current.empty() {
			cl.busy = false
			continue
		}
		pl.busy[w] = cl
		w++
	}
	clear(pl.busy[w:])
	pl.busy = pl.busy[:w]
}

// admit counts p into the pipeline's and its class's totals (an arrival
// or a duplicate).
func (pl *Pipeline) admit(cl *class, p *Packet) {
	pl.totals.in(p)
	cl.totals.in(p)
	if b := pl.opt.Memory; b != nil {
		b.held.Add(packetMemory(p))
	}
}

// deliver takes p out of chain c's last stage at time t.
func (pl *Pipeline) deliver(c *chain, p *Packet, t int64) {
	if c.class.removed {
		pl.handOver(c.class, p, t)
		return
	}
	if pl.opt.Scheduler != nil {
		if p.isUnit() {
			pl.handing = pl.segmentsOf(p, pl.handing[:0])
			for _, s := range pl.handing {
				pl.deliver(c, s, t)
			}
			clear(pl.handing)
			return
		}
		if !pl.opt.Scheduler.Enqueue(c.class.index, p, t) {
			c.class.totals.dropped(p, DropQueue)
			pl.discard(p, DropQueue)
		}
		return
	}
	pl.leave(c.class, p, t)
}

// leave sends p out of the pipeline at time t.
func (pl *Pipeline) leave(cl *class, p *Packet, t int64) {
	if b := pl.opt.Memory; b != nil {
		b.held.Add(-packetMemory(p))
	}
	p.Depart = t
	cl.totals.out(p, t-p.Arrival)
	pl.totals.out(p, t-p.Arrival)
	if p.Flags&FlagECNMarked != 0 {
		// Counted here, whichever stage or leaf qdisc marked it: the
		// totals' (and ecn_marked_total's) marks are packets delivered CE.
		cl.totals.ECNMarked++
		pl.totals.ECNMarked++
	}
	pl.out.push(p)
}

// discard drops p: counts it, tells OnDrop and recycles it.
func (pl *Pipeline) discard(p *Packet, reason DropReason) {
	if b := pl.opt.Memory; b != nil {
		b.held.Add(-packetMemory(p))
	}
	pl.totals.dropped(p, reason)
	if pl.opt.OnDrop != nil {
		pl.opt.OnDrop(p, reason)
	}
	release(p)
}

// advance processes every stage event up to and including now, in time
// order (upstream stages first on ties, older chains first), each at its
// own time.
func (pl *Pipeline) advance(now int64) {
	if now < pl.last {
		now = pl.last
	}
	// Every caller's now is the real time of its call on a real clock
	// (the reader's read stamp, the release loop's wake-up): what is due
	// by then leaves now.
	pl.clock = realClock{now: now, on: pl.opt.RealClock && !pl.draining}
	at := pl.last // time of the latest event processed
	pl.pruneBusy()
	for {
		var bc *chain
		bi := -1
		bt := int64(math.MaxInt64)
		for _, cl := range pl.busy {
			for _, c := range cl.retiring {
				for i, s := range c.stages {
					if t, ok := s.next(); ok && t < bt {
						bt, bc, bi = t, c, i
					}
				}
			}
			for i, s := range cl.current.stages {
				if t, ok := s.next(); ok && t < bt {
					bt, bc, bi = t, cl.current, i
				}
			}
		}
		for _, c := range pl.orphans {
			for i, s := range c.stages {
				if t, ok := s.next(); ok && t < bt {
					bt, bc, bi = t, c, i
				}
			}
		}
		if sc := pl.opt.Scheduler; sc != nil {
			// Stage events first on ties: a packet reaching the
			// scheduler at t competes for the slot at t. The scheduler
			// never sends before the latest event processed (a packet
			// that reached it at that time may be the one it picks).
			if t, ok := sc.Next(); ok && max(t, at) < bt && max(t, at) <= now {
				t = max(t, at)
				if p, ci, ok := sc.Dequeue(t); ok {
					pl.leave(pl.classes[ci], p, t)
					continue
				}
			}
		}
		if bc == nil || bt > now {
			break
		}
		s := bc.stages[bi]
		at = max(at, bt)
		p, bypass := s.pop(bt)
		if p == nil {
			continue
		}
		s.counters().out(p, bt-p.stageIn)
		if bypass {
			pl.deliver(bc, p, bt)
		} else {
			bc.enqueueAt(bi+1, p, bt)
		}
		if len(bc.class.retiring) > 0 && bc != bc.class.current && bc.empty() {
			pl.retire(bc)
		}
		if bc.class.removed && bc.empty() {
			pl.dropOrphan(bc)
		}
	}
	pl.clock.on = false
	pl.last = now
}

// retire forgets a drained chain of an earlier spec.
func (pl *Pipeline) retire(c *chain) {
	r := c.class.retiring
	for i, x := range r {
		if x == c {
			copy(r[i:], r[i+1:])
			r[len(r)-1] = nil
			c.class.retiring = r[:len(r)-1]
			return
		}
	}
}

// NextDeparture returns the earliest time at which Dequeue may return a
// packet (ok false: the pipeline holds nothing). A packet moving between
// stages also counts, so the time is never later than the next real
// departure; Dequeue at that time may return nothing.
func (pl *Pipeline) NextDeparture() (int64, bool) {
	pl.mu.Lock()
	t, ok := pl.nextLocked()
	pl.mu.Unlock()
	return t, ok
}

func (pl *Pipeline) nextLocked() (int64, bool) {
	if pl.out.len() > 0 {
		return pl.out.peek().Depart, true
	}
	bt, found := int64(math.MaxInt64), false
	pl.pruneBusy()
	for _, cl := range pl.busy {
		for _, c := range cl.retiring {
			if t, ok := c.nextDeparture(); ok && t < bt {
				bt, found = t, true
			}
		}
		if t, ok := cl.current.nextDeparture(); ok && t < bt {
			bt, found = t, true
		}
	}
	for _, c := range pl.orphans {
		if t, ok := c.nextDeparture(); ok && t < bt {
			bt, found = t, true
		}
	}
	if sc := pl.opt.Scheduler; sc != nil {
		if t, ok := sc.Next(); ok && t < bt {
			bt, found = t, true
		}
	}
	return bt, found
}

// nextDeparture is a lower bound on the chain's next departure. A packet
// about to move between stages is followed through the stages below with
// their earliest(), so a release loop is not woken for a move whose packet
// then waits in a backlogged tbf: the move is processed, at its own time,
// by whichever call comes next.
func (c *chain) nextDeparture() (int64, bool) {
	bt, found := int64(math.MaxInt64), false
	last := len(c.stages) - 1
	for i, s := range c.stages {
		t, ok := s.next()
		if !ok || t >= bt {
			continue
		}
		if i < last {
			if p, bypass := s.head(); p != nil && !bypass {
				for _, down := range c.stages[i+1:] {
					t = down.earliest(t, len(p.Data))
				}
			}
		}
		if t < bt {
			bt, found = t, true
		}
	}
	return bt, found
}

// Dequeue processes the pipeline up to now and appends every packet whose
// departure is at or before now to out, in departure order, returning the
// extended slice. The caller owns the returned packets (send, then
// Pool.Put). Passing out[:0] of a reused slice keeps it allocation-free.
func (pl *Pipeline) Dequeue(now int64, out []*Packet) []*Packet {
	pl.mu.Lock()
	pl.advance(now)
	for pl.out.len() > 0 {
		out = append(out, pl.out.pop())
	}
	pl.mu.Unlock()
	return out
}

// Drain returns every packet still inside, at its departure under a
// perfect watchdog whatever the real time (the proxy, stopping, discards
// them).
func (pl *Pipeline) Drain(out []*Packet) []*Packet {
	pl.mu.Lock()
	pl.draining = true
	pl.advance(math.MaxInt64 / 2)
	pl.draining = false
	for pl.out.len() > 0 {
		out = append(out, pl.out.pop())
	}
	pl.mu.Unlock()
	return out
}

// Release puts a packet obtained from Dequeue back into its pool.
func (pl *Pipeline) Release(p *Packet) { release(p) }

// Swap replaces class 0's spec (the pipeline's only class unless
// Options.Classes made several; SwapClass picks one) at time now,
// atomically with respect to Enqueue and Dequeue. Packets
// already inside keep the departure they were given or will get under the
// old stages, which drain alongside the new ones: nothing in flight is
// lost, reordered or retimed by the swap; packets arriving after it see
// only the new spec (a new tbf starts with a full bucket, as tbf_change
// refills it). A spec the engine cannot run is rejected and the running
// one kept.
//
// Swap and Replace both stay: Swap keeps a class and its counters and lets
// the old chain drain as it would have, Replace changes the set of
// classes and hands queued packets over by name (and is a Swap when a
// plain pipeline replaces a plain pipeline).
func (pl *Pipeline) Swap(s *spec.Spec, now int64) error {
	return pl.SwapClass(0, s, now)
}

// SwapClass replaces class i's spec (see Swap).
func (pl *Pipeline) SwapClass(i int, s *spec.Spec, now int64) error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if i < 0 || i >= len(pl.classes) {
		return fmt.Errorf("class %d: no such class", i)
	}
	return pl.swapLocked(i, s, now)
}

// swapLocked is SwapClass under the pipeline's lock.
func (pl *Pipeline) swapLocked(i int, s *spec.Spec, now int64) error {
	pl.advance(now)
	cl := pl.classes[i]
	c, err := pl.build(cl, s, max(now, pl.last))
	if err != nil {
		return err
	}
	if !cl.current.empty() {
		cl.retiring = append(cl.retiring, cl.current)
	}
	cl.current = c
	pl.swaps++
	return nil
}

// ClassQueuePackets is class i's packets inside the pipeline (its
// Totals.QueuePackets), without copying every class as Snapshot does.
func (pl *Pipeline) ClassQueuePackets(i int) uint64 {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if i < 0 || i >= len(pl.classes) {
		return 0
	}
	return pl.classes[i].totals.QueuePackets
}

// Snapshot copies the counters. It allocates (slices for classes and
// stages) and is meant for stats and metrics, not the packet path.
func (pl *Pipeline) Snapshot() Snapshot {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	snap := Snapshot{Direction: pl.opt.Direction, Totals: pl.totals, Swaps: pl.swaps}
	for _, cl := range pl.classes {
		cs := ClassSnapshot{Name: cl.name, Spec: cl.current.spec.String(), Totals: cl.totals}
		for _, s := range cl.current.stages {
			_, queue := s.(queueHolder)
			cs.Stages = append(cs.Stages, StageSnapshot{Kind: s.kind(), Spec: s.spec(), Queue: queue, Counters: *s.counters(), XStats: stageXStats(s, pl.last)})
		}
		snap.Classes = append(snap.Classes, cs)
	}
	if sc, ok := pl.opt.Scheduler.(SchedulerStats); ok {
		snap.Scheduler = sc.SchedulerStats(pl.last)
	}
	return snap
}
