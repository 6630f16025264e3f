package engine

import (
	"math"
	"sort"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/tc/trace"
)

// traceShaper replays a mahimahi mm-link trace as mahimahi's LinkQueue
// does (src/frontend/link_queue.cc, rationalize): at each delivery
// opportunity the link may send trace.OpportunityBytes bytes, taken from
// the head of its queue and then from the next packets, so one
// opportunity can finish several small packets and a packet larger than
// what is left continues at the next opportunity (bytes are counted
// across packets). An opportunity that finds nothing to send is lost. A
// packet leaves at the opportunity that carries its last byte.
//
// It is the shaper of a shapedStage whose child qdisc is the trace's
// buffer ("trace ... | pfifo limit 200", "| codel"), or a tail-drop FIFO
// of spec.DefaultTraceLimit packets without one. Unlike mahimahi, whose
// packet in transit has left its queue when its first byte is sent, the
// child dequeues a packet when its last byte is sent (the shaper decides
// at dequeue, as tbf does); for packets within one opportunity that is
// the same instant.
//
// The trace starts when the stage is built (the spec applied) and loops
// with its period, its last timestamp, unless Once. A Once trace that
// ran out sends nothing more: its packets stay queued and arrivals meet
// the full buffer (mahimahi's mm-link exits then).
//
// As read_packet calls rationalize(now) before it enqueues, a packet
// that finds the link idle is served from the first opportunity strictly
// after its arrival; packets queued behind one that just left may use the
// rest of that opportunity and others at the same time.
type traceShaper struct {
	times    []uint32
	start    int64 // ns: millisecond 0 of the first loop
	periodNs int64
	once     bool

	// The next unused opportunity: times[idx] in the loop starting at
	// base ns after start; done once a Once trace has none left.
	idx  int
	base int64
	done bool
	// The opportunity the last packet finished in: its time and the bytes
	// it has left.
	opT    int64
	opLeft int
	// lastSent is when the last packet left (-1: none yet).
	lastSent int64
	// The last ready call's start and size and its walk: sent takes that
	// walk's result instead of walking again (the shaping stage calls
	// ready when it peeks a head and sent when that head leaves, with no
	// other ready or sent call in between, so the state it walked is
	// unchanged).
	readyAt   int64
	readySize int
	readyWalk traceWalk
}

// traceWalk is where a packet finishes (walk): the opportunity's time, the
// position after it, the bytes it has left, whether a Once trace ended
// with it, and ok false when it never finishes.
type traceWalk struct {
	fin      int64
	idx      int
	base     int64
	left     int
	done, ok bool
}

// never is the due time of a packet that will not leave (a Once trace ran
// out); shapedStage reports no event for it.
const never = math.MaxInt64

func newTraceShaper(cfg *spec.Trace, now int64) *traceShaper {
	return &traceShaper{times: cfg.Times, start: now, once: cfg.Once, lastSent: -1, readyAt: -1,
		periodNs: int64(cfg.Times[len(cfg.Times)-1]) * 1e6}
}

func (t *traceShaper) at(idx int, base int64) int64 { return t.start + base + int64(t.times[idx])*1e6 }

// step is the position after (idx, base), and whether a Once trace ended.
func (t *traceShaper) step(idx int, base int64) (int, int64, bool) {
	idx++
	if idx == len(t.times) {
		idx, base = 0, base+t.periodNs
		if t.once {
			return idx, base, true
		}
	}
	return idx, base, false
}

// seek is the first unused opportunity at or after now (strictly after
// with strict).
func (t *traceShaper) seek(now int64, strict bool) (int, int64, bool) {
	if t.done {
		return 0, 0, false
	}
	after := func(tm int64) bool { return tm > now || !strict && tm == now }
	if after(t.at(t.idx, t.base)) {
		return t.idx, t.base, true
	}
	rel := now - t.start
	k := rel / t.periodNs
	in := rel - k*t.periodNs
	if k > 0 && in == 0 && !strict {
		// The previous loop's last opportunity is at now.
		return len(t.times) - 1, (k - 1) * t.periodNs, true
	}
	if t.once && k > 0 {
		return 0, 0, false
	}
	idx := sort.Search(len(t.times), func(i int) bool { return after(t.start + k*t.periodNs + int64(t.times[i])*1e6) })
	// The period's opportunity lies beyond in, so idx is in range.
	return idx, k * t.periodNs, true
}

// walk finds where a packet of size bytes, ready at now, finishes.
func (t *traceShaper) walk(now int64, size int) traceWalk {
	need := size
	strict := now != t.lastSent
	if t.opLeft > 0 && t.opT == now {
		take := min(need, t.opLeft)
		if need -= take; need == 0 {
			return traceWalk{t.opT, t.idx, t.base, t.opLeft - take, t.done, true}
		}
		strict = false
	}
	idx, base, ok := t.seek(now, strict)
	for ok {
		fin := t.at(idx, base)
		take := min(need, trace.OpportunityBytes)
		need -= take
		var done bool
		idx, base, done = t.step(idx, base)
		if need == 0 {
			return traceWalk{fin, idx, base, trace.OpportunityBytes - take, done, true}
		}
		ok = !done
	}
	return traceWalk{fin: never, done: true}
}

func (t *traceShaper) ready(now int64, size int) int64 {
	w := t.walk(now, size)
	t.readyAt, t.readySize, t.readyWalk = now, size, w
	if !w.ok {
		return never
	}
	return w.fin
}

func (t *traceShaper) sent(now int64, size int) {
	var w traceWalk
	if t.readySize == size && t.readyAt >= 0 && t.readyAt <= now {
		w = t.readyWalk // the walk ready made from the same state
	} else {
		w = t.walk(now, size)
	}
	t.readyAt = -1
	if !w.ok {
		return
	}
	t.idx, t.base, t.done = w.idx, w.base, w.done
	t.opT, t.opLeft, t.lastSent = w.fin, w.left, now
}

func (t *traceShaper) oversize(int) bool { return false }

func init() {
	registerStage("trace", stageKind{
		build: func(st spec.Stage, _ uint64, now int64, _ *Pipeline) stage {
			return newShapedStage(st, newTraceShaper(st.(*spec.Trace), now), nil, newFIFO(spec.DefaultTraceLimit, 0))
		},
		shaper: func(st spec.Stage, now int64) shaper { return newTraceShaper(st.(*spec.Trace), now) },
		expect: expectTrace,
	})
}

// expectTrace is a trace stage's share of Simulate's prediction: its mean
// capacity is the bottleneck.
func expectTrace(stage, _ spec.Stage, x *expectation) {
	st := stage.(*spec.Trace)
	x.BottleneckBps = minRate(x.BottleneckBps, float64(st.Trace().MeanRate()))
}
