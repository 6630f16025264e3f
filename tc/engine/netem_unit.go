package engine

import "math/rand/v2"

// netemSaved is the state a netem stage's random decisions move: its
// PCG, the correlation states, the loss model and the gap counter, all
// plain values. A copy taken before a unit's draws puts the stage back
// as it was when the unit cannot stay whole.
type netemSaved struct {
	pcg                               rand.PCG
	dupCorr, corruptCorr, reorderCorr correlated
	delayCorr                         delayCorrelation
	loss                              lossModel
	counter                           uint32
}

func (n *netemStage) save() netemSaved {
	return netemSaved{pcg: n.r.pcg, dupCorr: n.dupCorr, corruptCorr: n.corruptCorr, reorderCorr: n.reorderCorr,
		delayCorr: n.delayCorr, loss: n.loss, counter: n.counter}
}

func (n *netemStage) restore(s netemSaved) {
	n.r.pcg = s.pcg // n.r.rng reads n.r.pcg in place
	n.dupCorr, n.corruptCorr, n.reorderCorr = s.dupCorr, s.corruptCorr, s.reorderCorr
	n.delayCorr, n.loss, n.counter = s.delayCorr, s.loss, s.counter
}

// takeUnit implements unitStage: netem_enqueue's draws for each segment of
// unit p in turn, as enqueue makes them for a plain packet, and the unit
// queued whole when every segment goes on plain (not duplicated, lost,
// marked, corrupted or reordered), at the same time, within the limit. A
// stage with a rate or slots times segments apart and never takes one.
func (n *netemStage) takeUnit(p *Packet, now int64, c *chain, idx int) bool {
	if n.rateBytes != 0 || n.slotOn {
		return false
	}
	saved := n.save()
	segs := p.Segments()
	end, due, _ := n.drawRun(p, 0, now, c, idx)
	if end < segs || idx == 0 && due == now && len(c.stages) > 1 {
		// Sent on at once by the first stage, segments arriving one by
		// one each go through the stages below before the next arrives
		// (a duplicate made below re-enters ahead of it): as segments.
		n.restore(saved)
		return false
	}
	n.ctr.in(p)
	p.order = n.order + 1
	n.order += uint64(segs)
	p.due = due
	if n.len() == 0 || p.due > n.maxDue {
		n.maxDue = p.due
	}
	n.unitExtra += segs - 1
	n.tfifoEnqueue(p)
	n.poll(now)
	return true
}

// drawRun makes the draws of enqueue for segments from, from+1, ... of
// unit p, in order, each taken only as far as enqueue would (duplicate,
// loss, corrupt, the limit, reorder, then the delay), while the segments
// go on plain with one departure: the run [from, end) and its departure
// due. It leaves the stage's random state after the run's draws, before
// segment end's; apart tells that segment end goes on plain too but at
// another time (a jitter), where every segment may leave at its own.
func (n *netemStage) drawRun(p *Packet, from int, now int64, c *chain, idx int) (end int, due int64, apart bool) {
	held := c.heldFrom(idx)
	segs := p.Segments()
	for k := from; k < segs; k++ {
		before := n.save()
		plain := !(!n.noDup && p.Flags&FlagDuplicate == 0 && n.duplicate != 0 && n.duplicate >= n.dupCorr.next(n.r)) &&
			!n.loss.event(n.r) &&
			!(n.corrupt != 0 && n.corrupt >= n.corruptCorr.next(n.r)) &&
			held+k-from < n.limit &&
			(n.gap == 0 || n.counter < n.gap-1 || n.reorder < n.reorderCorr.next(n.r))
		if !plain {
			n.restore(before)
			return k, due, false
		}
		var delay int64
		if n.delayCorr.rho == 0 {
			delay = tabledist(n.latency, n.jitter, nil, n.r, n.table)
		} else {
			delay = tabledistCorrelated(n.latency, n.jitter, n.delayCorr.uniform(n.r), n.table)
		}
		d := max(now+delay, now)
		if k > from && d != due {
			n.restore(before)
			return k, due, true
		}
		due = d
		n.counter++
	}
	return segs, due, false
}

// cutAt is where unit p, which this stage (its chain's first) does not
// take whole, is cut so that its pieces can go on whole: the end of the
// run of segments from from on that go on plain at one time, leaving the
// stage's state as it was. A run that ends on a segment lost, duplicated,
// marked, corrupted, reordered or over the limit ends there (that segment
// then goes alone); one that ends on another departure time returns
// apart, for a jitter times every segment apart and pieces would only
// be segments made dearer.
func (n *netemStage) cutAt(p *Packet, from int, now int64, c *chain) (end int, apart bool) {
	if n.rateBytes != 0 || n.slotOn {
		return from, true
	}
	saved := n.save()
	end, _, apart = n.drawRun(p, from, now, c, 0)
	n.restore(saved)
	return end, apart
}
