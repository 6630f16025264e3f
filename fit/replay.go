package fit

import (
	"container/heap"
	"encoding/binary"
	"slices"
	"time"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/spec"
)

// send is one packet the replay offers the data path: when it left the
// sender (capture time), its IP bytes, and the data record it is a piece of.
type send struct {
	t   time.Duration
	ip  int
	rec int
}

// tcpDefaultMSS is TCP's default MSS (RFC 1122, 536 bytes).
const tcpDefaultMSS = 536

// minReplaySegment is the smallest piece a captured super-segment is cut
// into: TCP's default MSS, so that an absurd MSS option cannot turn one
// record into thousands of packets.
const minReplaySegment = tcpDefaultMSS

// firstAcked calls fn for each data record sent once and timed by the
// first ACK that covered it (f.covs): its index in f.data, when it was
// sent and when that ACK passed the capture point.
func (f *flow) firstAcked(fn func(i int, sent, at time.Duration)) {
	type key struct {
		t   time.Duration
		end int64
	}
	recOf := make(map[key]int, len(f.data))
	for i, r := range f.data {
		recOf[key{r.t, f.off(r.seq) + int64(r.payload)}] = i
	}
	for _, c := range f.covs {
		if i, ok := recOf[key{c.sent, c.end}]; ok {
			fn(i, c.sent, c.at)
		}
	}
}

// replaySeed seeds the replay's engine: fixed, so that a fit's self-check
// is the same every run (a random loss stage drops the same packets).
const replaySeed = 52

// replaySends is the capture's data as the path took it in, cut into
// wire segments (a capture with segmentation offload shows super-segments
// the path carried as several), at most budget packets (the fit's packet
// budget): the first ones. Near the sender (and in the middle, where the
// data had crossed part of the path already) the sends are the data as
// captured. Near the receiver they are reconstructed: a segment left at
// its arrival less the path's one-way delay, but not later than the end
// of the tick of the sender's TSval clock it carried (its clock aligned
// so that the least delayed segment took the one-way delay exactly);
// without timestamps, the arrivals moved back by the one-way delay alone.
// It also says how far the sends can be trusted.
func (f *flow) replaySends(where string, oneWay time.Duration, budget int) ([]send, string, bool) {
	seg := max(f.mss, minReplaySegment)
	at := func(r record) time.Duration { return r.t }
	how := "the data segments as captured near the sender: exact"
	switch where {
	case "middle", "unknown":
		how = "the data segments as captured " + where + ": they had crossed part of the path already, so the predicted times run late by that part"
	case "receiver":
		how = "reconstructed from the arrivals less the one-way delay (no sender's clock): the replay gives back the delay it took off, so it tests the model's queue and losses, not its delay"
		at = func(r record) time.Duration { return r.t - oneWay }
		if tick, v0, c := f.senderClock(); tick > 0 {
			how = "reconstructed from the arrivals and the sender's TSval clock: each send within its tick (" + ms(tick) + ") of when it truly left"
			at = func(r record) time.Duration {
				t := r.t - oneWay
				if r.hasTS {
					t = min(t, c+tick*time.Duration(int32(r.tsval-v0))-oneWay+tick)
				}
				return t
			}
		}
	}
	var out []send
	cut := false
	for i, r := range f.data {
		hdr := r.ipLen - r.payload
		if hdr < 20 || hdr > 120 {
			hdr = 52
		}
		for left := r.payload; left > 0; left -= seg {
			if len(out) >= budget {
				cut = true
				break
			}
			out = append(out, send{t: at(r), ip: min(hdr+min(left, seg), 65535), rec: i})
		}
	}
	slices.SortStableFunc(out, func(a, b send) int { return int(a.t - b.t) })
	return out, how, cut
}

