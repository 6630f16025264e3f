package engine

import (
	"fmt"

	"github.com/wanlab/wanlab/tc/spec"
)

// Qdisc is a queue discipline: the queue a shaping stage (tbf, trace)
// holds its packets in, as the kernel's tbf holds them in its child qdisc
// ("tc qdisc add ... parent 1:1 fq_codel"). The shaper decides when a
// packet may leave; the qdisc decides which packet that is and which ones
// it drops or marks on the way. The kinds are pfifo, bfifo, codel,
// fq_codel, pie and red, each mirroring its kernel source.
//
// Calls come in non-decreasing time order, under the pipeline's lock, and
// must not allocate in steady state. Every drop and ECN mark goes through
// the QdiscEnv the caller passes, which counts it and recycles the packet.
type Qdisc interface {
	// Enqueue takes p at time now (the qdisc's enqueue). The qdisc keeps
	// p, or drops it (env.Drop), possibly dropping queued packets
	// instead (fq_codel drops from its fattest flow).
	Enqueue(p *Packet, now int64, env QdiscEnv)
	// Peek returns the packet Dequeue will return next without taking
	// it out (the qdisc's ->peek), or nil when it holds none. A shaper
	// peeks to learn the head's size and when it may send it. For codel,
	// fq_codel and pie it is the kernel's qdisc_peek_dequeued: the
	// dequeue runs at now (sojourn measured, AQM drops done) and its
	// packet is stashed, still counted in Len and Backlog, so an
	// arrival's limit check sees it. pfifo, bfifo and red peek at their
	// head without dequeuing.
	Peek(now int64, env QdiscEnv) *Packet
	// Dequeue takes out and returns the packet the qdisc sends at now,
	// the one Peek returned if there was one, or nil when it holds none.
	// AQMs that drop at dequeue (codel, fq_codel) do so here, through
	// env.
	Dequeue(now int64, env QdiscEnv) *Packet
	// Len and Backlog are what the qdisc holds: packets and bytes.
	Len() int
	Backlog() int64
}

// QdiscEnv is where a qdisc reports what it did to packets.
type QdiscEnv interface {
	// Drop discards p, which the qdisc had taken (or is refusing in
	// Enqueue), for reason.
	Drop(p *Packet, reason DropReason)
	// Marked records that the qdisc set CE on p instead of dropping it.
	Marked(p *Packet)
}

// queueKind builds a kind's queue discipline. seed seeds its randomness
// (pie, red), now is the time it starts at.
type queueKind func(st spec.Stage, seed uint64, now int64) Qdisc

var queueKinds = map[string]queueKind{}

// registerQdisc adds a queue discipline kind: it then works as a shaping
// stage's child ("tbf ... | KIND"), as a stage of its own ("delay 20ms |
// KIND", see queueStage) and as an htb leaf's queue.
func registerQdisc(kind string, build queueKind) {
	if _, dup := queueKinds[kind]; dup {
		panic("engine: qdisc kind " + kind + " registered twice")
	}
	queueKinds[kind] = build
	registerStage(kind, stageKind{
		build: func(st spec.Stage, seed uint64, now int64, _ *Pipeline) stage {
			return newQueueStage(st, build(st, seed, now))
		},
	})
}

// NewQdisc builds the queue discipline of a queue stage (pfifo, bfifo,
// codel, fq_codel, pie, red), for a scheduler that keeps its classes'
// queues itself (an htb leaf) or a shaping stage outside this package.
func NewQdisc(st spec.Stage, seed uint64, now int64) (Qdisc, error) {
	if st == nil {
		return nil, fmt.Errorf("%w: nil qdisc", ErrBadSpec)
	}
	build, ok := queueKinds[st.Kind()]
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a queue discipline", ErrBadSpec, st.Kind())
	}
	if err := (&spec.Spec{Stages: []spec.Stage{st}}).Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSpec, err)
	}
	return build(st, seed, now), nil
}

