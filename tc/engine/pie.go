package engine

import (
	"math"

	"github.com/wanlab/wanlab/tc/spec"
)

// pieQdisc is sch_pie.c with include/net/pie.h and net/sched/sch_pie.c's
// pie_calculate_probability (RFC 8033, with RFC 8034's time stamps by
// default). Times are psched ticks of 64 ns (PSCHED_SHIFT 6), as the
// kernel keeps them; probabilities are u64 fractions of MAX_PROB.
//
// The kernel updates the probability from a timer every tupdate (first
// 500 ms after the qdisc is created, HZ/2); here the updates due by an
// event run, each at its own time, before the event (catchUp), which is
// the same because nothing the update reads changes between events. The
// kernel's tupdate is in jiffies (15 ms is 16 ms at HZ=250); here it is
// exact.
type pieQdisc struct {
	q        pktList
	limit    int
	prm      pieParams
	vars     pieVars
	rng      *prng
	st       stash
	tupdate  int64 // ns
	nextTick int64 // when the next probability update is due
	// Counters pie dumps in its xstats.
	overlimit, dropped, ecnMark, packetsIn uint64
}

// pieParams is struct pie_params.
type pieParams struct {
	target                         uint64 // psched ticks
	alpha, beta                    uint32
	ecn, bytemode, dqRateEstimator bool
}

// pieVars is struct pie_vars.
type pieVars struct {
	qdelay, qdelayOld, burstTime, dqTstamp uint64
	prob, accuProb                         uint64
	dqCount                                int64
	avgDqRate, backlogOld                  uint32
}

// pie.h's constants.
const (
	pieMaxProb        = math.MaxUint64 >> 8 // MAX_PROB: U64_MAX >> BITS_PER_BYTE
	pieDtimeInvalid   = math.MaxUint64
	pieQueueThreshold = 16384
	pieDqCountInvalid = -1
	pieScale          = 8
	// psched ticks per second (PSCHED_TICKS_PER_SEC) and per ns shift.
	pschedShift       = 6
	pschedTicksPerSec = 1e9 >> pschedShift
	pieInitialUpdate  = int64(500e6) // the first timer: jiffies + HZ/2
)

func pschedTicks(ns int64) uint64 { return uint64(ns) >> pschedShift }

// initVars is pie_vars_init.
func (v *pieVars) init() {
	v.burstTime = pschedTicks(150e6) // 150 ms burst allowance
	v.dqTstamp = pieDtimeInvalid
	v.accuProb = 0
	v.dqCount = pieDqCountInvalid
	v.avgDqRate = 0
}

func newPIE(cfg *spec.PIE, seed uint64, now int64) *pieQdisc {
	q := &pieQdisc{limit: int(cfg.PacketLimit()), rng: newPRNG(seed),
		tupdate: int64(cfg.TUpdateTime()), nextTick: now + pieInitialUpdate}
	q.prm = pieParams{target: pschedTicks(int64(cfg.TargetTime())), alpha: cfg.AlphaValue(), beta: cfg.BetaValue(),
		ecn: cfg.ECN, bytemode: cfg.ByteMode, dqRateEstimator: cfg.DQRateEstimator}
	q.vars.init()
	return q
}

// catchUp runs the probability updates due by now (pie_timer).
func (q *pieQdisc) catchUp(now int64) {
	for q.nextTick <= now {
		q.calculateProbability(uint32(min(q.Backlog(), math.MaxUint32)))
		q.nextTick += q.tupdate
		if v := &q.vars; q.Len() == 0 && v.prob == 0 && v.qdelay == 0 && v.qdelayOld == 0 && q.nextTick <= now {
			// Idle with nothing to decay: every further update leaves
			// the state as it is (pie_vars_init each time); skip them.
			q.nextTick += (now - q.nextTick) / q.tupdate * q.tupdate
		}
	}
}

