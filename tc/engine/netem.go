package engine

import (
	"math"
	"math/bits"

	"github.com/wanlab/wanlab/tc/spec"
)

// netemStage mirrors the kernel's sch_netem.c (Linux 6.8 and later, where
// the duplicate is re-enqueued after the limit check): netem_enqueue
// decides duplication, loss (or ECN mark), corruption, the queue limit,
// reordering and the time to send; tfifo keeps packets ordered by that
// time; netem_dequeue releases them, honouring slots.
type netemStage struct {
	cfg *spec.Netem
	r   *prng
	ctr Counters

	limit           int
	latency, jitter int64
	table           []int16
	delayCorr       delayCorrelation
	loss            lossModel
	ecn             bool
	duplicate       uint32
	dupCorr         correlated
	corrupt         uint32
	corruptCorr     correlated
	reorder         uint32
	reorderCorr     correlated
	gap, counter    uint32
	noDup           bool // set while a duplicate is re-enqueued at the root

	rateBytes                              uint64 // bytes per second, as the kernel keeps q->rate
	packetOverhead, cellSize, cellOverhead int64

	slotOn                 bool
	slotMin, slotMax       int64
	slotDelay, slotJitter  int64
	slotTable              []int16
	slotPackets, slotBytes int64
	slotNext               int64
	packetsLeft, bytesLeft int64

	// tfifo is the kernel's two-part time-ordered queue: packets whose
	// time is not before the tail's go to a plain FIFO (t_head/t_tail),
	// the others to a heap (the kernel's rbtree t_root). With a constant
	// delay everything takes the O(1) FIFO path.
	tlist  fifo
	theap  timeHeap
	ahead  []*Packet // reordered packets, sent before tfifo (the kernel's sch->q; LIFO)
	maxDue int64     // latest time_to_send queued in tfifo/ahead (rate anchoring)
	order  uint64
	// unitExtra is the segments the units in tfifo stand for beyond one
	// each (takeUnit): len counts segments, as the limit does.
	unitExtra int
}

func newNetem(cfg *spec.Netem, seed uint64, now int64) *netemStage {
	r := newPRNG(seed)
	n := &netemStage{cfg: cfg, r: r}
	n.limit = int(cfg.Limit)
	if cfg.Limit == 0 {
		n.limit = spec.DefaultNetemLimit
	}
	n.latency, n.jitter = int64(cfg.Latency), int64(cfg.Jitter)
	n.table = distTable(cfg.Dist)
	// Correlation states are initialised in the order netem_change applies
	// TCA_NETEM_CORR (delay, loss, dup), then reorder, then corrupt.
	n.delayCorr = newDelayCorrelation(cfg.DelayCorr, r)
	n.loss = newLossModel(cfg.Loss, r)
	n.ecn = cfg.ECN
	n.duplicate = probU32(cfg.Duplicate)
	n.dupCorr = newCorrelated(cfg.DuplicateCorr, r)
	n.gap = cfg.Gap
	n.reorder = probU32(cfg.Reorder)
	if n.gap != 0 && n.reorder == 0 {
		// netem_change: "if gap is set, need to assume 100% probability".
		n.reorder = math.MaxUint32
	}
	if n.reorder != 0 && n.gap == 0 {
		n.gap = 1 // iproute2 sends gap 1 with a reorder probability
	}
	n.reorderCorr = newCorrelated(cfg.ReorderCorr, r)
	n.corrupt = probU32(cfg.Corrupt)
	n.corruptCorr = newCorrelated(cfg.CorruptCorr, r)
	n.rateBytes = uint64(cfg.Rate) / 8 // below 8 bit/s this is 0: no rate, as "if (q->rate)" reads it
	n.packetOverhead = int64(cfg.PacketOverhead)
	n.cellSize = int64(cfg.CellSize)
	n.cellOverhead = int64(cfg.CellOverhead)
	if s := cfg.Slot; s != nil {
		// get_slot(): zero budgets mean unlimited; slots start now when
		// any delay is configured.
		n.slotMin, n.slotMax = int64(s.MinDelay), int64(s.MaxDelay)
		n.slotDelay, n.slotJitter = int64(s.Delay), int64(s.Jitter)
		if n.slotJitter < 0 {
			n.slotJitter = -n.slotJitter
		}
		if s.Dist != spec.DistUniform {
			n.slotTable = distTable(s.Dist)
		}
		n.slotPackets, n.slotBytes = int64(s.Packets), int64(s.Bytes)
		if n.slotPackets == 0 {
			n.slotPackets = math.MaxInt32
		}
		if n.slotBytes == 0 {
			n.slotBytes = math.MaxInt32
		}
		n.packetsLeft, n.bytesLeft = n.slotPackets, n.slotBytes
		if n.slotMin|n.slotMax|n.slotJitter != 0 {
			n.slotOn = true
			n.slotNext = now
		}
	}
	n.theap = make(timeHeap, 0, 64)
	return n
}

