package engine

import (
	"math/bits"

	"github.com/wanlab/wanlab/tc/spec"
)

// redQdisc is sch_red.c with include/net/red.h: an exponentially
// weighted moving average of the backlog (red_calc_qavg, fixed point at
// Wlog), decayed over idle time with the Stab table
// (red_calc_qavg_from_idle_time), marking or dropping with a probability
// rising from 0 at min to max_P at max (red_action), and, with adaptive,
// max_P tuned every 500 ms (red_adaptative_algo, run here lazily as
// pie's updates are). Its queue is a bfifo of limit bytes, red's child.
type redQdisc struct {
	q        pktList
	limit    int64
	parms    redParms
	vars     redVars
	flags    uint8
	rng      *prng
	adaptive bool
	nextAd   int64 // next adaptive update (when adaptive)
	// Counters red dumps in its xstats.
	probDrop, probMark, forcedDrop, forcedMark, pdrop uint64
}

// redParms is struct red_parms.
type redParms struct {
	qthMin, qthMax uint64 // Wlog scaled
	scellMax       int64
	maxP           uint32
	maxPReciprocal reciprocal
	qthDelta       uint32
	targetMin      uint32
	targetMax      uint32
	scellLog, wlog uint8
	plog           uint8
	stab           [256]uint8
}

// redVars is struct red_vars.
type redVars struct {
	qcount     int
	qR         uint32
	qavg       uint64
	qidlestart int64 // ns; 0: not idling
}

// reciprocal is struct reciprocal_value (lib/math/reciprocal_div.c).
type reciprocal struct {
	m   uint32
	sh1 uint8
	sh2 uint8
}

// reciprocalValue is reciprocal_value(d).
func reciprocalValue(d uint32) reciprocal {
	l := bits.Len32(d - 1) // fls(d - 1)
	m := ((uint64(1) << 32) * ((uint64(1) << l) - uint64(d))) / uint64(d)
	m++
	var r reciprocal
	r.m = uint32(m)
	r.sh1 = uint8(min(l, 1))
	r.sh2 = uint8(max(l-1, 0))
	return r
}

// divide is reciprocal_divide(a, r): a / d.
func (r reciprocal) divide(a uint32) uint32 {
	t := uint32((uint64(a) * uint64(r.m)) >> 32)
	return (t + ((a - t) >> r.sh1)) >> r.sh2
}

// red.h's probability constants.
const (
	redOnePercent = uint32(((uint64(1) << 32) + 50) / 100) // DIV_ROUND_CLOSEST(1ULL<<32, 100)
	redMaxPMin    = 1 * redOnePercent
	redMaxPMax    = 50 * redOnePercent
	redStabMask   = 255
	redAdaptEvery = int64(500e6) // red_adaptative_timer: HZ/2
)

// setParms is red_set_parms.
func (p *redParms) set(qthMin, qthMax uint32, wlog, plog, scellLog uint8, stab *[256]uint8, maxP uint32) {
	delta := int64(qthMax) - int64(qthMin)
	p.qthMin = uint64(qthMin) << wlog
	p.qthMax = uint64(qthMax) << wlog
	p.wlog, p.plog = wlog, plog
	if delta <= 0 {
		delta = 1
	}
	p.qthDelta = uint32(delta)
	if maxP == 0 {
		maxP = redMaxp(plog)
		maxP *= uint32(delta) // max_P = (qth_max - qth_min)/2^Plog
	}
	p.maxP = maxP
	maxPDelta := max(maxP/uint32(delta), 1)
	p.maxPReciprocal = reciprocalValue(maxPDelta)
	// RED Adaptative target: [min_th + 0.4*(max_th - min_th),
	// min_th + 0.6*(max_th - min_th)].
	delta /= 5
	p.targetMin = qthMin + 2*uint32(delta)
	p.targetMax = qthMin + 3*uint32(delta)
	p.scellLog = scellLog
	p.scellMax = 255 << scellLog
	if stab != nil {
		p.stab = *stab
	}
}

func redMaxp(plog uint8) uint32 {
	if plog < 32 {
		return ^uint32(0) >> plog
	}
	return ^uint32(0)
}

func newRED(cfg *spec.RED, seed uint64, now int64) *redQdisc {
	prm, err := cfg.Params(1000.0 / 64)
	if err != nil { // Validate ran before; keep a harmless queue
		prm = spec.REDParams{Limit: uint32(cfg.Limit), QthMin: 1, QthMax: 2, Wlog: 1}
	}
	q := &redQdisc{limit: int64(prm.Limit), flags: cfg.FlagBits(), rng: newPRNG(seed)}
	q.parms.set(prm.QthMin, prm.QthMax, prm.Wlog, prm.Plog, prm.ScellLog, &prm.Stab, prm.MaxP)
	q.restart()
	if cfg.Adaptive {
		q.adaptive, q.nextAd = true, now // red_change: mod_timer(&q->adapt_timer, jiffies)
	}
	return q
}

// restart is red_restart.
func (q *redQdisc) restart() {
	q.vars.qidlestart = 0 // red_end_of_idle_period
	q.vars.qavg = 0
	q.vars.qcount = -1
}

func (q *redQdisc) isIdling() bool { return q.vars.qidlestart != 0 }

// qavgFromIdleTime is red_calc_qavg_from_idle_time.
func (q *redQdisc) qavgFromIdleTime(now int64) uint64 {
	p, v := &q.parms, &q.vars
	usIdle := min((now-v.qidlestart)/1000, p.scellMax)
	shift := p.stab[(usIdle>>p.scellLog)&redStabMask]
	if shift != 0 {
		return v.qavg >> shift
	}
	// Approximate initial part of exponent with linear function:
	// (1-W)^m ~= 1-mW + ...
	us := (v.qavg * uint64(usIdle)) >> p.scellLog
	if us < v.qavg>>1 {
		return v.qavg - us
	}
	return v.qavg >> 1
}