// pktList is an intrusive singly linked FIFO of packets (through
// Packet.qnext): the queues of the qdiscs, which never allocate.
type pktList struct {
	head, tail *Packet
	n          int
	bytes      int64
}

func (l *pktList) push(p *Packet) {
	p.qnext = nil
	if l.tail == nil {
		l.head = p
	} else {
		l.tail.qnext = p
	}
	l.tail = p
	l.n++
	l.bytes += int64(len(p.Data))
}

func (l *pktList) pop() *Packet {
	p := l.head
	if p == nil {
		return nil
	}
	l.head = p.qnext
	if l.head == nil {
		l.tail = nil
	}
	p.qnext = nil
	l.n--
	l.bytes -= int64(len(p.Data))
	return p
}

// stageEnv is the QdiscEnv of a stage in a chain: drops and marks count
// on the stage (and, for a child qdisc, on its own counters too).
type stageEnv struct {
	c     *chain
	idx   int
	child *Counters // the child qdisc's own counters, or nil
	stage *Counters
}

func (e *stageEnv) Drop(p *Packet, reason DropReason) {
	if e.child != nil {
		e.child.dropped(p, reason)
	}
	e.c.drop(p, e.idx, reason)
}

func (e *stageEnv) Marked(p *Packet) {
	if p.Flags&FlagECNMarked != 0 {
		return // marked once already (codel's ce_threshold after its law)
	}
	p.Flags |= FlagECNMarked
	if e.child != nil {
		e.child.ECNMarked++ // the child qdisc marked it, not the shaper
		return
	}
	e.stage.ECNMarked++
}

// queueStage is a queue discipline standing as a stage of its own, with
// no shaper in front: "delay 20ms | codel", or "codel" alone. It
// dequeues as fast as the next stage accepts, and every stage accepts at
// once, so it holds a packet only for the instant between its enqueue and
// the pipeline's next move, and an AQM in it never sees a standing queue.
// That is what the kernel does with a classless root qdisc on a device
// faster than the traffic (a root codel on a 10 Gbit/s NIC fed 100 Mbit/s
// never drops: the driver takes every packet as it is enqueued). A queue
// builds only behind something slower: put a shaper in front ("tbf ... |
// codel") or use it as an htb leaf.
type queueStage struct {
	cfg spec.Stage
	q   Qdisc
	ctr Counters
	env stageEnv
	// pending is when the packets in q became available (their enqueue
	// time): the stage's next event.
	pending int64
}

func newQueueStage(cfg spec.Stage, q Qdisc) *queueStage {
	s := &queueStage{cfg: cfg, q: q}
	s.env.stage = &s.ctr
	return s
}

func (s *queueStage) kind() string        { return s.cfg.Kind() }
func (s *queueStage) spec() string        { return s.cfg.String() }
func (s *queueStage) counters() *Counters { return &s.ctr }
func (s *queueStage) len() int            { return s.q.Len() }

func (s *queueStage) enqueue(p *Packet, now int64, c *chain, idx int) {
	s.ctr.in(p)
	s.env.c, s.env.idx = c, idx
	if s.q.Len() == 0 {
		s.pending = now
	}
	s.q.Enqueue(p, now, &s.env)
}

func (s *queueStage) next() (int64, bool) {
	if s.q.Len() == 0 {
		return 0, false
	}
	return s.pending, true
}

func (s *queueStage) pop(now int64) (*Packet, bool) {
	p := s.q.Dequeue(now, &s.env)
	if s.q.Len() == 0 {
		// qdisc_restart dequeues until the qdisc returns nothing: that
		// last, empty dequeue is where red starts its idle period.
		s.q.Dequeue(now, &s.env)
	}
	return p, false
}

func (s *queueStage) head() (*Packet, bool) { return nil, false }

func (s *queueStage) earliest(t int64, _ int) int64 { return t }