func (n *netemStage) kind() string        { return "netem" }
func (n *netemStage) spec() string        { return n.cfg.String() }
func (n *netemStage) counters() *Counters { return &n.ctr }
func (n *netemStage) len() int {
	return n.tlist.len() + len(n.theap) + len(n.ahead) + n.unitExtra
}

// tfifoEnqueue is tfifo_enqueue: append when not earlier than the tail.
func (n *netemStage) tfifoEnqueue(p *Packet) {
	if n.tlist.len() == 0 || p.due >= n.tlist.tail().due {
		n.tlist.push(p)
		return
	}
	n.theap.push(p)
}

// tfifoPeek is netem_peek: the earlier of the heap's and the list's first
// packet, the list's on a tie.
func (n *netemStage) tfifoPeek() *Packet {
	if len(n.theap) == 0 {
		if n.tlist.len() == 0 {
			return nil
		}
		return n.tlist.peek()
	}
	if n.tlist.len() == 0 || n.theap[0].due < n.tlist.peek().due {
		return n.theap[0]
	}
	return n.tlist.peek()
}

// tfifoPop removes the packet tfifoPeek returns.
func (n *netemStage) tfifoPop() *Packet {
	if len(n.theap) == 0 || (n.tlist.len() > 0 && n.theap[0].due >= n.tlist.peek().due) {
		return n.tlist.pop()
	}
	return n.theap.pop()
}

