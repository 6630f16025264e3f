package engine

import (
	"math"

	"github.com/wanlab/wanlab/tc/spec"
)

// shaper is the part of a shaping stage that decides when a packet may
// leave (tbf's buckets; a trace's delivery opportunities), with the queue
// left to a child Qdisc. A kind registers one as stageKind.shaper; the
// pipeline then runs "KIND ... | QDISC" as a shapedStage.
type shaper interface {
	// ready is the first time at or after now at which a packet of size
	// bytes may leave, if nothing else is sent before.
	ready(now int64, size int) int64
	// sent charges a packet of size bytes leaving at now (= a time ready
	// returned).
	sent(now int64, size int)
	// oversize reports whether a packet of size bytes can never leave
	// (tbf's max_size); the stage drops it before it reaches the queue.
	oversize(size int) bool
}

// shapedStage is a shaping qdisc with a child queue discipline, as the
// kernel's tbf with "tc qdisc add ... parent 1:1 KIND": packets queue in
// the child, and the shaper takes them out. It mirrors tbf_dequeue: the
// shaper peeks at the child's head (right after a packet leaves, and when
// a packet arrives), asks its buckets when that packet may go, and
// dequeues it then. For codel, fq_codel and pie the peek is
// qdisc_peek_dequeued, which runs their dequeue at peek time: that is when
// they measure sojourn and drop, so codel's sojourn includes the wait for
// tokens of every packet before it, and the peeked packet still counts in
// the child's limit.
//
// Unlike the FIFO-only tbfStage, departures are decided at dequeue, not
// at entry (an AQM can drop or reorder what is queued). Times are event
// times, as under a perfect qdisc watchdog, except on a real clock, where
// a late dequeue charges the shaper at the real time (see clock).
type shapedStage struct {
	cfg   spec.Stage // the shaper's spec
	child spec.Stage // the child qdisc's spec (nil: a default the shaper chose)
	sh    shaper
	q     Qdisc
	ctr   Counters // the shaping stage: everything it holds, child included
	qctr  Counters // the child qdisc's own (sojourn in it, its drops)
	env   stageEnv
	// peeked is the child's head as its peek returned it, waiting for
	// the shaper; due is when the shaper lets it go.
	peeked *Packet
	due    int64
	// clock, on a real clock (Options.RealClock: the proxy), is the time
	// of the dequeue in progress: a dequeue that comes after the head was
	// due sends it then, as tbf_dequeue does when its watchdog fired
	// late, and the shaper charges it then (tbf caps its tokens at the
	// bucket, so a late dequeue sends at most a bucket's worth at once).
	clock *realClock
}

func newShapedStage(cfg spec.Stage, sh shaper, child spec.Stage, q Qdisc) *shapedStage {
	s := &shapedStage{cfg: cfg, child: child, sh: sh, q: q}
	s.env.stage = &s.ctr
	s.env.child = &s.qctr
	return s
}

func (s *shapedStage) kind() string        { return s.cfg.Kind() }
func (s *shapedStage) spec() string        { return s.cfg.String() }
func (s *shapedStage) counters() *Counters { return &s.ctr }

func (s *shapedStage) len() int { return s.q.Len() }

func (s *shapedStage) enqueue(p *Packet, now int64, c *chain, idx int) {
	s.ctr.in(p)
	s.env.c, s.env.idx = c, idx
	if s.sh.oversize(len(p.Data)) {
		c.drop(p, idx, DropOversize)
		return
	}
	s.qctr.in(p)
	s.q.Enqueue(p, now, &s.env)
	if s.peeked == nil {
		s.peek(now)
	}
}

// peek asks the child for its next packet at now (qdisc ->peek) and the
// shaper when it may leave.
func (s *shapedStage) peek(now int64) {
	p := s.q.Peek(now, &s.env)
	s.peeked = p
	if p != nil {
		s.due = s.sh.ready(now, len(p.Data))
	}
}

func (s *shapedStage) next() (int64, bool) {
	if s.peeked == nil || s.due == never {
		return 0, false
	}
	return s.due, true
}

func (s *shapedStage) pop(now int64) (*Packet, bool) {
	if s.peeked == nil || s.due > now {
		return nil, false
	}
	if s.clock != nil && s.clock.on && s.clock.now > now {
		now = s.clock.now
	}
	p := s.q.Dequeue(now, &s.env)
	if p == nil { // cannot happen: a peeked packet stays the head
		s.peek(now)
		return nil, false
	}
	s.qctr.out(p, now-p.enq)
	s.sh.sent(now, len(p.Data))
	s.peek(now)
	return p, false
}

