// Package spec is wanlab's impairment language: tc-netem(8) and tc-tbf(8)
// argument syntax, stages joined by "|", parsed exactly as iproute2 parses
// them and printed back in canonical tc form.
package spec

import (
	"time"

	"github.com/wanlab/wanlab/units"
)

// Spec is a pipeline of stages, root first:
// "delay 100ms | tbf rate 50mbit burst 50kb limit 500kb" is a netem root
// qdisc with a tbf child. An empty Spec means "no impairment".
type Spec struct{ Stages []Stage }

// Stage is *Netem or *TBF.
type Stage interface {
	Kind() string
	String() string
}

// Distribution names a netem delay distribution table.
type Distribution int

// Delay distributions. DistUniform is netem's default: the kernel has no
// table loaded and draws jitter uniformly in [-jitter, +jitter).
const (
	DistUniform Distribution = iota
	DistNormal
	DistPareto
	DistParetoNormal
)

var distNames = [...]string{"uniform", "normal", "pareto", "paretonormal"}

// String returns the name tc uses for the distribution.
func (d Distribution) String() string {
	if d >= 0 && int(d) < len(distNames) {
		return distNames[d]
	}
	return "unknown"
}

// LossKind selects netem's loss model.
type LossKind int

// Loss models.
const (
	LossNone   LossKind = iota
	LossRandom          // "loss random P [CORR]": independent (or correlated) drops
	LossState           // "loss state p13 ...": 4-state Markov (GI model)
	LossGE              // "loss gemodel p ...": Gilbert-Elliott
)

// Loss describes netem's loss model.
type Loss struct {
	Kind LossKind
	// LossRandom: probability and correlation.
	P, Corr units.Percent
	// LossState: transition probabilities of the 4-state Markov model.
	// iproute2 fills omitted ones: with only p13 given, p31 = 100 - p13 and
	// the rest 0; p14 defaults to 0, p23 to 100 (when p32 given),
	// as q_netem.c does. The values here are the filled-in ones.
	P13, P31, P32, P23, P14 units.Percent
	// LossGE: Gilbert-Elliott parameters AS TYPED: p (good→bad), r
	// (bad→good), 1-h (loss probability in the bad state) and 1-k (loss
	// probability in the good state). iproute2 defaults an omitted r to
	// 100-p, 1-h to 100% and 1-k to 0%. Note what the kernel stores: tc
	// sends h = 100%-(1-h) and k1 = 100%-(1-k) in struct tc_netem_gemodel,
	// i.e. iproute2 complements the last two before handing them over, and
	// sch_netem.c's loss_gilb_ell() drops in the bad state when
	// rand > h and in the good state when rand > k1. GH and GK here are the
	// typed (loss) probabilities, not the kernel's stored complements.
	GP, GR, GH, GK units.Percent
}

// Slot describes netem's slotting ("slot MIN [MAX]" or
// "slot distribution D DELAY JITTER"), with optional packets/bytes budgets
// per slot.
type Slot struct {
	MinDelay, MaxDelay time.Duration // "slot MIN [MAX]"; MaxDelay = MinDelay when omitted
	// "slot distribution D DELAY JITTER": Dist is not DistUniform and
	// Delay/Jitter are set, MinDelay/MaxDelay zero.
	Dist          Distribution
	Delay, Jitter time.Duration
	Packets       uint32     // 0 = unlimited
	Bytes         units.Size // 0 = unlimited
}

// Netem is a tc-netem(8) stage. Zero values mean "not set" (tc's defaults).
type Netem struct {
	Limit         uint32 // packets, default 1000
	Latency       time.Duration
	Jitter        time.Duration
	DelayCorr     units.Percent
	Dist          Distribution
	Loss          Loss
	ECN           bool
	Duplicate     units.Percent
	DuplicateCorr units.Percent
	Corrupt       units.Percent
	CorruptCorr   units.Percent
	Reorder       units.Percent
	ReorderCorr   units.Percent
	Gap           uint32
	Rate          units.Rate
	// PacketOverhead is added to each packet's length (may be negative);
	// CellSize and CellOverhead model link-layer cells (ATM).
	PacketOverhead int32
	CellSize       uint32
	CellOverhead   int32
	Slot           *Slot
	Seed           uint64
	HasSeed        bool
}

// DefaultNetemLimit is netem's queue limit in packets when none is given.
const DefaultNetemLimit = 1000

// Kind returns "netem".
func (*Netem) Kind() string { return "netem" }

// TBF is a tc-tbf(8) stage.
type TBF struct {
	Rate  units.Rate
	Burst units.Size
	// Limit is the queue limit in bytes. When the stage was written with
	// "latency", Limit is computed as q_tbf.c does and Latency is kept so
	// the stage prints back as typed.
	Limit    units.Size
	Latency  time.Duration // as typed, 0 if limit was used
	PeakRate units.Rate
	MTU      units.Size // mtu/minburst: bucket size of the peakrate bucket, needed with peakrate
	MPU      units.Size // minimum packet unit
}

// Kind returns "tbf".
func (*TBF) Kind() string { return "tbf" }