// dropEarly is pie_drop_early.
func (q *pieQdisc) dropEarly(backlog uint32, size int) bool {
	v, p := &q.vars, &q.prm
	localProb := v.prob
	const mtu = codelMTU // psched_mtu(qdisc_dev(sch))
	// If there is still burst allowance left skip random early drop.
	if v.burstTime > 0 {
		return false
	}
	// If current delay is less than half of target, and if drop prob is
	// low already, disable early_drop.
	if v.qdelay < p.target/2 && v.prob < pieMaxProb/5 {
		return false
	}
	// If we have fewer than 2 mtu-sized packets, disable pie_drop_early,
	// similar to min_th in RED.
	if backlog < 2*mtu {
		return false
	}
	// If bytemode is turned on, use packet size to compute new
	// probability. Smaller packets will have lower drop prob in this case.
	if p.bytemode && size <= mtu {
		localProb = uint64(size) * (localProb / mtu)
	} else {
		localProb = v.prob
	}
	if localProb == 0 {
		v.accuProb = 0
	} else {
		v.accuProb += localProb
	}
	if v.accuProb < (pieMaxProb/100)*85 {
		return false
	}
	if v.accuProb >= (pieMaxProb/2)*17 {
		return true
	}
	if q.rng.pcg.Uint64()>>8 < localProb {
		v.accuProb = 0
		return true
	}
	return false
}

// Enqueue is pie_qdisc_enqueue.
func (q *pieQdisc) Enqueue(p *Packet, now int64, env QdiscEnv) {
	q.catchUp(now)
	if q.Len() >= q.limit {
		q.overlimit++
		q.dropped++
		q.vars.accuProb = 0
		env.Drop(p, DropQueue)
		return
	}
	enqueue := false
	if !q.dropEarly(uint32(min(q.Backlog(), math.MaxUint32)), len(p.Data)) {
		enqueue = true
	} else if q.prm.ecn && q.vars.prob <= pieMaxProb/10 && setCE(p.Data) {
		// If packet is ecn capable, mark it if drop probability is lower
		// than 10%, else drop it.
		q.ecnMark++
		env.Marked(p)
		enqueue = true
	}
	if !enqueue {
		q.dropped++
		q.vars.accuProb = 0
		env.Drop(p, DropAQM)
		return
	}
	p.enq = now // pie_set_enqueue_time (used without the rate estimator)
	q.packetsIn++
	q.q.push(p)
}

// processDequeue is pie_process_dequeue.
func (q *pieQdisc) processDequeue(p *Packet, nowNs int64, backlog uint32) {
	v, prm := &q.vars, &q.prm
	now := pschedTicks(nowNs)
	var dtime uint64
	if !prm.dqRateEstimator {
		// Calculate qdelay using the packet timestamp.
		v.qdelay = now - pschedTicks(p.enq)
		if v.dqTstamp != pieDtimeInvalid {
			dtime = now - v.dqTstamp
		}
		v.dqTstamp = now
		if backlog == 0 {
			v.qdelay = 0
		}
		if dtime == 0 {
			return
		}
	} else {
		// If current queue is about 10 packets or more and dq_count is
		// unset we have enough packets to calculate the drain rate.
		if backlog >= pieQueueThreshold && v.dqCount == pieDqCountInvalid {
			v.dqTstamp = now
			v.dqCount = 0
		}
		if v.dqCount == pieDqCountInvalid {
			return
		}
		v.dqCount += int64(len(p.Data))
		if v.dqCount < pieQueueThreshold {
			return
		}
		count := uint32(v.dqCount) << pieScale
		dtime = now - v.dqTstamp
		if dtime == 0 {
			return
		}
		count = uint32(uint64(count) / dtime)
		if v.avgDqRate == 0 {
			v.avgDqRate = count
		} else {
			v.avgDqRate = (v.avgDqRate - (v.avgDqRate >> 3)) + (count >> 3)
		}
		// If the queue has receded below the threshold, we hold on to
		// the last drain rate calculated, else we reset dq_count to 0 to
		// re-enter the if block when the next packet is dequeued.
		if backlog < pieQueueThreshold {
			v.dqCount = pieDqCountInvalid
		} else {
			v.dqCount = 0
			v.dqTstamp = now
		}
	}
	// burst_allowance_reduction
	if v.burstTime > 0 {
		if v.burstTime > dtime {
			v.burstTime -= dtime
		} else {
			v.burstTime = 0
		}
	}
}