// qavgNoIdleTime is red_calc_qavg_no_idle_time: qavg*(1-W) + backlog*W
// in fixed point at Wlog.
func (q *redQdisc) qavgNoIdleTime(backlog uint64) uint64 {
	return q.vars.qavg + (backlog - (q.vars.qavg >> q.parms.wlog))
}

// calcQavg is red_calc_qavg.
func (q *redQdisc) calcQavg(now int64, backlog uint64) uint64 {
	if !q.isIdling() {
		return q.qavgNoIdleTime(backlog)
	}
	return q.qavgFromIdleTime(now)
}

// random is red_random: a random number scaled by max_P / qth_delta.
func (q *redQdisc) random() uint32 { return q.parms.maxPReciprocal.divide(q.rng.u32()) }

// markProbability is red_mark_probability: true when the packet is to
// be marked, max_P*(qavg - qth_min)/(qth_max-qth_min) < rnd/qcount in
// floating point.
func (q *redQdisc) markProbability(qavg uint64) bool {
	return !(((qavg-q.parms.qthMin)>>q.parms.wlog)*uint64(q.vars.qcount) < uint64(q.vars.qR))
}

const (
	redDontMark = iota
	redProbMark
	redHardMark
)

// action is red_action.
func (q *redQdisc) action(qavg uint64) int {
	v := &q.vars
	switch {
	case qavg < q.parms.qthMin:
		v.qcount = -1
		return redDontMark
	case qavg >= q.parms.qthMax:
		v.qcount = -1
		return redHardMark
	}
	v.qcount++
	if v.qcount != 0 {
		if q.markProbability(qavg) {
			v.qcount = 0
			v.qR = q.random()
			return redProbMark
		}
	} else {
		v.qR = q.random()
	}
	return redDontMark
}

// adapt is red_adaptative_algo.
func (q *redQdisc) adapt(now int64) {
	p := &q.parms
	qavg := q.vars.qavg
	if q.isIdling() {
		qavg = q.qavgFromIdleTime(now)
	}
	qavg >>= p.wlog // v->qavg is fixed point number with point at Wlog
	if qavg > uint64(p.targetMax) && p.maxP <= redMaxPMax {
		p.maxP += min(redMaxPMin, p.maxP/4) // maxp = maxp + alpha
	} else if qavg < uint64(p.targetMin) && p.maxP >= redMaxPMin {
		p.maxP = (p.maxP / 10) * 9 // maxp = maxp * Beta
	}
	maxPDelta := max((p.maxP+p.qthDelta/2)/p.qthDelta, 1) // DIV_ROUND_CLOSEST
	p.maxPReciprocal = reciprocalValue(maxPDelta)
}

func (q *redQdisc) catchUp(now int64) {
	for q.adaptive && q.nextAd <= now {
		q.adapt(q.nextAd)
		q.nextAd += redAdaptEvery
	}
}

// Enqueue is red_enqueue.
func (q *redQdisc) Enqueue(p *Packet, now int64, env QdiscEnv) {
	q.catchUp(now)
	q.vars.qavg = q.calcQavg(now, uint64(q.q.bytes))
	if q.isIdling() {
		q.vars.qidlestart = 0 // red_end_of_idle_period
	}
	ecn, harddrop, nodrop := q.flags&spec.REDFlagECN != 0, q.flags&spec.REDFlagHardDrop != 0, q.flags&spec.REDFlagNoDrop != 0
	if a := q.action(q.vars.qavg); a != redDontMark {
		// A probabilistic mark, or a forced one (above max, where
		// harddrop drops even ECN-capable packets): each counted as such.
		drops, marks := &q.probDrop, &q.probMark
		if a == redHardMark {
			drops, marks = &q.forcedDrop, &q.forcedMark
		}
		switch {
		case !ecn || a == redHardMark && harddrop:
			*drops++
			env.Drop(p, DropAQM)
			return
		case setCE(p.Data):
			*marks++
			env.Marked(p)
		case !nodrop:
			*drops++
			env.Drop(p, DropAQM)
			return
		}
		// Non-ECT packet in ECN nodrop mode: queue it.
	}
	// qdisc_enqueue into the bfifo child: bfifo_enqueue's byte limit.
	if q.q.bytes+int64(len(p.Data)) > q.limit {
		q.pdrop++
		env.Drop(p, DropQueue)
		return
	}
	p.enq = now
	q.q.push(p)
}

// Peek is red_peek: the child bfifo's head, without dequeuing (so the
// idle period does not start at a peek that finds the queue empty).
func (q *redQdisc) Peek(now int64, _ QdiscEnv) *Packet {
	q.catchUp(now)
	return q.q.head
}

// Dequeue is red_dequeue.
func (q *redQdisc) Dequeue(now int64, _ QdiscEnv) *Packet {
	q.catchUp(now)
	p := q.q.pop()
	if p == nil && !q.isIdling() {
		q.vars.qidlestart = max(now, 1) // red_start_of_idle_period
	}
	return p
}

func (q *redQdisc) Len() int       { return q.q.n }
func (q *redQdisc) Backlog() int64 { return q.q.bytes }

func init() {
	registerQdisc("red", func(st spec.Stage, seed uint64, now int64) Qdisc { return newRED(st.(*spec.RED), seed, now) })
}