func (s *shapedStage) head() (*Packet, bool) { return s.peeked, false }

func (s *shapedStage) earliest(t int64, size int) int64 {
	if s.peeked != nil {
		return max(t, s.due)
	}
	if s.sh.oversize(size) {
		return t
	}
	return s.sh.ready(t, size)
}

// childView is the child qdisc's place in the chain: it holds nothing
// itself (its packets are counted by the shaping stage in front, as a
// qdisc's qlen counts its children's), shows the child's own counters in
// snapshots, and passes on what the shaper sends.
type childView struct{ s *shapedStage }

func (v *childView) kind() string        { return v.s.child.Kind() }
func (v *childView) spec() string        { return v.s.child.String() }
func (v *childView) counters() *Counters { return &v.s.qctr }
func (v *childView) len() int            { return 0 }
func (v *childView) enqueue(p *Packet, now int64, c *chain, idx int) {
	c.enqueueAt(idx+1, p, now)
}
func (v *childView) next() (int64, bool)           { return 0, false }
func (v *childView) pop(int64) (*Packet, bool)     { return nil, false }
func (v *childView) head() (*Packet, bool)         { return nil, false }
func (v *childView) earliest(t int64, _ int) int64 { return t }

// tbfShaper is sch_tbf.c's token accounting in tbf_dequeue, in the
// kernel's own units: the buckets hold nanoseconds of transmission time
// (toks = min(now - t_c + tokens, buffer) - psched_l2t_ns(rate, len)),
// and a packet leaves when both buckets are non-negative after charging
// it, else the watchdog fires when the shorter one will be.
//
// Two tbf token implementations stay, on purpose: a tbf with a child qdisc
// must decide at dequeue (the child picks the packet, so departures
// cannot be computed at entry as tbfStage does), while the plain tbfStage
// keeps the golang.org/x/time/rate accounting whose departures the
// accuracy benches and the model tests pin (the two differ by 1-688 ns of
// rounding, below what either clock resolves).
type tbfShaper struct {
	rate, peak      float64 // bytes per second (peak 0: none)
	buffer, mtu     int64   // bucket sizes in ns of transmission
	tokens, ptokens int64
	tc              int64 // time of the last charge (t_c)
	maxSize         int
	mpu             int
}

func newTBFShaper(cfg *spec.TBF, now int64) *tbfShaper {
	t := &tbfShaper{rate: float64(cfg.Rate) / 8, mpu: int(min(cfg.MPU, math.MaxInt32)), tc: now}
	burst := int(min(cfg.Burst, math.MaxInt32))
	t.buffer = l2t(t.rate, burst)
	t.maxSize = burst
	if cfg.PeakRate != 0 {
		t.peak = float64(cfg.PeakRate) / 8
		mtu := int(min(cfg.MTU, math.MaxInt32))
		t.mtu = l2t(t.peak, mtu)
		t.maxSize = min(t.maxSize, mtu)
	}
	t.tokens, t.ptokens = t.buffer, t.mtu // tbf_change fills both buckets
	return t
}

// l2t is psched_l2t_ns: the ns size bytes take at bytesPerSec.
func l2t(bytesPerSec float64, size int) int64 {
	v := float64(size) * 1e9 / bytesPerSec
	if !(v < maxWait) {
		return maxWait
	}
	return int64(v)
}

func (t *tbfShaper) charge(now int64, size int) (toks, ptoks int64) {
	cost := max(size, t.mpu)
	toks = min(now-t.tc+t.tokens, t.buffer) - l2t(t.rate, cost)
	if t.peak > 0 {
		ptoks = min(now-t.tc+t.ptokens, t.mtu) - l2t(t.peak, cost)
	}
	return toks, ptoks
}

func (t *tbfShaper) ready(now int64, size int) int64 {
	toks, ptoks := t.charge(now, size)
	if toks >= 0 && ptoks >= 0 {
		return now
	}
	return now + max(-toks, -ptoks)
}

func (t *tbfShaper) sent(now int64, size int) {
	t.tokens, t.ptokens = t.charge(now, size)
	t.tc = now
}

func (t *tbfShaper) oversize(size int) bool { return size > t.maxSize || max(size, t.mpu) > t.maxSize }
