package kernel

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// TCA_NETEM_* attribute types (include/uapi/linux/pkt_sched.h).
const (
	tcaNetemCorr      = 1
	tcaNetemDelayDist = 2
	tcaNetemReorder   = 3
	tcaNetemCorrupt   = 4
	tcaNetemLoss      = 5
	tcaNetemRate      = 6
	tcaNetemECN       = 7
	tcaNetemRate64    = 8
	tcaNetemLatency64 = 10
	tcaNetemJitter64  = 11
	tcaNetemSlot      = 12
	tcaNetemSlotDist  = 13
	tcaNetemPRNGSeed  = 14

	netemLossGI = 1 // 4-state model
	netemLossGE = 2 // Gilbert-Elliott
)

// prob scales a percentage to the kernel's u32 probability as q_netem.c's
// set_percent does: rint(fraction * UINT32_MAX).
func prob(p units.Percent) uint32 {
	return uint32(math.RoundToEven(float64(p) / 100 * math.MaxUint32))
}

// percentOf inverts prob, choosing the shortest decimal that scales back
// to the same u32, so "1%" reads back as 1%, not 0.99999999977%.
func percentOf(v uint32) units.Percent {
	exact := float64(v) / math.MaxUint32 * 100
	for digits := 1; digits <= 17; digits++ {
		p, _ := strconv.ParseFloat(strconv.FormatFloat(exact, 'g', digits, 64), 64)
		if prob(units.Percent(p)) == v {
			return units.Percent(p)
		}
	}
	return units.Percent(exact)
}

// EncodeNetem returns the TCA_OPTIONS payload for a netem qdisc as
// q_netem.c builds it: struct tc_netem_qopt followed by TCA_NETEM_*
// attributes. Every field of n is encoded; vishvananda/netlink's Netem
// cannot carry slots, the 4-state and Gilbert-Elliott models, rate
// overheads, 64-bit rates, ecn, the seed or distribution tables, which is
// why this is done by hand. The layout follows iproute2 since 6.10 (64-bit
// latency and jitter attributes). One deliberate difference from tc: a
// duplicate correlation alone is sent (tc drops it unless another
// correlation is typed).
func EncodeNetem(n *spec.Netem) ([]byte, error) {
	var w wire
	loss := uint32(0)
	if n.Loss.Kind == spec.LossRandom {
		loss = prob(n.Loss.P)
	}
	// struct tc_netem_qopt. The 32-bit microsecond latency and jitter are
	// left 0: "old latency value in opt is no longer used" (q_netem.c).
	w.u32(0)
	w.u32(n.QueueLimit())
	w.u32(loss)
	w.u32(n.Gap)
	w.u32(prob(n.Duplicate))
	w.u32(0)

	var a attrs
	if n.Latency != 0 || n.Jitter != 0 {
		a.u64(tcaNetemLatency64, uint64(n.Latency))
	}
	if n.Jitter != 0 {
		a.u64(tcaNetemJitter64, uint64(n.Jitter))
	}
	lossCorr := units.Percent(0)
	if n.Loss.Kind == spec.LossRandom {
		lossCorr = n.Loss.Corr
	}
	// tc sends the correlation struct whenever any correlation was typed,
	// reorder's and corrupt's included (they have their own attributes).
	if n.DelayCorr != 0 || lossCorr != 0 || n.DuplicateCorr != 0 || n.ReorderCorr != 0 || n.CorruptCorr != 0 {
		var c wire
		c.u32(prob(n.DelayCorr))
		c.u32(prob(lossCorr))
		c.u32(prob(n.DuplicateCorr))
		a.add(tcaNetemCorr, c.b)
	}
	if n.Reorder != 0 {
		var c wire
		c.u32(prob(n.Reorder))
		c.u32(prob(n.ReorderCorr))
		a.add(tcaNetemReorder, c.b)
	}
	if n.ECN {
		a.u32(tcaNetemECN, 1)
	}
	if n.Corrupt != 0 {
		var c wire
		c.u32(prob(n.Corrupt))
		c.u32(prob(n.CorruptCorr))
		a.add(tcaNetemCorrupt, c.b)
	}
	if s := n.Slot; s != nil {
		if s.Bytes > math.MaxInt32 || s.Packets > math.MaxInt32 {
			return nil, fmt.Errorf("netem slot packets %d bytes %d: the kernel takes at most %d", s.Packets, s.Bytes, math.MaxInt32)
		}
		var c wire
		c.s64(int64(s.MinDelay))
		c.s64(int64(s.MaxDelay))
		c.s32(int32(s.Packets))
		c.s32(int32(s.Bytes))
		c.s64(int64(s.Delay))
		c.s64(int64(s.Jitter))
		a.add(tcaNetemSlot, c.b)
	}
	switch l := n.Loss; l.Kind {
	case spec.LossState:
		var c wire // struct tc_netem_gimodel: p13 p31 p32 p14 p23
		for _, p := range []units.Percent{l.P13, l.P31, l.P32, l.P14, l.P23} {
			c.u32(prob(p))
		}
		var in attrs
		in.add(netemLossGI, c.b)
		a.nested(tcaNetemLoss, in)
	case spec.LossGE:
		var c wire // struct tc_netem_gemodel: p r h k1; h = 1 - typed "1-h"
		c.u32(prob(l.GP))
		c.u32(prob(l.GR))
		c.u32(math.MaxUint32 - prob(l.GH))
		c.u32(prob(l.GK))
		var in attrs
		in.add(netemLossGE, c.b)
		a.nested(tcaNetemLoss, in)
	}
	if n.Rate != 0 {
		bps := uint64(n.Rate / 8)
		var c wire
		if bps >= 1<<32 {
			a.u64(tcaNetemRate64, bps)
			c.u32(math.MaxUint32)
		} else {
			c.u32(uint32(bps))
		}
		c.s32(n.PacketOverhead)
		c.u32(n.CellSize)
		c.s32(n.CellOverhead)
		a.add(tcaNetemRate, c.b)
	}
	if n.HasSeed {
		a.u64(tcaNetemPRNGSeed, n.Seed)
	}
	if n.Dist != spec.DistUniform {
		a.add(tcaNetemDelayDist, distBytes(n.Dist))
	}
	if s := n.Slot; s != nil && s.IsDistribution() && s.Dist != spec.DistUniform {
		a.add(tcaNetemSlotDist, distBytes(s.Dist))
	}
	return append(w.b, a.b...), nil
}

