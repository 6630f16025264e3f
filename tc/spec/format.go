package spec

import (
	"strconv"
	"strings"

	"github.com/wanlab/wanlab/units"
)

// String prints the spec in canonical tc form: stages joined by " | ",
// the first stage without its "netem" keyword, each stage's keywords in the
// order "tc qdisc show" prints them, with lower-case units and without
// values that are tc's defaults. Parse(s.String()) reproduces a parsed s
// exactly. The empty spec prints as "".
func (s *Spec) String() string {
	if s.IsEmpty() {
		return ""
	}
	parts := make([]string, len(s.Stages))
	for i, st := range s.Stages {
		if st == nil {
			parts[i] = "<nil>"
			continue
		}
		parts[i] = st.String()
		if n, ok := st.(*Netem); ok && i == 0 && n != nil {
			if args := n.args(); len(args) > 0 {
				parts[i] = strings.Join(args, " ")
			}
		}
	}
	return strings.Join(parts, " | ")
}

// String prints the stage as "netem ARGS" in canonical form.
func (n *Netem) String() string {
	return strings.Join(append([]string{"netem"}, n.args()...), " ")
}

func pct(p units.Percent) string { return p.String() }

// args lists netem's arguments in tc's print order (netem_print_opt):
// limit, delay, loss, duplicate, reorder, corrupt, rate, slot, seed, with
// distribution after delay, ecn after loss and gap after reorder, where
// the grammar puts them.
func (n *Netem) args() []string {
	var a []string
	if n.Limit != 0 && n.Limit != DefaultNetemLimit {
		a = append(a, "limit", strconv.FormatUint(uint64(n.Limit), 10))
	}
	if n.Latency != 0 || n.Jitter != 0 {
		a = append(a, "delay", units.FormatDuration(n.Latency))
		if n.Jitter != 0 {
			a = append(a, units.FormatDuration(n.Jitter))
			if n.DelayCorr != 0 {
				a = append(a, pct(n.DelayCorr))
			}
		}
	}
	if n.Dist != DistUniform {
		a = append(a, "distribution", n.Dist.String())
	}
	switch l := n.Loss; l.Kind {
	case LossRandom:
		a = append(a, "loss", pct(l.P))
		if l.Corr != 0 {
			a = append(a, pct(l.Corr))
		}
	case LossState:
		a = append(a, "loss", "state", pct(l.P13))
		a = appendOptional(a, []units.Percent{l.P31, l.P32, l.P23, l.P14}, []units.Percent{100 - l.P13, 0, 100, 0})
	case LossGE:
		a = append(a, "loss", "gemodel", pct(l.GP))
		a = appendOptional(a, []units.Percent{l.GR, l.GH, l.GK}, []units.Percent{100 - l.GP, 100, 0})
	}
	if n.ECN {
		a = append(a, "ecn")
	}
	a = withCorr(a, "duplicate", n.Duplicate, n.DuplicateCorr)
	a = withCorr(a, "reorder", n.Reorder, n.ReorderCorr)
	// Gap 1 is what q_netem.c fills in with reorder; print it only when it
	// says something.
	if n.Gap > 1 || n.Gap == 1 && n.Reorder == 0 {
		a = append(a, "gap", strconv.FormatUint(uint64(n.Gap), 10))
	}
	a = withCorr(a, "corrupt", n.Corrupt, n.CorruptCorr)
	if n.Rate != 0 {
		a = append(a, "rate", n.Rate.String())
		switch {
		case n.CellOverhead != 0:
			a = append(a, itoa(n.PacketOverhead), strconv.FormatUint(uint64(n.CellSize), 10), itoa(n.CellOverhead))
		case n.CellSize != 0:
			a = append(a, itoa(n.PacketOverhead), strconv.FormatUint(uint64(n.CellSize), 10))
		case n.PacketOverhead != 0:
			a = append(a, itoa(n.PacketOverhead))
		}
	}
	if s := n.Slot; s != nil {
		if s.IsDistribution() {
			a = append(a, "slot", "distribution", s.Dist.String(), units.FormatDuration(s.Delay), units.FormatDuration(s.Jitter))
		} else {
			a = append(a, "slot", units.FormatDuration(s.MinDelay))
			if s.MaxDelay != s.MinDelay {
				a = append(a, units.FormatDuration(s.MaxDelay))
			}
		}
		if s.Packets != 0 {
			a = append(a, "packets", strconv.FormatUint(uint64(s.Packets), 10))
		}
		if s.Bytes != 0 {
			a = append(a, "bytes", s.Bytes.String())
		}
	}
	if n.HasSeed {
		a = append(a, "seed", strconv.FormatUint(n.Seed, 10))
	}
	return a
}

// withCorr appends "kw P [CORR]" when p is set (duplicate, reorder,
// corrupt).
func withCorr(a []string, kw string, p, corr units.Percent) []string {
	if p == 0 {
		return a
	}
	a = append(a, kw, pct(p))
	if corr != 0 {
		a = append(a, pct(corr))
	}
	return a
}

// appendOptional appends positional optional values up to the last one
// that differs from its default, as the grammar lets trailing ones be left
// out.
func appendOptional(a []string, vals, defaults []units.Percent) []string {
	last := -1
	for i := range vals {
		if vals[i] != defaults[i] {
			last = i
		}
	}
	for _, v := range vals[:last+1] {
		a = append(a, pct(v))
	}
	return a
}

func itoa(v int32) string { return strconv.FormatInt(int64(v), 10) }

// String prints the stage as "tbf ARGS" in canonical form: rate, burst,
// limit or latency (as typed), then peakrate, mtu, mpu, overhead and
// linklayer when set.
func (b *TBF) String() string {
	a := []string{"tbf", "rate", b.Rate.String(), "burst", withCell(b.Burst, b.BurstCell)}
	if b.Latency != 0 {
		a = append(a, "latency", units.FormatDuration(b.Latency))
	} else {
		a = append(a, "limit", b.Limit.String())
	}
	if b.PeakRate != 0 {
		a = append(a, "peakrate", b.PeakRate.String())
	}
	if b.MTU != 0 || b.MTUCell != 0 {
		a = append(a, "mtu", withCell(b.MTU, b.MTUCell))
	}
	if b.MPU != 0 {
		a = append(a, "mpu", b.MPU.String())
	}
	if b.Overhead != 0 {
		a = append(a, "overhead", strconv.FormatUint(uint64(b.Overhead), 10))
	}
	if b.LinkLayer == LinkATM {
		a = append(a, "linklayer", "atm")
	}
	return strings.Join(a, " ")
}

func withCell(sz, cell units.Size) string {
	if cell == 0 {
		return sz.String()
	}
	return sz.String() + "/" + strconv.FormatUint(uint64(cell), 10)
}