// calculateProbability is pie_calculate_probability.
func (q *pieQdisc) calculateProbability(backlog uint32) {
	v, p := &q.vars, &q.prm
	var qdelay, qdelayOld uint64
	updateProb := true
	if p.dqRateEstimator {
		qdelayOld = v.qdelay
		v.qdelayOld = v.qdelay
		if v.avgDqRate > 0 {
			qdelay = (uint64(backlog) << pieScale) / uint64(v.avgDqRate)
		}
	} else {
		qdelay = v.qdelay
		qdelayOld = v.qdelayOld
	}
	// If qdelay is zero and backlog is not, it means backlog is very
	// small, so we do not update probability in this round.
	if qdelay == 0 && backlog != 0 {
		updateProb = false
	}
	// alpha and beta are in units of 1/16, scaled to the probability per
	// psched tick of delay.
	alpha := (uint64(p.alpha) * (pieMaxProb / pschedTicksPerSec)) >> 4
	beta := (uint64(p.beta) * (pieMaxProb / pschedTicksPerSec)) >> 4
	// We scale alpha and beta differently depending on how heavy the
	// congestion is (RFC 8033).
	if v.prob < pieMaxProb/10 {
		alpha >>= 1
		beta >>= 1
		power := uint64(100)
		for v.prob < pieMaxProb/power && power <= 1000000 {
			alpha >>= 2
			beta >>= 2
			power *= 10
		}
	}
	// alpha and beta should be between 0 and 32, in multiples of 1/16.
	var delta int64
	delta += int64(alpha * (qdelay - p.target))
	delta += int64(beta * (qdelay - qdelayOld))
	oldprob := v.prob
	// to ensure we increase probability in steps of no more than 2%
	if delta > int64(pieMaxProb/(100/2)) && v.prob >= pieMaxProb/10 {
		delta = (pieMaxProb / 100) * 2
	}
	// Non-linear drop: tune drop probability to increase quickly for
	// high delays (>= 250ms).
	if qdelay > pschedTicks(250e6) {
		delta += pieMaxProb / (100 / 2)
	}
	v.prob += uint64(delta)
	if delta > 0 {
		// prevent overflow
		if v.prob < oldprob {
			v.prob = pieMaxProb
			// Prevent normalization error: skip the non-linear drop
			// below.
			updateProb = false
		}
	} else {
		// prevent underflow
		if v.prob > oldprob {
			v.prob = 0
		}
	}
	// Non-linear drop in probability: reduce drop probability quickly if
	// delay is 0 for 2 consecutive Tupdate periods.
	if qdelay == 0 && qdelayOld == 0 && updateProb {
		v.prob -= v.prob / 64 // reduce drop probability to 98.4%
	}
	v.qdelay = qdelay
	v.backlogOld = backlog
	// We restart the measurement cycle if the delay has been low for 2
	// consecutive Tupdate periods, the probability is zero and (with the
	// rate estimator) we have an estimate of the rate.
	if v.qdelay < p.target/2 && v.qdelayOld < p.target/2 && v.prob == 0 &&
		(!p.dqRateEstimator || v.avgDqRate > 0) {
		v.init()
	}
	if !p.dqRateEstimator {
		v.qdelayOld = qdelay
	}
}

func (q *pieQdisc) dequeue(now int64, _ QdiscEnv) *Packet {
	p := q.q.pop()
	if p == nil {
		return nil
	}
	q.processDequeue(p, now, uint32(min(q.q.bytes, math.MaxUint32)))
	return p
}

// Peek is qdisc_peek_dequeued (pie's ->peek).
func (q *pieQdisc) Peek(now int64, env QdiscEnv) *Packet {
	q.catchUp(now)
	return q.st.peek(now, env, q.dequeue)
}

// Dequeue is pie_qdisc_dequeue.
func (q *pieQdisc) Dequeue(now int64, env QdiscEnv) *Packet {
	q.catchUp(now)
	return q.st.take(now, env, q.dequeue)
}

func (q *pieQdisc) Len() int       { return q.q.n + q.st.n() }
func (q *pieQdisc) Backlog() int64 { return q.q.bytes + q.st.bytes() }

func init() {
	registerQdisc("pie", func(st spec.Stage, seed uint64, now int64) Qdisc { return newPIE(st.(*spec.PIE), seed, now) })
}