// enqueue is netem_enqueue. The order of random draws is the kernel's:
// duplicate, loss, corrupt (+ offset and bit), then (after the duplicate's
// own enqueue at the root) reorder and delay.
func (n *netemStage) enqueue(p *Packet, now int64, c *chain, idx int) {
	if p.isUnit() {
		// A unit from the stage above: whole if its segments all go on
		// alike here, else as its segments.
		if !n.takeUnit(p, now, c, idx) {
			c.splitInto(idx, p, now)
		}
		return
	}
	n.ctr.in(p)
	count := 1
	if !n.noDup && p.Flags&FlagDuplicate == 0 && n.duplicate != 0 && n.duplicate >= n.dupCorr.next(n.r) {
		count++
	}
	if n.loss.event(n.r) {
		if n.ecn && setCE(p.Data) {
			n.ctr.ECNMarked++
			p.Flags |= FlagECNMarked
		} else {
			count--
		}
	}
	if count == 0 {
		c.drop(p, idx, DropLoss)
		return
	}
	var dup *Packet
	if count > 1 {
		// Cloned before corruption: the kernel's skb_clone shares data and
		// the corruption path unshares the original first.
		dup = clone(p)
		dup.Flags |= FlagDuplicate
		n.ctr.Duplicated++
	}
	if n.corrupt != 0 && n.corrupt >= n.corruptCorr.next(n.r) && len(p.Data) > 0 {
		// skb->data[get_random_u32_below(skb_headlen(skb))] ^= 1 << get_random_u32_below(8):
		// any byte of the packet, headers included. On a TUN device the
		// packet starts at the IP header (the kernel's includes the MAC
		// header on an Ethernet device).
		off := n.r.below(uint32(len(p.Data)))
		bit := n.r.below(8)
		p.Data[off] ^= 1 << bit
		p.Flags |= FlagCorrupted
		n.ctr.Corrupted++
	}
	// "if (unlikely(sch->q.qlen >= sch->limit))": since Linux 6.13
	// (f8d4bc455047) sch->q.qlen counts the packets in netem and in its
	// child qdisc, and since 4185701fcce6 (Linux 7.1, backported to 6.18.y
	// in May 2026) the limit is checked against it again, so the limit
	// covers netem, its reorder queue and the tbf below it. Kernels from
	// 6.13 to 7.0 compared only the tfifo length (t_len); older ones
	// counted the tfifo and the reorder queue but not the child.
	if c.heldFrom(idx) >= n.limit {
		c.drop(p, idx, DropQueue)
		if dup != nil {
			c.pl.admit(c.class, dup)
			c.dropUnstaged(dup, DropQueue)
		}
		return
	}
	if dup != nil {
		// "If doing duplication then re-insert at top of the qdisc tree,
		// since parent queuer expects that only one skb will be queued."
		// The copy goes through every stage from the root again, this
		// netem included, with duplication disabled meanwhile. A copy is
		// never duplicated again by another netem in the chain: in Linux
		// that could loop forever, and since 6.17 ("net/sched: Restrict
		// conditions for adding duplicating netems to qdisc tree") the
		// kernel refuses a duplicating netem in a tree with another netem;
		// wanlab runs such chains with the copy marked instead.
		c.pl.admit(c.class, dup)
		if c.pl.overBudget() {
			c.dropUnstaged(dup, DropQueue)
		} else {
			n.noDup = true
			c.enqueueAt(0, dup, now)
			n.noDup = false
		}
	}
	n.order++
	p.order = n.order
	if n.gap == 0 || n.counter < n.gap-1 || n.reorder < n.reorderCorr.next(n.r) {
		var delay int64
		if n.delayCorr.rho == 0 {
			delay = tabledist(n.latency, n.jitter, nil, n.r, n.table)
		} else {
			delay = tabledistCorrelated(n.latency, n.jitter, n.delayCorr.uniform(n.r), n.table)
		}
		base := now
		if n.rateBytes != 0 {
			// With a rate, the last queued packet's send time is the
			// reference point: packets leave serialised, never reordered
			// by jitter.
			if n.len() > 0 {
				delay -= n.maxDue - base
				if delay < 0 {
					delay = 0
				}
				base = n.maxDue
			}
			delay += n.packetTime(len(p.Data))
		}
		p.due = base + delay
		if p.due < now {
			// Jitter above the delay: the kernel's time_to_send lies in
			// the past and the packet goes at the next dequeue, i.e. now.
			p.due = now
		}
		if n.len() == 0 || p.due > n.maxDue {
			n.maxDue = p.due
		}
		n.counter++
		n.tfifoEnqueue(p)
	} else {
		// "Do re-ordering by putting one out of N packets at the front of
		// the queue."
		p.due = now
		if n.len() == 0 || p.due > n.maxDue {
			n.maxDue = p.due
		}
		n.counter = 0
		p.Flags |= FlagReordered
		n.ctr.Reordered++
		n.ahead = append(n.ahead, p)
	}
	n.poll(now)
}

// packetTime is packet_time_ns(): serialisation time at the netem rate
// with per-packet overhead and cell framing.
func (n *netemStage) packetTime(size int) int64 {
	l := int64(size) + n.packetOverhead
	if l < 0 {
		l = 0
	}
	if n.cellSize > 0 {
		cells := l / n.cellSize
		if l > cells*n.cellSize {
			cells++
		}
		l = cells * (n.cellSize + n.cellOverhead)
		if l < 0 {
			l = 0
		}
	}
	return int64(uint64(l) * 1e9 / n.rateBytes)
}

// getSlotNext is get_slot_next(): the next slot opens after a uniform
// delay in [min, max) or one drawn from the slot distribution, with fresh
// packet and byte budgets.
func (n *netemStage) getSlotNext(now int64) {
	var next int64
	if n.slotTable == nil && n.slotJitter == 0 && n.slotDelay == 0 {
		// mul_u64_u32_shr(max - min, rand, 32): exact for any span.
		hi, lo := bits.Mul64(uint64(n.slotMax-n.slotMin), uint64(n.r.u32()))
		next = n.slotMin + int64(hi<<32|lo>>32)
	} else {
		next = tabledist(n.slotDelay, n.slotJitter, nil, n.r, n.slotTable)
	}
	n.slotNext = now + next
	n.packetsLeft, n.bytesLeft = n.slotPackets, n.slotBytes
}

