package engine

import (
	"math"

	"github.com/wanlab/wanlab/tc/spec"
)

// CoDel as include/net/codel.h and include/net/codel_impl.h implement it,
// shared by codel (sch_codel.c) and fq_codel (one codelVars per flow).
// Times are the kernel's codel_time_t: u32 in units of 1024 ns
// (CODEL_SHIFT 10), compared with wrap-around as codel_time_after does.

const codelShift = 10

type codelTime uint32

func toCodelTime(ns int64) codelTime { return codelTime(uint64(ns) >> codelShift) }

func codelTimeAfter(a, b codelTime) bool   { return int32(a-b) > 0 }
func codelTimeAfterEq(a, b codelTime) bool { return int32(a-b) >= 0 }
func codelTimeBefore(a, b codelTime) bool  { return int32(a-b) < 0 }

// codelDisabledThreshold is CODEL_DISABLED_THRESHOLD: ce_threshold off.
const codelDisabledThreshold = codelTime(math.MaxInt32)

// recInvSqrtShift is REC_INV_SQRT_SHIFT: rec_inv_sqrt is a u16 holding
// the top bits of 1/sqrt(count) in Q0.32.
const recInvSqrtShift = 32 - 16

// codelParams is struct codel_params.
type codelParams struct {
	target, interval, ceThreshold codelTime
	mtu                           int64
	ecn                           bool
}

// codelVars is struct codel_vars.
type codelVars struct {
	count, lastcount uint32
	dropping         bool
	recInvSqrt       uint16
	firstAboveTime   codelTime
	dropNext         codelTime
	ldelay           codelTime
}

// codelStats is what codel_dequeue counts (struct codel_stats, and
// sch_codel's drop_overlimit): the kernel's xstats, kept for parity
// (the stage's Counters are what snapshots show).
type codelStats struct {
	maxPacket           int
	dropCount, ecnMark  uint32
	ceMark, dropOverlim uint64
}

func newCodelParams(target, interval, ce int64, ecn bool) codelParams {
	p := codelParams{target: toCodelTime(target), interval: toCodelTime(interval),
		ceThreshold: codelDisabledThreshold, mtu: codelMTU, ecn: ecn}
	if ce > 0 {
		p.ceThreshold = toCodelTime(ce)
	}
	return p
}

// codelMTU is psched_mtu of the device, which codel_should_drop compares
// the backlog with: 1514 for Ethernet (1500 + its header), as on the
// reference kernel's veth devices.
const codelMTU = 1514

// newtonStep is codel_Newton_step: one Newton iteration of
// rec_inv_sqrt = 1/sqrt(count).
func (v *codelVars) newtonStep() {
	invsqrt := uint32(v.recInvSqrt) << recInvSqrtShift
	invsqrt2 := uint32((uint64(invsqrt) * uint64(invsqrt)) >> 32)
	val := (uint64(3) << 32) - uint64(v.count)*uint64(invsqrt2)
	val >>= 2 // avoid overflow in the multiply below
	val = (val * uint64(invsqrt)) >> (32 - 2 + 1)
	v.recInvSqrt = uint16(val >> recInvSqrtShift)
}

// controlLaw is codel_control_law: t + interval/sqrt(count), with
// reciprocal_scale.
func controlLaw(t, interval codelTime, recInvSqrt uint16) codelTime {
	return t + codelTime((uint64(interval)*uint64(uint32(recInvSqrt)<<recInvSqrtShift))>>32)
}

// codelQueue is what codel_dequeue needs of its queue: dequeue_func,
// drop_func and the backlog it passes (sch->qstats.backlog for both
// codel and fq_codel, after the packet was taken out).
type codelQueue interface {
	codelDequeue() *Packet
	codelBacklog() int64
}

// shouldDrop is codel_should_drop.
func (v *codelVars) shouldDrop(p *Packet, q codelQueue, prm *codelParams, st *codelStats, now codelTime) bool {
	if p == nil {
		v.firstAboveTime = 0
		return false
	}
	v.ldelay = now - toCodelTime(p.enq)
	if n := len(p.Data); n > st.maxPacket {
		st.maxPacket = n
	}
	if codelTimeBefore(v.ldelay, prm.target) || q.codelBacklog() <= prm.mtu {
		// went below - stay below for at least interval
		v.firstAboveTime = 0
		return false
	}
	ok := false
	if v.firstAboveTime == 0 {
		// just went above from below: if it stays above for at least
		// interval, drop
		v.firstAboveTime = now + prm.interval
	} else if codelTimeAfter(now, v.firstAboveTime) {
		ok = true
	}
	return ok
}

