package engine

import "fmt"

// Scheduler decides when packets leaving the classes' chains leave the
// pipeline, the way a classful qdisc (htb) dequeues from its leaves'
// qdiscs. The pipeline calls it under its lock, with non-decreasing times.
type Scheduler interface {
	// Enqueue takes p leaving class's chain at time now; false means
	// the scheduler refused it (a full queue) and the pipeline drops it.
	Enqueue(class int, p *Packet, now int64) bool
	// Next is the earliest time Dequeue returns a packet (ok false:
	// the scheduler holds none); it may be before now, meaning now.
	Next() (t int64, ok bool)
	// Dequeue returns the packet leaving at now and its class, or ok
	// false.
	Dequeue(now int64) (p *Packet, class int, ok bool)
}

// SchedulerStats is a Scheduler that reports statistics in snapshots
// (called under the pipeline's lock; the value must be a copy).
type SchedulerStats interface {
	SchedulerStats(now int64) []TreeClass
}

// SchedulerDropper is a Scheduler whose queues drop packets they held
// (an htb leaf's AQM): the pipeline gives it the function that counts
// such a drop for the packet's class and recycles the packet.
type SchedulerDropper interface {
	SetDrop(func(p *Packet, class int, reason DropReason))
}

// dropsOf is the function a SchedulerDropper drops through: the packet
// is counted for its class in classes, the list the scheduler's class
// indexes refer to (during a Replace the old scheduler still drains while
// the pipeline's list is the new one), and recycled.
func (pl *Pipeline) dropsOf(classes []*class) func(p *Packet, ci int, reason DropReason) {
	return func(p *Packet, ci int, reason DropReason) {
		if ci >= 0 && ci < len(classes) {
			classes[ci].totals.dropped(p, reason)
		}
		pl.discard(p, reason)
	}
}

// Drainer is a Scheduler that can hand back everything it holds, for
// Replace.
type Drainer interface {
	Drain(fn func(p *Packet, class int))
}

// Replace swaps the whole set of classes, their classifier and scheduler
// at time now, atomically with respect to Enqueue and Dequeue (a new
// class tree). Packets still in the old classes' stages keep the
// departures those stages give them; then they, and the packets the old
// scheduler held, go to the new scheduler's class of the same name (a
// leaf keeps its queue across a change of rates), or leave at once when
// the new classes have none of that name. Nothing in flight is lost
// except by a full queue of the new tree; packets arriving after the call
// see only the new classes. On error the running
// classes are kept.
func (pl *Pipeline) Replace(classes []ClassSpec, cl Classifier, sched Scheduler, now int64) error {
	if len(classes) == 0 {
		return fmt.Errorf("%w: no classes", ErrBadSpec)
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.plain() && len(classes) == 1 && classes[0].Name == DefaultClass && sched == nil {
		// A plain pipeline replacing a plain pipeline is a Swap: its one
		// class keeps its counters, its old chain drains as it would have.
		return pl.swapLocked(0, classes[0].Spec, now)
	}
	pl.advance(now)
	now = max(now, pl.last)
	var fresh []*class
	for i, cs := range classes {
		c := &class{name: cs.Name, index: i}
		ch, err := pl.build(c, cs.Spec, now)
		if err != nil {
			return fmt.Errorf("class %q: %w", cs.Name, err)
		}
		c.current = ch
		fresh = append(fresh, c)
	}
	old := pl.classes
	byName := make(map[string]*class, len(fresh))
	for _, c := range fresh {
		byName[c.name] = c
	}
	for _, c := range old {
		c.successor = byName[c.name]
	}
	oldSched := pl.opt.Scheduler
	if sd, ok := oldSched.(SchedulerDropper); ok {
		sd.SetDrop(pl.dropsOf(old)) // what it drops while it drains is the old classes'
	}
	pl.classes = fresh
	for _, c := range pl.busy {
		c.busy = false
	}
	pl.busy = pl.busy[:0] // the old classes' chains are orphans now
	pl.opt.Classes = classes
	pl.opt.Classifier = cl
	pl.opt.Scheduler = sched
	if sd, ok := sched.(SchedulerDropper); ok {
		sd.SetDrop(pl.dropsOf(fresh))
	}
	if d, ok := oldSched.(Drainer); ok {
		// What the old tree held moves to the new one's class of the same
		// name (its queue, in order), or leaves now if there is none.
		d.Drain(func(p *Packet, ci int) { pl.handOver(old[ci], p, now) })
	}
	for _, c := range old {
		c.removed = true
		for _, ch := range append(c.retiring, c.current) {
			if !ch.empty() {
				pl.orphans = append(pl.orphans, ch)
			}
		}
	}
	pl.swaps++
	return nil
}

// plain reports whether the pipeline runs a plain pipeline: its one
// class, DefaultClass, and no scheduler.
func (pl *Pipeline) plain() bool {
	return len(pl.classes) == 1 && pl.classes[0].name == DefaultClass && pl.opt.Scheduler == nil
}

// handOver passes p, leaving removed class c's chain (or its old
// scheduler) at time now, to the new scheduler's class of the same name,
// or out of the pipeline when there is none.
func (pl *Pipeline) handOver(c *class, p *Packet, now int64) {
	n := c.successor
	if n == nil || pl.opt.Scheduler == nil {
		pl.leave(c, p, now)
		return
	}
	if p.isUnit() {
		// A scheduler takes segments: a unit from a plain pipeline
		// Replace turned into a tree goes over as its segments.
		pl.handing = pl.segmentsOf(p, pl.handing[:0])
		for _, s := range pl.handing {
			pl.handOver(c, s, now)
		}
		clear(pl.handing)
		return
	}
	// The packet moves between classes' books: out of the old class's
	// totals, into the new one's.
	c.totals.QueuePackets--
	c.totals.QueueBytes -= uint64(len(p.Data))
	n.totals.QueuePackets++
	n.totals.QueueBytes += uint64(len(p.Data))
	if !pl.opt.Scheduler.Enqueue(n.index, p, now) {
		n.totals.dropped(p, DropQueue)
		pl.discard(p, DropQueue)
	}
}

// dropOrphan forgets a drained chain of a removed class.
func (pl *Pipeline) dropOrphan(c *chain) {
	for i, x := range pl.orphans {
		if x == c {
			pl.orphans = append(pl.orphans[:i], pl.orphans[i+1:]...)
			return
		}
	}
}
