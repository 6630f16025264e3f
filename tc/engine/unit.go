package engine

// Super-packets. A caller that reads GSO super-packets (the proxy's TUN
// with IFF_VNET_HDR) may hand one to the pipeline whole, as a unit that
// knows its wire segments (Packet.SetUnit), instead of splitting it into
// segments first. The pipeline keeps the per-segment semantics exactly:
//
//   - A unit goes through a chain whole only while every decision inside
//     it is the same for all its segments. Today that is a chain of netem
//     stages without a rate or slots: a netem stage draws for every
//     segment in turn, in the order and from the stream its segments would
//     draw from one by one (duplicate, loss, corrupt, reorder, delay), and
//     keeps the unit whole when none is duplicated, lost, marked, corrupted
//     or reordered, all get the same departure and the limit takes them
//     all. Otherwise it puts its random state back as it was. Where the
//     caller can cut units (Cutter) and one departure holds them, the
//     unit entering the chain goes on as pieces: each run of segments
//     that go on plain as a smaller unit, each segment whose fate differs
//     alone. Else, and for a jitter, it goes on as segments (Segmenter).
//     Either way the segments draw the same numbers again.
//   - Every other chain (a rate, a bucket, a queue discipline, classes, a
//     scheduler) takes the unit as its segments when it enters.
//   - Counters count a unit as its segments and their bytes on the wire;
//     the memory budget charges it what its segments would cost.
//
// A unit leaves through Dequeue whole, and its departure is every
// segment's. Its bytes are the caller's: the engine reads neither its
// headers nor the headroom (where the proxy keeps its virtio-net header).

// Segmenter cuts a unit into its wire segments: the caller's GSO split.
// It is called under the pipeline's lock and must not block.
type Segmenter interface {
	// Segment appends the wire segments of unit p to out, in order, as
	// plain packets (each from a pool whose buffers hold SetUnit's
	// segBuf), and leaves p to the caller, who recycles it. The pipeline
	// sets their arrival, queue and sequence numbers.
	Segment(p *Packet, out []*Packet) []*Packet
}

// Cutter is a Segmenter that can also cut a unit into smaller pieces:
// where one segment's fate differs from the rest (a loss, a duplicate, a
// limit reached inside the unit), the segments on either side go on as
// smaller units instead of one by one.
type Cutter interface {
	Segmenter
	// Cuttable reports whether Cut can cut unit p.
	Cuttable(p *Packet) bool
	// Cut returns segments [from, to) of unit p as a new packet: a unit
	// (SetUnit) of to-from segments, byte for byte what the caller's
	// split would make of them as one super-packet, or for one segment
	// that segment as Segment makes it. p stays the caller's and is left
	// as it was. It is called under the pipeline's lock and must not
	// block.
	Cut(p *Packet, from, to int) *Packet
}

// SetUnit marks p as a unit of segs wire segments whose bytes as IP
// packets total wire (each repeats the headers in front of its share of
// the payload); segBuf is the buffer size of the packets its segments
// would take, which the memory budget charges for each. segs < 2 makes p
// a plain packet again.
func (p *Packet) SetUnit(segs, wire, segBuf int) {
	if segs < 2 {
		p.segs, p.wire, p.segBuf = 0, 0, 0
		return
	}
	p.segs, p.wire, p.segBuf = uint32(segs), uint32(wire), uint32(segBuf)
}

// Segments is the number of wire segments p stands for (1 for a plain
// packet).
func (p *Packet) Segments() int {
	if p.segs < 2 {
		return 1
	}
	return int(p.segs)
}

// WireLen is the bytes of p's segments as IP packets (len(Data) for a
// plain packet).
func (p *Packet) WireLen() int {
	if p.segs < 2 {
		return len(p.Data)
	}
	return int(p.wire)
}

func (p *Packet) isUnit() bool { return p.segs >= 2 }

// CarriesUnits reports whether a unit enqueued now would go into the
// pipeline whole (not cut into segments on entry): a plain pipeline whose
// spec is netem stages without a rate or slots, or empty. A caller that
// must split super-packets itself otherwise need not make units then.
func (pl *Pipeline) CarriesUnits() bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return len(pl.classes) == 1 && pl.opt.Scheduler == nil && pl.classes[0].current.units
}

// unitStage is a stage that can take a unit whole: takeUnit either queues
// p as one packet, with every random draw its segments would make, and
// reports true, or leaves the stage exactly as it was and reports false.
type unitStage interface {
	takeUnit(p *Packet, now int64, c *chain, idx int) bool
}

// carriesUnits reports whether every stage of c may take a unit whole
// (an empty chain passes units straight through).
func (c *chain) carriesUnits() bool {
	for _, s := range c.stages {
		n, ok := s.(*netemStage)
		if !ok || n.rateBytes != 0 || n.slotOn {
			return false
		}
	}
	return true
}

