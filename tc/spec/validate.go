package spec

import (
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/wanlab/wanlab/units"
)

// Validate checks a Spec built in code against the rules Parse enforces:
// values in range and the combinations q_netem.c, q_tbf.c and the kernel
// accept. A parsed spec always validates. Errors are *ParseError without a
// position, their message naming the stage.
func (s *Spec) Validate() error {
	if s == nil {
		return nil
	}
	for i, st := range s.Stages {
		var err error
		if v, ok := st.(interface{ validate() error }); ok {
			// Every kind's Kind works on a nil pointer; validate need not.
			if p := reflect.ValueOf(st); p.Kind() == reflect.Pointer && p.IsNil() {
				err = &ParseError{Token: st.Kind(), Msg: st.Kind() + " stage is nil"}
			} else {
				err = v.validate()
			}
		} else {
			err = &ParseError{Msg: fmt.Sprintf("unknown stage type %T", st)}
		}
		if err != nil {
			pe := err.(*ParseError)
			return &ParseError{Token: pe.Token, Msg: fmt.Sprintf("stage %d: %s", i+1, pe.Msg), Err: pe.Err}
		}
	}
	return checkQueueLast(s)
}

// validate is Validate for one netem stage.
func (n *Netem) validate() error {
	if err := validateNetemValues(n); err != nil {
		return err
	}
	return checkNetem(n, token{text: "netem"}, netemPositions{})
}

// validate is Validate for one tbf stage.
func (t *TBF) validate() error {
	return checkTBF(t, token{text: "tbf"}, nil)
}

// checkNetem applies q_netem.c's checks after its argument loop. at holds
// the keywords' positions for the error (zero in Validate).
func checkNetem(n *Netem, kind token, at netemPositions) error {
	or := func(t token) token {
		if t.text == "" {
			return kind
		}
		return t
	}
	if n.Reorder > 0 && n.Latency == 0 {
		t := or(at.reorder)
		return &ParseError{Pos: t.pos, Token: t.text, Msg: "reorder needs a delay (netem reorders by sending some packets without it)"}
	}
	if n.Reorder == 0 && n.Gap > 0 {
		t := or(at.gap)
		return &ParseError{Pos: t.pos, Token: t.text, Msg: "gap needs a reorder probability (reorder PERCENT)"}
	}
	if n.ECN && n.Loss.Kind == LossNone {
		t := or(at.ecn)
		return &ParseError{Pos: t.pos, Token: t.text, Msg: "ecn needs a loss model (ECN marks packets the loss model would drop)"}
	}
	if (at.dist.text != "" || n.Dist != DistUniform) && (n.Latency == 0 || n.Jitter == 0) {
		t := or(at.dist)
		return &ParseError{Pos: t.pos, Token: t.text, Msg: "distribution needs a delay with jitter (delay TIME JITTER)"}
	}
	return nil
}

// validateNetemValues checks the ranges Parse guarantees by construction.
func validateNetemValues(n *Netem) error {
	bad := func(format string, a ...any) error {
		return &ParseError{Token: "netem", Msg: "netem: " + fmt.Sprintf(format, a...)}
	}
	for _, p := range []struct {
		name string
		v    units.Percent
	}{
		{"delay correlation", n.DelayCorr}, {"loss", n.Loss.P}, {"loss correlation", n.Loss.Corr},
		{"loss state p13", n.Loss.P13}, {"loss state p31", n.Loss.P31}, {"loss state p32", n.Loss.P32},
		{"loss state p23", n.Loss.P23}, {"loss state p14", n.Loss.P14},
		{"loss gemodel p", n.Loss.GP}, {"loss gemodel r", n.Loss.GR}, {"loss gemodel 1-h", n.Loss.GH},
		{"loss gemodel 1-k", n.Loss.GK},
		{"duplicate", n.Duplicate}, {"duplicate correlation", n.DuplicateCorr},
		{"corrupt", n.Corrupt}, {"corrupt correlation", n.CorruptCorr},
		{"reorder", n.Reorder}, {"reorder correlation", n.ReorderCorr},
	} {
		if !(p.v >= 0 && p.v <= 100) { // also catches NaN
			return bad("%s %v: must be 0-100%%", p.name, float64(p.v))
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"delay", n.Latency}, {"jitter", n.Jitter}} {
		if d.v < 0 {
			return bad("%s %s: must not be negative", d.name, d.v)
		}
	}
	if n.Dist < DistUniform || n.Dist > DistParetoNormal {
		return bad("unknown distribution %d", int(n.Dist))
	}
	if n.Loss.Kind < LossNone || n.Loss.Kind > LossGE {
		return bad("unknown loss model %d", int(n.Loss.Kind))
	}
	if s := n.Slot; s != nil {
		switch {
		case s.MinDelay < 0 || s.MaxDelay < s.MinDelay:
			return bad("slot %s %s: want 0 <= MIN <= MAX", s.MinDelay, s.MaxDelay)
		case s.Delay < 0 || s.Jitter < 0:
			return bad("slot distribution %s %s: must not be negative", s.Delay, s.Jitter)
		case s.Dist < DistUniform || s.Dist > DistParetoNormal:
			return bad("unknown slot distribution %d", int(s.Dist))
		case s.Jitter == 0 && (s.Delay != 0 || s.Dist != DistUniform):
			return bad("slot distribution %s %s %s: needs a jitter above 0", s.Dist, s.Delay, s.Jitter)
		case s.Jitter != 0 && (s.MinDelay != 0 || s.MaxDelay != 0):
			return bad("slot: give MIN [MAX] or distribution DELAY JITTER, not both")
		case s.Packets > math.MaxInt32:
			return bad("slot packets %d: must be below 2^31", s.Packets)
		case s.Bytes > math.MaxInt32:
			return bad("slot bytes %d: must be below 2gb", s.Bytes)
		}
	}
	return nil
}

