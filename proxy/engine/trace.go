package engine

import (
	"sort"

	"github.com/wanlab/wanlab/proxy/spec"
	"github.com/wanlab/wanlab/proxy/trace"
)

// traceStage replays a mahimahi mm-link trace as mahimahi's LinkQueue
// does (src/frontend/link_queue.cc, rationalize): at each delivery
// opportunity the link may send trace.OpportunityBytes bytes, taken from
// the packet in transit and then from the head of its queue, so one
// opportunity can finish several small packets and a packet larger than
// what is left continues at the next opportunity. An opportunity that
// finds nothing to send is lost. A packet leaves at the opportunity that
// carries its last byte.
//
// The packet being sent (in transit) has left the queue, as in mahimahi,
// and is dequeued at the opportunity that starts it, so a child queue
// that decides at dequeue (an AQM) sees the time service starts. The
// trace starts when the stage is built (the spec applied), loops with its
// period (its last timestamp) unless Once, and after the last opportunity
// of a Once trace the link is gone: what it holds and what arrives is
// dropped (mahimahi's mm-link exits then).
//
// As read_packet calls rationalize(now) before it enqueues, a packet
// arriving at an idle link is served from the first opportunity strictly
// after its arrival.
type traceStage struct {
	cfg      *spec.Trace
	ctr      Counters
	q        traceQueue
	times    []uint32
	start    int64 // ns: the time of millisecond 0 of the first loop
	periodNs int64
	once     bool

	// The next opportunity not yet used: times[idx] in loop base (ns
	// offset of the loop); done once a Once trace ran out.
	idx  int
	base int64
	done bool
	// The opportunity in progress: its time and the bytes it has left
	// (0: none in progress).
	opT    int64
	opLeft int
	// The packet in transit and the bytes it still needs.
	transit     *Packet
	transitLeft int

	// Where the stage sits, for drops outside enqueue.
	c    *chain
	idx0 int
}

// traceQueue is the trace stage's buffer: the child queue that holds what
// waits for an opportunity.
type traceQueue interface {
	// enqueue takes p at time now, or refuses it (tail drop).
	enqueue(p *Packet, now int64) bool
	// dequeue hands out the head at time now (nil: empty).
	dequeue(now int64) *Packet
	len() int
}

// dropTail is the trace stage's default buffer: a FIFO of at most limit
// packets that refuses arrivals beyond it.
type dropTail struct {
	q     fifo
	limit int
}

func (d *dropTail) enqueue(p *Packet, _ int64) bool {
	if d.q.len() >= d.limit {
		return false
	}
	d.q.push(p)
	return true
}

func (d *dropTail) dequeue(int64) *Packet {
	if d.q.len() == 0 {
		return nil
	}
	return d.q.pop()
}

func (d *dropTail) len() int { return d.q.len() }

func newTraceStage(cfg *spec.Trace, now int64, q traceQueue) *traceStage {
	if q == nil {
		q = &dropTail{limit: spec.DefaultTraceLimit}
	}
	t := &traceStage{cfg: cfg, q: q, times: cfg.Times, start: now, once: cfg.Once}
	t.periodNs = int64(cfg.Times[len(cfg.Times)-1]) * 1e6
	return t
}

func (t *traceStage) kind() string        { return "trace" }
func (t *traceStage) spec() string        { return t.cfg.Summary() }
func (t *traceStage) counters() *Counters { return &t.ctr }

func (t *traceStage) len() int {
	n := t.q.len()
	if t.transit != nil {
		n++
	}
	return n
}

// cursor is the time of the next unused opportunity.
func (t *traceStage) cursor() int64 { return t.start + t.base + int64(t.times[t.idx])*1e6 }

// step moves the cursor past one opportunity.
func (t *traceStage) step() {
	t.idx++
	if t.idx == len(t.times) {
		t.idx = 0
		t.base += t.periodNs
		if t.once {
			t.done = true
		}
	}
}