// poll is the part of netem_dequeue a dequeue attempt performs even when it
// sends nothing: a slot that opens before the head packet is due is
// re-rolled from now. The kernel attempts a dequeue after every enqueue
// and after every sent packet; so does the pipeline.
func (n *netemStage) poll(now int64) {
	if n.slotOn {
		if h := n.tfifoPeek(); h != nil && n.slotNext < h.due {
			n.getSlotNext(now)
		}
	}
}

// next returns when the stage's next packet leaves.
func (n *netemStage) next() (int64, bool) {
	if k := len(n.ahead); k > 0 {
		return n.ahead[k-1].due, true
	}
	h := n.tfifoPeek()
	if h == nil {
		return 0, false
	}
	t := h.due
	if n.slotOn && n.slotNext > t {
		t = n.slotNext
	}
	return t, true
}

// pop is netem_dequeue at time now (= the time next reported): reordered
// packets first, bypassing the child qdisc as the kernel's
// __qdisc_dequeue_head(&sch->q) path does; then the tfifo head once its
// time and its slot have come.
func (n *netemStage) pop(now int64) (*Packet, bool) {
	if k := len(n.ahead); k > 0 {
		p := n.ahead[k-1]
		n.ahead[k-1] = nil
		n.ahead = n.ahead[:k-1]
		return p, true
	}
	h := n.tfifoPeek()
	if h == nil {
		return nil, false
	}
	due := h.due
	if n.slotOn && n.slotNext < due {
		n.getSlotNext(now)
	}
	if due > now || (n.slotOn && n.slotNext > now) {
		return nil, false
	}
	p := n.tfifoPop()
	if p.isUnit() {
		n.unitExtra -= int(p.segs) - 1
	}
	if n.slotOn {
		n.packetsLeft--
		n.bytesLeft -= int64(len(p.Data))
		if n.packetsLeft <= 0 || n.bytesLeft <= 0 {
			n.getSlotNext(now)
		}
	}
	n.poll(now)
	return p, false
}

func (n *netemStage) head() (*Packet, bool) {
	if k := len(n.ahead); k > 0 {
		return n.ahead[k-1], true
	}
	return n.tfifoPeek(), false
}

// earliest: a packet may leave netem at once (reorder, jitter down to
// zero), so the entry time is the only safe bound.
func (n *netemStage) earliest(t int64, _ int) int64 { return t }

func init() {
	registerStage("netem", stageKind{
		build: func(st spec.Stage, seed uint64, now int64, _ *Pipeline) stage {
			n := st.(*spec.Netem)
			if n.HasSeed {
				seed = n.Seed
			}
			return newNetem(n, seed, now)
		},
		expect: expectNetem,
	})
}

// expectNetem is a netem stage's share of Simulate's prediction.
func expectNetem(stage, _ spec.Stage, x *expectation) {
	st := stage.(*spec.Netem)
	x.pass *= 1 - StationaryLoss(st.Loss)
	mean, std := tableMoments(st.Dist)
	x.DelayMeanMs += (float64(st.Latency) + float64(st.Jitter)*mean) / 1e6
	if st.Jitter != 0 {
		x.variance += math.Pow(float64(st.Jitter)*std/1e6, 2)
	}
	x.DuplicatePercent = 100 - (100-x.DuplicatePercent)*(1-CorrelatedProbability(st.Duplicate.Prob(), st.DuplicateCorr.Prob()))
	x.CorruptPercent = 100 - (100-x.CorruptPercent)*(1-CorrelatedProbability(st.Corrupt.Prob(), st.CorruptCorr.Prob()))
	reorder := st.Reorder.Prob()
	if st.Latency > 0 {
		reorder = ReorderedShare(reorder, st.ReorderCorr.Prob(), st.Gap)
	}
	x.ReorderPercent = 100 - (100-x.ReorderPercent)*(1-reorder)
	if st.Rate != 0 {
		x.BottleneckBps = minRate(x.BottleneckBps, float64(st.Rate))
	}
}
