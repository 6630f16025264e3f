package engine

import "fmt"

// XStats are a queue discipline's own statistics, the kernel's xstats of
// its kind as `tc -s qdisc show` prints them. One field is set: the one
// of the stage's kind (pfifo and bfifo have none).
type XStats struct {
	CoDel   *CoDelXStats   `json:"codel,omitempty"`
	FQCoDel *FQCoDelXStats `json:"fq_codel,omitempty"`
	PIE     *PIEXStats     `json:"pie,omitempty"`
	RED     *REDXStats     `json:"red,omitempty"`
}

// CoDelXStats is struct tc_codel_xstats.
type CoDelXStats struct {
	MaxPacket     uint64 `json:"maxpacket"`      // largest packet seen
	Count         uint32 `json:"count"`          // drops in the current dropping state
	LastCount     uint32 `json:"lastcount"`      // count when it was last entered
	LDelayUs      uint64 `json:"ldelay_us"`      // sojourn of the last packet dequeued
	DropNextUs    int64  `json:"drop_next_us"`   // to the next drop (negative: past), 0 when not dropping
	DropOverlimit uint64 `json:"drop_overlimit"` // drops by the packet limit
	ECNMark       uint64 `json:"ecn_mark"`
	Dropping      bool   `json:"dropping"`
	CEMark        uint64 `json:"ce_mark"` // marks by ce_threshold
}

// FQCoDelXStats is struct tc_fq_codel_qd_stats.
type FQCoDelXStats struct {
	MaxPacket      uint64 `json:"maxpacket"`
	DropOverlimit  uint64 `json:"drop_overlimit"`
	ECNMark        uint64 `json:"ecn_mark"`
	NewFlowCount   uint64 `json:"new_flow_count"` // flows that came in as new
	NewFlowsLen    int    `json:"new_flows_len"`
	OldFlowsLen    int    `json:"old_flows_len"`
	CEMark         uint64 `json:"ce_mark"`
	MemoryUsage    int64  `json:"memory_usage"`
	DropOvermemory uint64 `json:"drop_overmemory"`
}

// PIEXStats is struct tc_pie_xstats.
type PIEXStats struct {
	Prob             float64 `json:"prob"`        // drop probability, 0..1
	DelayUs          uint64  `json:"delay_us"`    // current queueing delay
	AvgDqRate        uint64  `json:"avg_dq_rate"` // bytes/s (dq_rate_estimator only)
	DqRateEstimating bool    `json:"dq_rate_estimating"`
	PacketsIn        uint64  `json:"packets_in"`
	Dropped          uint64  `json:"dropped"`
	Overlimit        uint64  `json:"overlimit"`
	ECNMark          uint64  `json:"ecn_mark"`
}

// REDXStats is struct tc_red_xstats.
type REDXStats struct {
	Early  uint64 `json:"early"`  // drops by probability or above the max threshold
	PDrop  uint64 `json:"pdrop"`  // drops by the limit
	Other  uint64 `json:"other"`  // always 0, as in the kernel
	Marked uint64 `json:"marked"` // ECN marks instead of those drops
}

// xstatser is a Qdisc with xstats; now is the snapshot's time.
type xstatser interface {
	xstats(now int64) *XStats
}

// ownQdisc is a stage that shows a queue discipline as its own in
// snapshots: a queue stage, or a shaper's child.
type ownQdisc interface {
	qdisc() Qdisc
}

func (s *queueStage) qdisc() Qdisc { return s.q }
func (v *childView) qdisc() Qdisc  { return v.s.q }

// stageXStats is the xstats of stage s, nil if it has none.
func stageXStats(s stage, now int64) *XStats {
	o, ok := s.(ownQdisc)
	if !ok {
		return nil
	}
	return QdiscXStats(o.qdisc(), now)
}

// QdiscXStats is the xstats of q at time now, nil for a kind without any
// (for a scheduler that holds its classes' queues itself, an htb leaf).
func QdiscXStats(q Qdisc, now int64) *XStats {
	if x, ok := q.(xstatser); ok {
		return x.xstats(now)
	}
	return nil
}

// codelXStats is codel_dump_stats for a qdisc's vars and stats at now.
func codelXStats(v *codelVars, st *codelStats, dropOverlimit uint64, now int64) *CoDelXStats {
	x := &CoDelXStats{MaxPacket: uint64(st.maxPacket), Count: v.count, LastCount: v.lastcount,
		LDelayUs: uint64(v.ldelay) << codelShift / 1000, DropOverlimit: dropOverlimit,
		ECNMark: uint64(st.ecnMark), Dropping: v.dropping, CEMark: st.ceMark}
	if v.dropping {
		x.DropNextUs = int64(int32(v.dropNext-toCodelTime(now))) << codelShift / 1000
	}
	return x
}