// CheckNetem reports, by name, what of n the kernel cannot hold as given
// instead of letting it change the value silently: netem_change caps the
// jitter at INT_MAX ns (about 2.1 s) because tabledist works in 32 bits.
func CheckNetem(n *spec.Netem) error {
	const maxJitter = math.MaxInt32 * time.Nanosecond
	if n.Jitter > maxJitter {
		return fmt.Errorf("netem jitter %s: the kernel caps jitter at %s (sch_netem's tabledist is 32-bit): not supported", units.FormatDuration(n.Jitter), maxJitter)
	}
	if s := n.Slot; s != nil && s.Jitter > maxJitter {
		return fmt.Errorf("netem slot jitter %s: the kernel caps it at %s: not supported", units.FormatDuration(s.Jitter), maxJitter)
	}
	return nil
}

func distBytes(d spec.Distribution) []byte {
	t := DistTable(d)
	b := make([]byte, 0, 2*len(t))
	for _, v := range t {
		b = native.AppendUint16(b, uint16(v))
	}
	return b
}

// DecodeNetem reads a netem TCA_OPTIONS payload (as EncodeNetem writes it
// or the kernel dumps it in netem_dump). The kernel does not dump
// distribution tables: from a dump, Dist reads back as uniform.
func DecodeNetem(b []byte) (n *spec.Netem, err error) {
	r := reader{b: b}
	latencyUS := r.u32()
	limit := r.u32()
	loss := r.u32()
	gap := r.u32()
	dup := r.u32()
	jitterUS := r.u32()
	if r.err != nil {
		return nil, fmt.Errorf("netem options: %w", r.err)
	}
	n = &spec.Netem{Latency: time.Duration(latencyUS) * time.Microsecond, Jitter: time.Duration(jitterUS) * time.Microsecond,
		Gap: gap, Duplicate: percentOf(dup)}
	if limit != spec.DefaultNetemLimit {
		n.Limit = limit
	}
	if loss != 0 {
		n.Loss = spec.Loss{Kind: spec.LossRandom, P: percentOf(loss)}
	}
	m, err := parseAttrs(r.b)
	if err != nil {
		return nil, fmt.Errorf("netem options: %w", err)
	}
	get := func(typ uint16) *reader {
		if v, ok := m[typ]; ok {
			return &reader{b: v}
		}
		return nil
	}
	if x := get(tcaNetemLatency64); x != nil {
		n.Latency = time.Duration(x.s64())
	}
	if x := get(tcaNetemJitter64); x != nil {
		n.Jitter = time.Duration(x.s64())
	}
	if x := get(tcaNetemCorr); x != nil {
		n.DelayCorr = percentOf(x.u32())
		lc := percentOf(x.u32())
		if n.Loss.Kind == spec.LossRandom {
			n.Loss.Corr = lc
		}
		n.DuplicateCorr = percentOf(x.u32())
		if x.err != nil {
			return nil, fmt.Errorf("netem correlation: %w", x.err)
		}
	}
	if x := get(tcaNetemReorder); x != nil {
		n.Reorder, n.ReorderCorr = percentOf(x.u32()), percentOf(x.u32())
	}
	if x := get(tcaNetemCorrupt); x != nil {
		n.Corrupt, n.CorruptCorr = percentOf(x.u32()), percentOf(x.u32())
	}
	if x := get(tcaNetemECN); x != nil {
		n.ECN = x.u32() != 0
	}
	if x := get(tcaNetemLoss); x != nil {
		lm, err := parseAttrs(x.b)
		if err != nil {
			return nil, fmt.Errorf("netem loss model: %w", err)
		}
		if v, ok := lm[netemLossGI]; ok {
			g := reader{b: v}
			p13, p31, p32, p14, p23 := g.u32(), g.u32(), g.u32(), g.u32(), g.u32()
			n.Loss = spec.Loss{Kind: spec.LossState, P13: percentOf(p13), P31: percentOf(p31), P32: percentOf(p32),
				P14: percentOf(p14), P23: percentOf(p23)}
		} else if v, ok := lm[netemLossGE]; ok {
			g := reader{b: v}
			p, rr, h, k1 := g.u32(), g.u32(), g.u32(), g.u32()
			n.Loss = spec.Loss{Kind: spec.LossGE, GP: percentOf(p), GR: percentOf(rr), GH: percentOf(math.MaxUint32 - h), GK: percentOf(k1)}
		}
	}
	if x := get(tcaNetemRate); x != nil {
		bps := uint64(x.u32())
		n.PacketOverhead = x.s32()
		n.CellSize = x.u32()
		n.CellOverhead = x.s32()
		if y := get(tcaNetemRate64); y != nil {
			bps = uint64(y.s64())
		}
		n.Rate = units.Rate(bps * 8)
	}
	if x := get(tcaNetemSlot); x != nil {
		s := &spec.Slot{MinDelay: time.Duration(x.s64()), MaxDelay: time.Duration(x.s64())}
		pk, by := x.s32(), x.s32()
		s.Delay, s.Jitter = time.Duration(x.s64()), time.Duration(x.s64())
		// The kernel stores "unlimited" as INT_MAX (get_slot).
		if pk > 0 && pk != math.MaxInt32 {
			s.Packets = uint32(pk)
		}
		if by > 0 && by != math.MaxInt32 {
			s.Bytes = units.Size(by)
		}
		if y := get(tcaNetemSlotDist); y != nil {
			s.Dist = distOfTable(y.b)
		}
		n.Slot = s
	}
	if x := get(tcaNetemPRNGSeed); x != nil {
		n.Seed, n.HasSeed = uint64(x.s64()), true
	}
	if x := get(tcaNetemDelayDist); x != nil {
		n.Dist = distOfTable(x.b)
	}
	return n, nil
}