// stash is qdisc_peek_dequeued for the qdiscs whose ->peek dequeues
// (codel, fq_codel, pie): the packet a peek dequeued, kept until Dequeue
// hands it out and counted in the qdisc's length and backlog meanwhile.
type stash struct{ p *Packet }

// peek returns the stashed packet, dequeuing one with deq first if none.
func (s *stash) peek(now int64, env QdiscEnv, deq func(int64, QdiscEnv) *Packet) *Packet {
	if s.p == nil {
		s.p = deq(now, env)
	}
	return s.p
}

// take returns and forgets the stashed packet, or dequeues with deq.
func (s *stash) take(now int64, env QdiscEnv, deq func(int64, QdiscEnv) *Packet) *Packet {
	if p := s.p; p != nil {
		s.p = nil
		return p
	}
	return deq(now, env)
}

// n and bytes are what the stash holds.
func (s *stash) n() int {
	if s.p != nil {
		return 1
	}
	return 0
}

func (s *stash) bytes() int64 {
	if s.p != nil {
		return int64(len(s.p.Data))
	}
	return 0
}

// queueHolder marks the stages that hold a queue discipline (for
// snapshots: their sojourn is a queue's).
type queueHolder interface{ holdsQdisc() }

func (*queueStage) holdsQdisc()  {}
func (*shapedStage) holdsQdisc() {}
func (*childView) holdsQdisc()   {}

// LeafQueue runs a queue discipline as a class scheduler's queue for one
// class: an htb leaf whose spec ends in a queue kind ("leaf 1:2
// fq_codel") holds its packets in that qdisc, which htb dequeues from as
// the kernel's htb_dequeue_tree does from the leaf's qdisc. What the
// qdisc drops of the packets it held goes to the function SetDrop gave
// (the pipeline counts it for the class and recycles it); a packet it
// refuses at Enqueue is left to the caller, as a full queue's is.
type LeafQueue struct {
	q        Qdisc
	class    int
	drop     func(p *Packet, class int, reason DropReason)
	refusing *Packet
	refused  bool
}

// NewLeafQueue builds st's qdisc as the queue of engine class class.
func NewLeafQueue(st spec.Stage, seed uint64, now int64, class int) (*LeafQueue, error) {
	q, err := NewQdisc(st, seed, now)
	if err != nil {
		return nil, err
	}
	return &LeafQueue{q: q, class: class}, nil
}

// XStats is the qdisc's xstats at now (nil for pfifo and bfifo).
func (l *LeafQueue) XStats(now int64) *XStats { return QdiscXStats(l.q, now) }

// SetDrop sets where the packets the qdisc drops go.
func (l *LeafQueue) SetDrop(f func(p *Packet, class int, reason DropReason)) { l.drop = f }

// Enqueue offers p at now; false: the qdisc refused p.
func (l *LeafQueue) Enqueue(p *Packet, _ int, now int64) bool {
	l.refusing, l.refused = p, false
	l.q.Enqueue(p, now, l)
	l.refusing = nil
	return !l.refused
}

// Dequeue returns the packet the qdisc sends at now.
func (l *LeafQueue) Dequeue(now int64) (*Packet, int, bool) {
	p := l.q.Dequeue(now, l)
	if p == nil {
		return nil, 0, false
	}
	return p, len(p.Data), true
}

// Len is the packets the qdisc holds.
func (l *LeafQueue) Len() int { return l.q.Len() }

// Bytes is the bytes the qdisc holds.
func (l *LeafQueue) Bytes() uint64 { return uint64(l.q.Backlog()) }

// Drop implements QdiscEnv.
func (l *LeafQueue) Drop(p *Packet, reason DropReason) {
	if p == l.refusing {
		l.refused = true
		return
	}
	if l.drop != nil {
		l.drop(p, l.class, reason)
		return
	}
	release(p)
}

// Marked implements QdiscEnv.
func (l *LeafQueue) Marked(p *Packet) { p.Flags |= FlagECNMarked }
