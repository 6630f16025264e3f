package spec

import (
	"time"

	"github.com/wanlab/wanlab/units"
)

// Spec is a pipeline of stages, root first:
// "delay 100ms | tbf rate 50mbit burst 50kb limit 500kb" is a netem root
// qdisc with a tbf child. An empty Spec means "no impairment".
type Spec struct{ Stages []Stage }

// Stage is one qdisc of a pipeline: *Netem, *TBF, or a queue discipline
// (*PFIFO, *BFIFO, *CoDel, *FQCoDel, *PIE, *RED; see IsQueueKind).
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
	// LossState: transition probabilities of the 4-state Markov model
	// (1 good, 2 good within a burst, 3 burst loss, 4 isolated loss).
	// Omitted ones get q_netem.c's defaults, filled in here: p31 =
	// 100%-p13, p32 = 0%, p23 = 100%, p14 = 0%.
	P13, P31, P32, P23, P14 units.Percent
	// LossGE: Gilbert-Elliott parameters AS TYPED: p (good→bad), r
	// (bad→good), 1-h (loss probability in the bad state) and 1-k (loss
	// probability in the good state). Omitted ones get iproute2's defaults,
	// filled in here: r = 100%-p, 1-h = 100%, 1-k = 0%.
	//
	// What the kernel stores (struct tc_netem_gemodel, read by
	// loss_gilb_ell() in net/sched/sch_netem.c): p and r as typed, h =
	// 100%-(1-h) because q_netem.c complements the typed "1-h" (the kernel
	// drops in the bad state when rand > h), and k1 = 1-k as typed, NOT
	// complemented (the kernel drops in the good state when rand < k1).
	// GH and GK here are the typed loss probabilities, so a model drops with
	// GH in the bad state and GK in the good state.
	GP, GR, GH, GK units.Percent
}

// Slot describes netem's slotting: packets leave only in slots, whose
// start times are spaced by a random delay. Two forms, as q_netem.c:
//
//	slot MIN [MAX] [packets N] [bytes B]: spacing uniform in [MIN, MAX]
//	slot distribution D DELAY JITTER [packets N] [bytes B]: spacing drawn
//	    from distribution D around DELAY (the form is recognised by Jitter > 0)
type Slot struct {
	MinDelay, MaxDelay time.Duration // first form; MaxDelay = MinDelay when omitted
	Dist               Distribution  // second form
	Delay, Jitter      time.Duration // second form; Jitter > 0 selects it
	Packets            uint32        // packets per slot, 0 = unlimited
	Bytes              units.Size    // bytes per slot, 0 = unlimited
}

// IsDistribution reports whether the slot uses the "slot distribution" form.
func (s *Slot) IsDistribution() bool { return s.Jitter > 0 }

// Netem is a tc-netem(8) stage. Zero values mean "not set", which is tc's
// default in every case. Parse fills in the defaults iproute2 fills in
// (loss model parameters, Gap = 1 with reorder), so the engine reads the
// effective values.
type Netem struct {
	Limit   uint32 // queue limit in packets; 0 means tc's default, 1000 (see QueueLimit)
	Latency time.Duration
	// Jitter spreads the delay over Latency±Jitter. The kernel caps it at
	// 2^31-1 ns (about 2.1 s) in netem_change, because tabledist works in
	// 32 bits; Parse keeps the typed value.
	Jitter    time.Duration
	DelayCorr units.Percent // only meaningful with Jitter (the kernel ignores it otherwise)
	Dist      Distribution  // needs Latency and Jitter
	Loss      Loss
	ECN       bool // mark ECN-capable packets instead of dropping them; needs a loss model
	// Duplicate and its correlation. Note an iproute2 quirk: q_netem.c only
	// sends correlations to the kernel when one of delay, loss, reorder or
	// corrupt has one, so "duplicate 1% 50%" alone reaches the kernel
	// uncorrelated. wanlab keeps and applies the typed correlation.
	Duplicate     units.Percent
	DuplicateCorr units.Percent
	Corrupt       units.Percent
	CorruptCorr   units.Percent
	Reorder       units.Percent // needs Latency
	ReorderCorr   units.Percent
	Gap           uint32 // with Reorder: every Gap-th packet is a reorder candidate; 0 and 1 mean every packet
	Rate          units.Rate
	// PacketOverhead is added to each packet's length (may be negative);
	// CellSize and CellOverhead model link-layer cells (ATM): the length is
	// rounded up to whole cells, each carrying CellOverhead more bytes.
	PacketOverhead int32
	CellSize       uint32
	CellOverhead   int32
	Slot           *Slot
	Seed           uint64
	HasSeed        bool
}

// DefaultNetemLimit is netem's queue limit in packets when none is given.
const DefaultNetemLimit = 1000

// QueueLimit returns the effective queue limit in packets.
func (n *Netem) QueueLimit() uint32 {
	if n.Limit == 0 {
		return DefaultNetemLimit
	}
	return n.Limit
}

// Kind returns "netem".
func (*Netem) Kind() string { return "netem" }

// LinkLayer is tbf's link layer for rate accounting.
type LinkLayer int

// Link layers (tc's "linklayer ethernet|atm|adsl"; adsl is atm).
const (
	LinkEthernet LinkLayer = iota // packets cost their length
	LinkATM                       // packets cost whole 53-byte cells carrying 48 bytes each
)

// TBF is a tc-tbf(8) stage. Rates are whole bytes per second, as tc sends
// them to the kernel.
type TBF struct {
	Rate  units.Rate
	Burst units.Size // bucket size ("burst", "buffer", "maxburst")
	// Limit is the queue limit in bytes. When the stage was written with
	// "latency", Limit is computed as q_tbf.c does and Latency is kept so
	// the stage prints back as typed.
	Limit    units.Size
	Latency  time.Duration // as typed (whole microseconds, as tc's get_time), 0 if limit was used
	PeakRate units.Rate
	MTU      units.Size // mtu/minburst: bucket size of the peakrate bucket, needed with peakrate
	MPU      units.Size // minimum packet unit: no packet costs fewer tokens
	// Overhead is added to each packet's length for token accounting, and
	// LinkLayer selects ATM cell accounting (q_tbf.c's "overhead" and
	// "linklayer"). The kernel's psched_l2t_ns costs a packet of len bytes
	// as the time to send c bytes at Rate (and PeakRate), where
	//
	//	c = max(len+Overhead, MPU), then for ATM: c = ceil(c/48)*53
	//
	// and the bucket holds the time to send Burst costed the same way
	// (TestParserAgreesWithTC checks this against the kernel).
	Overhead  uint16
	LinkLayer LinkLayer
	// BurstCell and MTUCell keep the "/CELL" suffix of burst and mtu (a
	// power of two). Modern kernels compute transmit times exactly and no
	// longer read the rate tables the cell size shapes; the field only
	// lets the stage print back as typed.
	BurstCell, MTUCell units.Size
}

// Kind returns "tbf".
func (*TBF) Kind() string { return "tbf" }