// checkTBF applies q_tbf.c's checks after its argument loop, the kernel's
// peakrate check (tbf_change returns EINVAL when peakrate <= rate), and
// computes Limit from Latency. seen maps keywords to where they were
// typed (nil in Validate, which does not change the stage).
func checkTBF(b *TBF, kind token, seen map[string]token) error {
	at := func(kw string) token {
		if t, ok := seen[kw]; ok {
			return t
		}
		return kind
	}
	required := func(msg string) error { return &ParseError{Pos: kind.pos, Token: kind.text, Msg: "tbf: " + msg} }
	switch {
	case b.Rate == 0:
		return required("rate is required")
	case b.Rate < 8:
		return required(fmt.Sprintf("rate %s: must be at least 8bit (one byte per second)", b.Rate))
	case b.Burst == 0:
		return required(burstHint(b))
	case b.Limit == 0 && b.Latency == 0:
		return required("limit or latency is required")
	}
	if b.PeakRate > 0 {
		t := at("peakrate")
		if b.MTU == 0 {
			return &ParseError{Pos: t.pos, Token: t.text, Msg: "tbf: peakrate needs mtu (the size of the peakrate bucket, e.g. mtu 1514)"}
		}
		if b.PeakRate <= b.Rate {
			return &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("peakrate %s: must be higher than rate %s", b.PeakRate, b.Rate)}
		}
	}
	// tc_calc_xmittime: the time to send the bucket at rate, in the
	// kernel's 64 ns scheduler ticks (/proc/net/psched), must fit in 32
	// bits, or tc says "tbf: burst out of range": at most about 274 s.
	if math.Ceil(float64(b.Burst)/float64(b.Rate/8)*1e9/64) >= math.MaxUint32 {
		t := at("burst")
		return &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("burst %s: more than 274s of tokens at rate %s", b.Burst, b.Rate)}
	}
	if b.Latency != 0 {
		if b.Latency < 0 || b.Latency%time.Microsecond != 0 || b.Latency/time.Microsecond > math.MaxUint32 {
			t := at("latency")
			return &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("latency %s: must be whole microseconds below 4294s", b.Latency)}
		}
		lim := tbfLimitFromLatency(b)
		if lim > math.MaxUint32 {
			t := at("latency")
			return &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("latency %s: gives a limit above 4gb at rate %s", units.FormatDuration(b.Latency), b.Rate)}
		}
		if seen != nil {
			b.Limit = units.Size(uint32(lim))
		}
	}
	if b.LinkLayer != LinkEthernet && b.LinkLayer != LinkATM {
		return required(fmt.Sprintf("unknown link layer %d", int(b.LinkLayer)))
	}
	return nil
}

// QueueLimit returns the queue limit in bytes: Limit, or for a stage built
// in code with only Latency, the limit q_tbf.c computes from it.
func (b *TBF) QueueLimit() units.Size {
	if b.Limit != 0 || b.Latency <= 0 {
		return b.Limit
	}
	return units.Size(uint32(min(tbfLimitFromLatency(b), math.MaxUint32)))
}