// senderClock is the data's TSval clock: its tick (0: no clock, fewer
// than ten stamped segments or no tick elapsed), the first TSval, and the
// capture time of TSval v0 on the least delayed segment.
func (f *flow) senderClock() (tick time.Duration, v0 uint32, c time.Duration) {
	var first, last record
	n := 0
	for _, d := range f.data {
		if d.hasTS {
			if n == 0 {
				first = d
			}
			last, n = d, n+1
		}
	}
	span := int32(last.tsval - first.tsval)
	if n < 10 || span <= 0 {
		return 0, 0, 0
	}
	tick = (last.t - first.t) / time.Duration(span)
	if tick <= 0 {
		return 0, 0, 0
	}
	v0, c = first.tsval, first.t
	for _, d := range f.data {
		if d.hasTS {
			c = min(c, d.t-tick*time.Duration(int32(d.tsval-v0)))
		}
	}
	return tick, v0, c
}

// replayed is what the engine made of the sends, per data record: when
// its first piece was sent (sent), when its last piece left the data path
// (depart) and when the ACK path brought word of it back (ackAt), or why
// a piece was dropped.
type replayed struct {
	sent          []time.Duration
	depart, ackAt []time.Duration // -1: not delivered
	dropped       []engine.DropReason
	replayed      []bool
	// pieceDropped says, by send, the engine dropped that piece.
	pieceDropped []bool
}

// replay runs the sends through the data path and, for each record
// delivered whole, a 52-byte ACK back through the ACK path, both on the
// engine's virtual clock (as engine.Simulate drives a pipeline: dequeue
// up to each arrival, enqueue it, drain). Its cost is the packets'. A
// nil ack path replays the data path alone (ackAt stays -1).
func replay(sends []send, nrec int, data, ack *spec.Spec) (*replayed, error) {
	r := &replayed{sent: make([]time.Duration, nrec), depart: make([]time.Duration, nrec), ackAt: make([]time.Duration, nrec),
		dropped: make([]engine.DropReason, nrec), replayed: make([]bool, nrec), pieceDropped: make([]bool, len(sends))}
	for i := range r.depart {
		r.depart[i], r.ackAt[i] = -1, -1
	}
	if len(sends) == 0 {
		return r, nil
	}
	left := make([]int, nrec) // pieces of each record not yet out
	for _, s := range sends {
		if !r.replayed[s.rec] {
			r.sent[s.rec] = s.t
		}
		left[s.rec]++
		r.replayed[s.rec] = true
	}
	const base = int64(1e9) // the engine's zero means "unstamped"
	t0 := sends[0].t
	toEngine := func(t time.Duration) int64 { return base + int64(t-t0) }
	fromEngine := func(ns int64) time.Duration { return t0 + time.Duration(ns-base) }
	pieceRec := make([]int, 0, len(sends)) // by the data pipeline's Seq-1
	ackRec := make([]int, 0, nrec)         // by the ACK pipeline's Seq-1
	mem := engine.NewMemoryBudget(engine.DefaultQueueMemory())
	dataPl, err := engine.NewPipeline(data, engine.Options{Direction: "replay data", Seed: replaySeed, Start: base, Memory: mem,
		OnDrop: func(p *engine.Packet, why engine.DropReason) {
			if p.Seq > 0 && int(p.Seq) <= len(pieceRec) {
				r.dropped[pieceRec[p.Seq-1]] = why
				r.pieceDropped[p.Seq-1] = true
			}
		}})
	if err != nil {
		return nil, err
	}
	var ackPl *engine.Pipeline
	if ack != nil {
		if ackPl, err = engine.NewPipeline(ack, engine.Options{Direction: "replay ack", Seed: replaySeed + 1, Start: base, Memory: mem}); err != nil {
			return nil, err
		}
	}
	maxIP := 0
	for _, s := range sends {
		maxIP = max(maxIP, s.ip)
	}
	pool := engine.NewPool(engine.Headroom + max(maxIP, 52))
	template := engine.UDPPacket(28, 0)
	packet := func(size int, t int64) *engine.Packet {
		p := pool.Get()
		p.SetLen(size)
		copy(p.Data, template)
		binary.BigEndian.PutUint16(p.Data[2:], uint16(size))
		p.Arrival = t
		return p
	}
	var batch []*engine.Packet
	takeAcks := func(now int64) {
		if ackPl == nil {
			return
		}
		batch = ackPl.Dequeue(now, batch[:0])
		for _, p := range batch {
			if rec := ackRec[p.Seq-1]; r.ackAt[rec] < 0 {
				r.ackAt[rec] = fromEngine(p.Depart)
			}
			pool.Put(p)
		}
	}
	take := func(now int64) {
		batch = dataPl.Dequeue(now, batch[:0])
		var acks []int64
		for _, p := range batch {
			rec := pieceRec[p.Seq-1]
			if left[rec] > 0 {
				left[rec]--
				r.depart[rec] = max(r.depart[rec], fromEngine(p.Depart))
				if left[rec] == 0 && r.dropped[rec] == 0 && ackPl != nil {
					ackRec = append(ackRec, rec)
					acks = append(acks, p.Depart)
				}
			}
			pool.Put(p)
		}
		for _, t := range acks {
			ackPl.Enqueue(packet(52, t), t)
		}
		takeAcks(now)
	}
	for _, s := range sends {
		t := toEngine(s.t)
		take(t)
		pieceRec = append(pieceRec, s.rec)
		dataPl.Enqueue(packet(s.ip, t), t)
	}
	for next, ok := dataPl.NextDeparture(); ok; next, ok = dataPl.NextDeparture() {
		take(next)
	}
	for ackPl != nil {
		next, ok := ackPl.NextDeparture()
		if !ok {
			break
		}
		takeAcks(next)
	}
	for i := range r.depart {
		if r.dropped[i] != 0 {
			r.depart[i], r.ackAt[i] = -1, -1
		}
	}
	return r, nil
}