// takesUnits reports whether a unit arriving now may enter the chain of
// its class whole: a plain pipeline (one class, no scheduler) whose chain
// carries units, and a memory budget with room for all its segments (a
// segment at a time, some would enter where the unit cannot).
func (pl *Pipeline) takesUnits(p *Packet) bool {
	if len(pl.classes) != 1 || pl.opt.Scheduler != nil || !pl.classes[0].current.units {
		return false
	}
	b := pl.opt.Memory
	return b == nil || b.held.Load()+packetMemory(p) <= b.limit
}

// segmentsOf cuts unit p into its segments with the Segmenter, appended
// to out, each with p's arrival, queue, flags and sequence numbers, and
// recycles p.
func (pl *Pipeline) segmentsOf(p *Packet, out []*Packet) []*Packet {
	if pl.opt.Segmenter == nil {
		panic("engine: a unit (Packet.SetUnit) enqueued into a pipeline without Options.Segmenter")
	}
	from := len(out)
	out = pl.opt.Segmenter.Segment(p, out)
	for k, s := range out[from:] {
		s.Arrival, s.Queue, s.Flags, s.Seq = p.Arrival, p.Queue, p.Flags, p.Seq+uint64(k)
		s.stageIn = p.stageIn
	}
	release(p)
	return out
}

// enqueueUnit is enqueueLocked for a unit: whole if its class's chain
// takes it whole at its first stage, else segment by segment as the
// caller would have enqueued them.
func (pl *Pipeline) enqueueUnit(p *Packet, now int64) {
	if pl.takesUnits(p) {
		cl := pl.classes[0]
		c := cl.current
		p.Flags = 0
		p.Seq = pl.seq + 1
		if len(c.stages) == 0 {
			pl.seq += uint64(p.segs)
			pl.admit(cl, p)
			c.enqueueAt(0, p, p.Arrival)
			return
		}
		p.stageIn = p.Arrival
		if c.stages[0].(unitStage).takeUnit(p, p.Arrival, c, 0) {
			pl.seq += uint64(p.segs)
			pl.admit(cl, p)
			if !cl.busy && !cl.removed {
				pl.markBusy(cl)
			}
			return
		}
		if pl.enqueuePieces(p, now, c) {
			return
		}
	}
	// Segments enqueued one by one, each with its own advance, as the
	// caller's would be; pl.arriving holds them (a unit moving between
	// stages meanwhile is cut into pl.moving).
	pl.arriving = pl.segmentsOf(p, pl.arriving[:0])
	for _, s := range pl.arriving {
		pl.enqueueLocked(s, now)
	}
	clear(pl.arriving)
}

// splitInto hands unit p, which stage idx of c does not take whole, to
// that stage as its segments, in order: what the segments reaching it
// one by one at now would meet (none leaves the stage before the last
// enters: the pipeline moves upstream stages first at equal times).
func (c *chain) splitInto(idx int, p *Packet, now int64) {
	pl := c.pl
	pl.moving = pl.segmentsOf(p, pl.moving[:0])
	// The segments not in yet are still in the stage above for the
	// limits of the stages above (a duplicate made here re-enters at the
	// root and meets them).
	c.pendingAbove = idx
	for k, s := range pl.moving {
		c.pending = len(pl.moving) - k - 1
		s.stageIn = now
		c.stages[idx].enqueue(s, now, c, idx)
	}
	c.pending = 0
	clear(pl.moving)
}

// enqueuePieces enqueues unit p, which the first stage of its chain c did
// not take whole, as the pieces its segments' fates cut it into (Cutter):
// a run of segments that go on plain at one time as one smaller unit, a
// segment whose fate differs (lost, duplicated, over the limit) alone.
// Each piece enters as its segments would have, one after the other, so
// the semantics stay the segments'. It reports false, having done
// nothing, where the Segmenter cannot cut p or the first stage times its
// segments apart (a jitter): p then goes on as segments.
func (pl *Pipeline) enqueuePieces(p *Packet, now int64, c *chain) bool {
	cut, ok := pl.opt.Segmenter.(Cutter)
	if !ok || !cut.Cuttable(p) {
		return false
	}
	n, ok := c.stages[0].(*netemStage)
	if !ok {
		return false
	}
	segs := p.Segments()
	end, apart := n.cutAt(p, 0, p.Arrival, c)
	if apart || end == segs {
		// Timed apart, or whole yet refused for another reason (a
		// first stage that sends on at once into stages below).
		return false
	}
	for from := 0; from < segs; {
		if from > 0 {
			end, apart = n.cutAt(p, from, p.Arrival, c)
		}
		switch {
		case apart:
			end = segs // the rest as segments
			for k := from; k < segs; k++ {
				pl.enqueuePiece(cut.Cut(p, k, k+1), p, now)
			}
		case end == from:
			end = from + 1 // its fate differs: alone
			pl.enqueuePiece(cut.Cut(p, from, end), p, now)
		default:
			pl.enqueuePiece(cut.Cut(p, from, end), p, now)
		}
		from = end
	}
	release(p)
	return true
}

// enqueuePiece enqueues q, cut from unit p, as p's segments would have
// entered: at p's arrival, from p's queue.
func (pl *Pipeline) enqueuePiece(q, p *Packet, now int64) {
	q.Arrival, q.Queue = p.Arrival, p.Queue
	pl.enqueueLocked(q, now)
}