// dequeue is codel_dequeue: the packet to send at now, after dropping
// (or marking) what the control law says, or nil when q is empty.
func (v *codelVars) dequeue(q codelQueue, prm *codelParams, st *codelStats, nowNs int64, env QdiscEnv) *Packet {
	now := toCodelTime(nowNs)
	p := q.codelDequeue()
	if p == nil {
		v.dropping = false
		return nil
	}
	drop := v.shouldDrop(p, q, prm, st, now)
	if v.dropping {
		if !drop {
			// sojourn time below target - leave dropping state
			v.dropping = false
		} else if codelTimeAfterEq(now, v.dropNext) {
			// It's time for the next drop. Drop the current packet and
			// dequeue the next. The dequeue might take us out of
			// dropping state; if not, schedule the next drop. A large
			// backlog might result in drop rates so high that the next
			// drop should happen now, hence the loop.
			for v.dropping && codelTimeAfterEq(now, v.dropNext) {
				v.count++
				v.newtonStep()
				if prm.ecn && setCE(p.Data) {
					st.ecnMark++
					env.Marked(p)
					v.dropNext = controlLaw(v.dropNext, prm.interval, v.recInvSqrt)
					goto end
				}
				env.Drop(p, DropAQM)
				st.dropCount++
				p = q.codelDequeue()
				if !v.shouldDrop(p, q, prm, st, now) {
					// leave dropping state
					v.dropping = false
				} else {
					// and schedule the next drop
					v.dropNext = controlLaw(v.dropNext, prm.interval, v.recInvSqrt)
				}
			}
		}
	} else if drop {
		if prm.ecn && setCE(p.Data) {
			st.ecnMark++
			env.Marked(p)
		} else {
			env.Drop(p, DropAQM)
			st.dropCount++
			p = q.codelDequeue()
			v.shouldDrop(p, q, prm, st, now)
		}
		v.dropping = true
		// if min went above target close to when we last went below
		// it, assume that the drop rate that controlled the queue on
		// the last cycle is a good starting point to control it now.
		delta := v.count - v.lastcount
		if delta > 1 && codelTimeBefore(now-v.dropNext, 16*prm.interval) {
			v.count = delta
			// we dont care if rec_inv_sqrt approximation is not very
			// precise: the Newton step converges quickly.
			v.newtonStep()
		} else {
			v.count = 1
			v.recInvSqrt = ^uint16(0) // ~0U >> REC_INV_SQRT_SHIFT
		}
		v.lastcount = v.count
		v.dropNext = controlLaw(now, prm.interval, v.recInvSqrt)
	}
end:
	if p != nil && codelTimeAfter(v.ldelay, prm.ceThreshold) && setCE(p.Data) {
		st.ceMark++
		env.Marked(p)
	}
	return p
}

// codelQdisc is sch_codel.c: a packet-limited FIFO (codel_qdisc_enqueue
// tail-drops at limit) whose dequeue runs codel_dequeue.
type codelQdisc struct {
	q     pktList
	limit int
	prm   codelParams
	vars  codelVars
	stats codelStats
	st    stash
}

func newCoDel(cfg *spec.CoDel) *codelQdisc {
	return &codelQdisc{limit: int(cfg.PacketLimit()),
		prm: newCodelParams(int64(cfg.TargetTime()), int64(cfg.IntervalTime()), int64(cfg.CEThreshold), cfg.ECN)}
}

// Enqueue is codel_qdisc_enqueue.
func (c *codelQdisc) Enqueue(p *Packet, now int64, env QdiscEnv) {
	if c.Len() < c.limit {
		p.enq = now // codel_set_enqueue_time
		c.q.push(p)
		return
	}
	c.stats.dropOverlim++
	env.Drop(p, DropQueue)
}

func (c *codelQdisc) codelDequeue() *Packet { return c.q.pop() }
func (c *codelQdisc) codelBacklog() int64   { return c.q.bytes }

func (c *codelQdisc) dequeue(now int64, env QdiscEnv) *Packet {
	return c.vars.dequeue(c, &c.prm, &c.stats, now, env)
}

// Peek is qdisc_peek_dequeued (codel's ->peek).
func (c *codelQdisc) Peek(now int64, env QdiscEnv) *Packet { return c.st.peek(now, env, c.dequeue) }

// Dequeue is codel_qdisc_dequeue.
func (c *codelQdisc) Dequeue(now int64, env QdiscEnv) *Packet { return c.st.take(now, env, c.dequeue) }

func (c *codelQdisc) Len() int       { return c.q.n + c.st.n() }
func (c *codelQdisc) Backlog() int64 { return c.q.bytes + c.st.bytes() }

func init() {
	registerQdisc("codel", func(st spec.Stage, _ uint64, _ int64) Qdisc { return newCoDel(st.(*spec.CoDel)) })
}