// IgnoredError says the kernel took a netem stage but does not hold all of
// it: an attribute its sch_netem predates is dropped without an error
// (netem parses its options leniently), e.g. the seed before Linux 6.6.
type IgnoredError struct {
	Stage      int    // 1-based position in the spec
	What       string // what was lost, "seed 42"; "" when more than one field differs
	Sent, Kept string // the stage as sent and as the kernel dumps it
}

func (e *IgnoredError) Error() string {
	if e.What != "" {
		return fmt.Sprintf("kernel ignored netem %s of stage %d (this sch_netem does not know it; the seed needs Linux 6.6): nothing changed", e.What, e.Stage)
	}
	return fmt.Sprintf("kernel holds netem stage %d as %q, not %q: nothing changed", e.Stage, e.Kept, e.Sent)
}

// Unwrap lets callers test errors.Is(err, ErrNotSupported).
func (e *IgnoredError) Unwrap() error { return ErrNotSupported }

// checkKept compares a netem stage with what the kernel dumps back after
// taking it. Distribution tables are never dumped, so they are left out of
// the comparison.
func checkKept(stage int, sent *spec.Netem, dumped []byte) error {
	got, err := DecodeNetem(dumped)
	if err != nil {
		return err
	}
	got, want := withoutTables(got), withoutTables(sent)
	if got.String() == want.String() {
		return nil
	}
	e := &IgnoredError{Stage: stage, Sent: want.String(), Kept: got.String()}
	if sent.HasSeed && !got.HasSeed {
		if got.HasSeed, got.Seed = true, sent.Seed; got.String() == want.String() {
			e.What = fmt.Sprintf("seed %d", sent.Seed)
		}
	}
	return e
}

// withoutTables returns n as a dump reads it back: delay and slot
// distributions uniform.
func withoutTables(n *spec.Netem) *spec.Netem {
	c := *n
	c.Dist = spec.DistUniform
	if n.Slot != nil {
		s := *n.Slot
		s.Dist = spec.DistUniform
		c.Slot = &s
	}
	return &c
}

func init() {
	registerCodec("netem", stageCodec{
		// Apply refuses a stage the kernel would keep only in part
		// (CheckNetem) before encoding it.
		encode: func(_ Clock, st spec.Stage) ([]byte, error) {
			n := st.(*spec.Netem)
			if err := CheckNetem(n); err != nil {
				return nil, err
			}
			return EncodeNetem(n)
		},
		decode: func(_ Clock, b []byte) (spec.Stage, error) { return DecodeNetem(b) },
	})
}