// delivery is a byte range [lo, hi) (offsets) delivered at t.
type delivery struct {
	t      time.Duration
	lo, hi int64
}

// curvePoint is the in-order bytes delivered by t.
type curvePoint struct {
	t     time.Duration
	bytes int64
}

// inOrder is the cumulative in-order bytes over time of the deliveries
// (what a cumulative ACK reports): a range counts once everything below
// it has come. O(n log n) in the deliveries.
func inOrder(ds []delivery) []curvePoint {
	slices.SortStableFunc(ds, func(a, b delivery) int { return int(a.t - b.t) })
	var pending rangeHeap
	var cum int64
	var out []curvePoint
	for _, d := range ds {
		heap.Push(&pending, d)
		moved := false
		for pending.Len() > 0 && pending[0].lo <= cum {
			top := heap.Pop(&pending).(delivery)
			if top.hi > cum {
				cum, moved = top.hi, true
			}
		}
		if moved {
			out = append(out, curvePoint{d.t, cum})
		}
	}
	return out
}

type rangeHeap []delivery

func (h rangeHeap) Len() int           { return len(h) }
func (h rangeHeap) Less(i, j int) bool { return h[i].lo < h[j].lo }
func (h rangeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *rangeHeap) Push(x any)        { *h = append(*h, x.(delivery)) }
func (h *rangeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// curveGap is the largest difference between two cumulative curves (step
// functions, zero before their first point), over the union of their
// times. A merge of the two: linear in their points.
func curveGap(a, b []curvePoint) int64 {
	var va, vb, gap int64
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var t time.Duration
		switch {
		case j >= len(b):
			t = a[i].t
		case i >= len(a):
			t = b[j].t
		default:
			t = min(a[i].t, b[j].t)
		}
		for ; i < len(a) && a[i].t == t; i++ {
			va = a[i].bytes
		}
		for ; j < len(b) && b[j].t == t; j++ {
			vb = b[j].bytes
		}
		gap = max(gap, va-vb, vb-va)
	}
	return gap
}

// resent says a data record is a retransmission the path's loss asked for
// (not a spurious one).
func resent(r record) bool {
	return r.aflags&(analyzer.Retransmission|analyzer.FastRetransmission) != 0 && r.aflags&analyzer.SpuriousRetransmission == 0
}