// seek moves an idle link's cursor to the first opportunity after now:
// those before went by with nothing to send.
func (t *traceStage) seek(now int64) {
	if t.done || t.cursor() > now {
		return
	}
	rel := now - t.start
	k := rel / t.periodNs
	if t.once && k > 0 {
		t.done = true
		return
	}
	t.base = k * t.periodNs
	in := rel - t.base
	t.idx = sort.Search(len(t.times), func(i int) bool { return int64(t.times[i])*1e6 > in })
	// times ends at the period, which is beyond in: idx is in range.
}

func (t *traceStage) enqueue(p *Packet, now int64, c *chain, idx int) {
	t.ctr.in(p)
	t.c, t.idx0 = c, idx
	if t.len() == 0 && t.opLeft == 0 {
		t.seek(now)
	}
	if t.done || !t.q.enqueue(p, now) {
		c.drop(p, idx, DropQueue)
	}
}

func (t *traceStage) next() (int64, bool) {
	if t.transit == nil && t.q.len() == 0 {
		return 0, false
	}
	if t.opLeft > 0 {
		return t.opT, true
	}
	if t.done {
		// A Once trace ran out with packets inside: they are dropped at
		// the last opportunity's time.
		return t.opT, true
	}
	return t.cursor(), true
}

// pop serves the opportunity at now: the packet it finishes, or nil when
// it only advanced the one in transit (or found nothing to send).
func (t *traceStage) pop(now int64) (*Packet, bool) {
	if t.done && t.opLeft == 0 {
		t.dropAll()
		return nil, false
	}
	if t.opLeft == 0 {
		t.opT, t.opLeft = t.cursor(), trace.OpportunityBytes
		t.step()
	}
	if t.transit == nil {
		if t.transit = t.q.dequeue(now); t.transit == nil {
			t.opLeft = 0 // nothing to send: the rest of the opportunity is lost
			return nil, false
		}
		t.transitLeft = len(t.transit.Data)
	}
	take := min(t.opLeft, t.transitLeft)
	t.opLeft -= take
	t.transitLeft -= take
	if t.transitLeft > 0 {
		return nil, false // continues at the next opportunity
	}
	p := t.transit
	t.transit = nil
	if t.q.len() == 0 {
		t.opLeft = 0
	}
	return p, false
}

// dropAll drops what a Once trace that ran out still holds.
func (t *traceStage) dropAll() {
	if t.transit != nil {
		t.c.drop(t.transit, t.idx0, DropQueue)
		t.transit = nil
	}
	for p := t.q.dequeue(t.opT); p != nil; p = t.q.dequeue(t.opT) {
		t.c.drop(p, t.idx0, DropQueue)
	}
}

func (t *traceStage) head() (*Packet, bool) {
	avail := t.opLeft
	if avail == 0 {
		avail = trace.OpportunityBytes
	}
	if t.transit != nil && t.transitLeft <= avail && !t.done {
		return t.transit, false
	}
	return nil, false
}

// earliest: a packet entering at at leaves at an opportunity after at at
// the soonest.
func (t *traceStage) earliest(at int64, _ int) int64 { return at }

func init() {
	registerStage("trace", stageKind{
		build: func(st spec.Stage, _ uint64, now int64, _ *Pipeline) stage {
			return newTraceStage(st.(*spec.Trace), now, nil)
		},
		expect: expectTrace,
	})
}

// expectTrace is a trace stage's share of Simulate's prediction: its mean
// capacity is the bottleneck, its buffer drains at that rate.
func expectTrace(stage spec.Stage, e *Expected, _, _ *float64) {
	st := stage.(*spec.Trace)
	r := float64(st.Trace().MeanRate())
	e.BottleneckBps = minRate(e.BottleneckBps, r)
	if r > 0 {
		e.QueueDelayMaxMs += float64(spec.DefaultTraceLimit) * trace.OpportunityBytes * 8 / r * 1e3
	}
}
