package engine

import (
	"math"

	"github.com/wanlab/wanlab/tc/spec"
)

// lossModel mirrors sch_netem.c's loss_event(): random loss with
// correlation (get_crandom), the 4-state Markov model of the GI loss model
// (loss_4state) and Gilbert-Elliott (loss_gilb_ell).
type lossModel struct {
	kind spec.LossKind
	// random
	p    uint32
	corr correlated
	// clgstate: a1..a5 and the current state, named as in the kernel.
	a1, a2, a3, a4, a5 uint32
	state              int
}

// States of the 4-state model, numbered as in the kernel's comment and the
// GI model paper: 1 = transmitted within a gap, 2 = transmitted within a
// burst, 3 = lost within a burst, 4 = isolated loss within a gap.
const (
	txInGap     = 1
	txInBurst   = 2
	lostInBurst = 3
	lostInGap   = 4
)

// Gilbert-Elliott states.
const (
	geGood = 1
	geBad  = 2
)

func newLossModel(l spec.Loss, r *prng) lossModel {
	m := lossModel{kind: l.Kind}
	switch l.Kind {
	case spec.LossRandom:
		m.p = probU32(l.P)
		m.corr = newCorrelated(l.Corr, r)
	case spec.LossState:
		// get_loss_clg: a1 = p13, a2 = p31, a3 = p32, a4 = p14, a5 = p23.
		m.a1, m.a2, m.a3 = probU32(l.P13), probU32(l.P31), probU32(l.P32)
		m.a4, m.a5 = probU32(l.P14), probU32(l.P23)
		m.state = txInGap
	case spec.LossGE:
		// iproute2 sends p, r, h = 1 - (typed 1-h) and k1 = typed 1-k;
		// the kernel keeps a1 = p, a2 = r, a3 = h, a4 = k1.
		m.a1, m.a2 = probU32(l.GP), probU32(l.GR)
		m.a3 = math.MaxUint32 - probU32(l.GH)
		m.a4 = probU32(l.GK)
		m.state = geGood
	}
	return m
}

// event reports whether the next packet is lost.
func (m *lossModel) event(r *prng) bool {
	switch m.kind {
	case spec.LossRandom:
		// "Random packet drop 0 => none, ~0 => all"
		return m.p != 0 && m.p >= m.corr.next(r)
	case spec.LossState:
		return m.fourState(r.u32())
	case spec.LossGE:
		return m.gilbertElliott(r)
	}
	return false
}

// fourState is loss_4state(): one uniform draw decides the next state; the
// packet is lost when that state is a loss state. Sums are taken in 64 bits
// where the kernel's u32 additions could wrap (p13+p14 > 100%, which tc
// never sends).
func (m *lossModel) fourState(rnd uint32) bool {
	r := uint64(rnd)
	a1, a2, a3, a4, a5 := uint64(m.a1), uint64(m.a2), uint64(m.a3), uint64(m.a4), uint64(m.a5)
	switch m.state {
	case txInGap:
		switch {
		case r < a4:
			m.state = lostInGap
			return true
		case a4 < r && r < a1+a4:
			m.state = lostInBurst
			return true
		case a1+a4 < r:
			m.state = txInGap
		}
	case txInBurst:
		if r < a5 {
			m.state = lostInBurst
			return true
		}
		m.state = txInBurst
	case lostInBurst:
		switch {
		case r < a3:
			m.state = txInBurst
		case a3 < r && r < a2+a3:
			m.state = txInGap
		case a2+a3 < r:
			m.state = lostInBurst
			return true
		}
	case lostInGap:
		m.state = txInGap
	}
	return false
}

// gilbertElliott is loss_gilb_ell(): a first draw moves between the good
// and bad state, a second decides loss with the probability of the state
// the packet started in (good: rand < k1 = 1-k; bad: rand > h).
func (m *lossModel) gilbertElliott(r *prng) bool {
	switch m.state {
	case geGood:
		if r.u32() < m.a1 {
			m.state = geBad
		}
		if r.u32() < m.a4 {
			return true
		}
	case geBad:
		if r.u32() < m.a2 {
			m.state = geGood
		}
		if r.u32() > m.a3 {
			return true
		}
	}
	return false
}
