package engine

import (
	"math"
	"time"

	"golang.org/x/time/rate"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// tbfStage mirrors the kernel's sch_tbf.c: a bucket of Burst bytes filled
// at Rate, an optional second bucket of MTU bytes filled at PeakRate, and a
// byte-limited FIFO (the bfifo child tbf creates) that tail-drops when
// backlog + len > Limit.
//
// Token accounting uses golang.org/x/time/rate at explicit timestamps, one
// Limiter per bucket with bytes as tokens. tbf_dequeue sends the head
// packet at the first instant both buckets hold its length, and charges
// both at that instant; a Limiter's ReserveN charges one bucket at the
// reservation time instead, which for two buckets lets the rate bucket
// refill while the packet still waits for the peak bucket (more tokens
// than the kernel has). So the stage asks each Limiter when it will hold
// enough (TokensAt), takes the later instant, and charges both there with
// AllowN. Wait is never used: time here is the packets', not Go's timers.
//
// What a Limiter cannot express is handled here: packets larger than a
// bucket (AllowN would refuse them forever) are dropped on enqueue as
// tbf_enqueue drops a non-GSO packet above max_size = min(burst, mtu);
// the MPU (minimum charged size) is applied before asking the Limiter.
//
// Because the FIFO releases in order and tokens only depend on earlier
// packets, each packet's departure is computed when it enters the stage:
// max(entry, previous departure, first instant with enough tokens).
//
// On a real clock (Options.RealClock: the proxy) the stage also keeps the
// kernel's own bucket, charged when packets really leave: tbf_dequeue
// reads the clock when it is dequeued and caps the tokens at the bucket
// (toks = min(now - t_c + tokens, buffer)), so a dequeue that comes late
// sends at most a bucket's worth at once and the rest follows at the rate.
// The departures computed at entry assume a dequeue at every departure (a
// perfect watchdog); when a late dequeue finds the real bucket more than
// one packet short of the head packet, the queue is timed again from the
// real bucket at that instant (retime). Those, and only those, departures
// move: later, never earlier.
type tbfStage struct {
	cfg       *spec.TBF
	ctr       Counters
	rate      *rate.Limiter
	peak      *rate.Limiter
	rateBytes float64 // bytes per second
	peakBytes float64
	limit     int64
	maxSize   int
	mpu       int

	q          fifo
	backlog    int64
	lastDepart int64
	// rateLeft and peakLeft shadow the buckets' tokens right after the
	// last charge (at lastDepart), so earliest can bound a departure with
	// plain arithmetic instead of asking the Limiters on every
	// NextDeparture.
	rateLeft, peakLeft   float64
	rateBurst, peakBurst float64

	// clock, when set, is the real time of the pipeline's current
	// dequeue (Options.RealClock); real and realPeak are the kernel's
	// buckets as charged at those times, realAt the time of the last
	// charge.
	clock          *realClock
	real, realPeak float64
	realAt         int64
}

// realClock is the time of the dequeue in progress, as the pipeline's
// caller gave it, shared by the stages that read it; off while the
// pipeline drains or moves packets at event times only.
type realClock struct {
	now int64
	on  bool
}

func newTBF(cfg *spec.TBF, clock *realClock) *tbfStage {
	t := &tbfStage{cfg: cfg, clock: clock}
	t.rateBytes = float64(cfg.Rate) / 8
	burst := int(min(cfg.Burst, math.MaxInt32))
	t.rate = rate.NewLimiter(rate.Limit(t.rateBytes), burst)
	t.maxSize = burst
	if cfg.PeakRate != 0 {
		mtu := int(min(cfg.MTU, math.MaxInt32))
		t.peakBytes = float64(cfg.PeakRate) / 8
		t.peak = rate.NewLimiter(rate.Limit(t.peakBytes), mtu)
		t.maxSize = min(t.maxSize, mtu)
		t.peakBurst, t.peakLeft = float64(mtu), float64(mtu)
	}
	t.rateBurst, t.rateLeft = float64(burst), float64(burst)
	t.real, t.realPeak = t.rateBurst, t.peakBurst
	t.limit = int64(cfg.Limit)
	t.mpu = int(min(cfg.MPU, math.MaxInt32))
	return t
}

func (t *tbfStage) kind() string        { return "tbf" }
func (t *tbfStage) spec() string        { return t.cfg.String() }
func (t *tbfStage) counters() *Counters { return &t.ctr }
func (t *tbfStage) len() int            { return t.q.len() }

func ts(ns int64) time.Time { return time.Unix(0, ns) }

// enqueue is tbf_enqueue plus the departure tbf_dequeue will give it.
func (t *tbfStage) enqueue(p *Packet, now int64, c *chain, idx int) {
	t.ctr.in(p)
	size := len(p.Data)
	cost := max(size, t.mpu)
	if size > t.maxSize || cost > t.maxSize {
		c.drop(p, idx, DropOversize)
		return
	}
	// bfifo_enqueue: "if (sch->qstats.backlog + qdisc_pkt_len(skb) <= sch->limit)".
	if t.backlog+int64(size) > t.limit {
		c.drop(p, idx, DropQueue)
		return
	}
	ready := max(now, t.lastDepart)
	rd, rHave := t.when(t.rate, t.rateBytes, ready, cost)
	d := max(ready, rd)
	var pHave float64
	if t.peak != nil {
		var pd int64
		pd, pHave = t.when(t.peak, t.peakBytes, ready, cost)
		d = max(d, pd)
	}
	// Float rounding may leave a bucket a hair short at d: step forward
	// until the buckets really hold cost tokens, then charge them.
	if t.peak == nil {
		for i := 0; !t.rate.AllowN(ts(d), cost) && i < 64; i++ {
			d++
		}
	} else {
		for i := 0; i < 64; i++ {
			if t.rate.TokensAt(ts(d)) >= float64(cost) && t.peak.TokensAt(ts(d)) >= float64(cost) {
				break
			}
			d++
		}
		t.rate.AllowN(ts(d), cost)
		t.peak.AllowN(ts(d), cost)
	}
	p.due = d
	t.rateLeft = left(rHave, float64(d-ready), t.rateBytes, t.rateBurst, cost)
	if t.peak != nil {
		t.peakLeft = left(pHave, float64(d-ready), t.peakBytes, t.peakBurst, cost)
	}
	t.lastDepart = d
	t.backlog += int64(size)
	t.q.push(p)
}

// left is the bucket after charging cost at elapsedNs after holding have.
func left(have, elapsedNs, bytesPerSec, burst float64, cost int) float64 {
	return max(0, min(have+elapsedNs*bytesPerSec/1e9, burst)-float64(cost))
}

// when returns the first instant at or after from at which lim holds n
// tokens (rounded up to the nanosecond), and the tokens it holds at from.
func (t *tbfStage) when(lim *rate.Limiter, bytesPerSec float64, from int64, n int) (int64, float64) {
	have := lim.TokensAt(ts(from))
	if have >= float64(n) {
		return from, have
	}
	wait := math.Ceil((float64(n) - have) / bytesPerSec * 1e9)
	if !(wait < maxWait) { // also catches NaN and +Inf from a zero rate
		wait = maxWait
	}
	return from + int64(wait), have
}

// maxWait caps a computed wait (about 31 years) so absurd rates cannot
// overflow the clock.
const maxWait = 1e18

func (t *tbfStage) next() (int64, bool) {
	if t.q.len() == 0 {
		return 0, false
	}
	return t.q.peek().due, true
}

func (t *tbfStage) pop(now int64) (*Packet, bool) {
	if t.q.len() == 0 || t.q.peek().due > now {
		return nil, false
	}
	if t.clock != nil && t.clock.on && !t.chargeReal(max(t.clock.now, now)) {
		return nil, false // timed again: the head now leaves later
	}
	p := t.q.pop()
	t.backlog -= int64(len(p.Data))
	return p, false
}

// chargeReal charges the head packet to the kernel's buckets at the real
// dequeue time at. When they are more than one packet short (the dequeue
// came so late that the capped bucket lost tokens the schedule counted
// on), the queue is timed again from the buckets at at and it returns
// false.
func (t *tbfStage) chargeReal(at int64) bool {
	cost := float64(max(len(t.q.peek().Data), t.mpu))
	tok := refill(t.real, at-t.realAt, t.rateBytes, t.rateBurst) - cost
	ptok := 0.0
	if t.peak != nil {
		ptok = refill(t.realPeak, at-t.realAt, t.peakBytes, t.peakBurst) - cost
	}
	slack := -cost
	if tok < slack || (t.peak != nil && ptok < slack) {
		t.retime(at)
		return false
	}
	t.real, t.realPeak, t.realAt = tok, ptok, at
	return true
}

// refill is a bucket holding have tokens elapsedNs later, capped at burst.
func refill(have float64, elapsedNs int64, bytesPerSec, burst float64) float64 {
	return min(have+float64(elapsedNs)*bytesPerSec/1e9, burst)
}

// retime gives the queued packets the departures tbf_dequeue gives them
// from at on: each leaves once the real buckets (capped, refilled at the
// rate) hold it, in order, never before at. The entry-time Limiters and
// shadows are set to the new last departure, so later arrivals queue
// behind it.
func (t *tbfStage) retime(at int64) {
	tok, ptok, from := t.real, t.realPeak, t.realAt
	d := at
	for i := 0; i < t.q.len(); i++ {
		p := t.q.at(i)
		cost := float64(max(len(p.Data), t.mpu))
		d = max(d, p.due)
		d = max(d, t.ready(tok, from, d, cost, t.rateBytes, t.rateBurst))
		if t.peak != nil {
			d = max(d, t.ready(ptok, from, d, cost, t.peakBytes, t.peakBurst))
		}
		p.due = d
		tok = refill(tok, d-from, t.rateBytes, t.rateBurst) - cost
		if t.peak != nil {
			ptok = refill(ptok, d-from, t.peakBytes, t.peakBurst) - cost
		}
		from = d
	}
	// The schedule's view continues from the last departure: what a
	// packet arriving now waits behind.
	t.lastDepart = d
	t.rateLeft = max(tok, 0)
	t.rate = limiterAt(t.rateBytes, t.rateBurst, t.rateLeft, d)
	if t.peak != nil {
		t.peakLeft = max(ptok, 0)
		t.peak = limiterAt(t.peakBytes, t.peakBurst, t.peakLeft, d)
	}
}

// ready is the first instant at or after d at which a bucket that held
// have tokens at from holds cost.
func (t *tbfStage) ready(have float64, from, d int64, cost, bytesPerSec, burst float64) int64 {
	h := refill(have, d-from, bytesPerSec, burst)
	if h >= cost {
		return d
	}
	wait := math.Ceil((cost - h) / bytesPerSec * 1e9)
	if !(wait < maxWait) {
		wait = maxWait
	}
	return d + int64(wait)
}

// limiterAt is a Limiter of burst bytes at bytesPerSec holding tokens at
// time at (rounded down to the byte).
func limiterAt(bytesPerSec, burst, tokens float64, at int64) *rate.Limiter {
	lim := rate.NewLimiter(rate.Limit(bytesPerSec), int(burst))
	if spend := int(burst) - int(tokens); spend > 0 {
		lim.AllowN(ts(at), spend)
	}
	return lim
}

func (t *tbfStage) head() (*Packet, bool) {
	if t.q.len() == 0 {
		return nil, false
	}
	return t.q.peek(), false
}

// earliest bounds the departure enqueue would compute now: after the
// last scheduled departure (with a queue, that is already later than the
// head's) and, with an empty queue, once the shadowed buckets hold the
// packet (rounded down, so float error never makes it late).
func (t *tbfStage) earliest(at int64, size int) int64 {
	ready := max(at, t.lastDepart)
	cost := max(size, t.mpu)
	if t.q.len() > 0 || size > t.maxSize || cost > t.maxSize {
		return ready
	}
	elapsed := float64(ready - t.lastDepart)
	d := ready
	bound := func(have, bytesPerSec, burst float64) {
		have = min(have+elapsed*bytesPerSec/1e9, burst)
		if have < float64(cost) {
			if w := math.Floor((float64(cost)-have)/bytesPerSec*1e9) - 1; w > 0 && w < maxWait {
				d = max(d, ready+int64(w))
			}
		}
	}
	bound(t.rateLeft, t.rateBytes, t.rateBurst)
	if t.peak != nil {
		bound(t.peakLeft, t.peakBytes, t.peakBurst)
	}
	return d
}

func init() {
	registerStage("tbf", stageKind{
		build: func(st spec.Stage, _ uint64, _ int64, pl *Pipeline) stage {
			var clock *realClock
			if pl.opt.RealClock {
				clock = &pl.clock
			}
			return newTBF(st.(*spec.TBF), clock)
		},
		expect: expectTBF,
		shaper: func(st spec.Stage, now int64) shaper { return newTBFShaper(st.(*spec.TBF), now) },
	})
}

// expectTBF is a tbf stage's share of Simulate's prediction: its rate is
// a bottleneck, and its queue (its child qdisc's, when it has one) waits
// limit / rate at most.
func expectTBF(stage, child spec.Stage, x *expectation) {
	st := stage.(*spec.TBF)
	x.BottleneckBps = minRate(x.BottleneckBps, float64(st.Rate))
	x.QueueDelayMaxMs += float64(st.Limit) * 8 / float64(st.Rate) * 1e3
	if l, ok := child.(spec.Limited); ok {
		// The child's limit in place of tbf's, added as a difference so
		// the figure keeps its last bit.
		lim := float64(spec.LimitBytes(l, units.Size(x.packetSize)))
		x.QueueDelayMaxMs += (lim - float64(st.Limit)) * 8 / float64(st.Rate) * 1e3
	}
	if st.PeakRate != 0 {
		x.BottleneckBps = minRate(x.BottleneckBps, float64(st.PeakRate))
	}
}