func (c *codelQdisc) xstats(now int64) *XStats {
	return &XStats{CoDel: codelXStats(&c.vars, &c.stats, c.stats.dropOverlim, now)}
}

func (f *fqCodel) xstats(int64) *XStats {
	x := &FQCoDelXStats{MaxPacket: uint64(f.stats.maxPacket), DropOverlimit: f.dropOverlimit,
		ECNMark: uint64(f.stats.ecnMark), NewFlowCount: f.newFlowCount, CEMark: f.stats.ceMark,
		MemoryUsage: f.memory, DropOvermemory: f.dropOvermemory}
	for fl := f.newFlows.head; fl != nil; fl = fl.next {
		x.NewFlowsLen++
	}
	for fl := f.oldFlows.head; fl != nil; fl = fl.next {
		x.OldFlowsLen++
	}
	return &XStats{FQCoDel: x}
}

func (q *pieQdisc) xstats(int64) *XStats {
	v := &q.vars
	x := &PIEXStats{Prob: float64(v.prob) / float64(pieMaxProb), DelayUs: v.qdelay << pschedShift / 1000,
		DqRateEstimating: q.prm.dqRateEstimator, PacketsIn: q.packetsIn, Dropped: q.dropped,
		Overlimit: q.overlimit, ECNMark: q.ecnMark}
	if q.prm.dqRateEstimator {
		// avg_dq_rate is bytes per psched tick, scaled by 2^PIE_SCALE.
		x.AvgDqRate = uint64(v.avgDqRate) * pschedTicksPerSec >> pieScale
	}
	return &XStats{PIE: x}
}

func (q *redQdisc) xstats(int64) *XStats {
	return &XStats{RED: &REDXStats{Early: q.probDrop + q.forcedDrop, PDrop: q.pdrop, Marked: q.probMark + q.forcedMark}}
}

// String prints the xstats as `tc -s qdisc show` prints its kind's, on one
// line ("" for none).
func (x *XStats) String() string {
	us := tcTime
	switch {
	case x == nil:
		return ""
	case x.CoDel != nil:
		c := x.CoDel
		s := fmt.Sprintf("count %d lastcount %d ldelay %s", c.Count, c.LastCount, us(int64(c.LDelayUs)))
		if c.Dropping {
			s += " dropping"
		}
		if c.DropNextUs != 0 {
			s += " drop_next " + us(c.DropNextUs)
		}
		s += fmt.Sprintf(" maxpacket %d ecn_mark %d drop_overlimit %d", c.MaxPacket, c.ECNMark, c.DropOverlimit)
		if c.CEMark != 0 {
			s += fmt.Sprintf(" ce_mark %d", c.CEMark)
		}
		return s
	case x.FQCoDel != nil:
		f := x.FQCoDel
		s := fmt.Sprintf("maxpacket %d drop_overlimit %d new_flow_count %d ecn_mark %d", f.MaxPacket, f.DropOverlimit, f.NewFlowCount, f.ECNMark)
		if f.CEMark != 0 {
			s += fmt.Sprintf(" ce_mark %d", f.CEMark)
		}
		s += fmt.Sprintf(" memory_used %d", f.MemoryUsage)
		if f.DropOvermemory != 0 {
			s += fmt.Sprintf(" drop_overmemory %d", f.DropOvermemory)
		}
		return s + fmt.Sprintf(" new_flows_len %d old_flows_len %d", f.NewFlowsLen, f.OldFlowsLen)
	case x.PIE != nil:
		p := x.PIE
		s := fmt.Sprintf("prob %g delay %s", p.Prob, us(int64(p.DelayUs)))
		if p.DqRateEstimating {
			s += fmt.Sprintf(" avg_dq_rate %d", p.AvgDqRate)
		}
		return s + fmt.Sprintf(" pkts_in %d overlimit %d dropped %d ecn_mark %d", p.PacketsIn, p.Overlimit, p.Dropped, p.ECNMark)
	case x.RED != nil:
		r := x.RED
		return fmt.Sprintf("marked %d early %d pdrop %d other %d", r.Marked, r.Early, r.PDrop, r.Other)
	}
	return ""
}

// tcTime prints a time in microseconds as tc's sprint_time does: "1.5s",
// "119.0ms", "42us".
func tcTime(us int64) string {
	switch a := max(us, -us); {
	case a >= 1e6:
		return fmt.Sprintf("%.1fs", float64(us)/1e6)
	case a >= 1e3:
		return fmt.Sprintf("%.1fms", float64(us)/1e3)
	}
	return fmt.Sprintf("%dus", us)
}
