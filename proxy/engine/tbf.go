package engine

import (
	"math"
	"time"

	"golang.org/x/time/rate"

	"github.com/wanlab/wanlab/proxy/spec"
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
}

func newTBF(cfg *spec.TBF) *tbfStage {
	t := &tbfStage{cfg: cfg}
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
	p := t.q.pop()
	t.backlog -= int64(len(p.Data))
	return p, false
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
