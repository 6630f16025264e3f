package spec

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/wanlab/wanlab/units"
)

// netemPositions remembers where the keywords that later checks complain
// about were typed, and whether a loss model was given.
type netemPositions struct {
	reorder, gap, ecn, dist token
	lossSet                 bool
}

// netemTable is q_netem.c's netem_parse_opt, one entry a keyword, read
// into n (and at). It is built for each parse, as tbf's is, because its
// entries write into that parse's stage.
func netemTable(n *Netem, at *netemPositions) keywords {
	// delay reads "delay TIME [JITTER [CORRELATION]]".
	delay := overwrite(func(kw token, c *cursor) error {
		if err := need(c, kw, "TIME", &n.Latency, netemTime, kw.text); err != nil {
			return err
		}
		if ok, err := optional(c, false, &n.Jitter, netemTime, kw.text+" jitter"); !ok || err != nil {
			return err
		}
		_, err := optional(c, false, &n.DelayCorr, percentArg, kw.text+" correlation")
		return err
	})
	// loss reads a loss model; there may be one.
	loss := overwrite(func(kw token, c *cursor) error {
		if at.lossSet {
			return &ParseError{Pos: kw.pos, Token: kw.text, Msg: "duplicate loss argument (give one loss model)"}
		}
		if err := parseLoss(kw, c, &n.Loss); err != nil {
			return err
		}
		// q_netem.c only counts a loss as given when it drops something:
		// "loss 0%" may be followed by another loss.
		at.lossSet = n.Loss.Kind != LossRandom || n.Loss.P > 0
		return nil
	})
	return keywords{
		"limit": overwrite(func(kw token, c *cursor) error {
			t, err := c.need(kw, "PACKETS")
			if err != nil {
				return err
			}
			// q_netem.c reads the limit with get_size, so "1k" is 1024 packets.
			v, err := sizeArg("limit", t)
			if err != nil {
				return err
			}
			if v == 0 {
				return &ParseError{Pos: t.pos, Token: t.text, Msg: "limit 0: must be at least 1 packet (netem with limit 0 drops every packet)"}
			}
			n.Limit = uint32(v)
			return nil
		}),
		"delay": delay, "latency": delay,
		"loss": loss, "drop": loss,
		"seed": overwrite(func(kw token, c *cursor) error {
			t, err := c.need(kw, "VALUE")
			if err != nil {
				return err
			}
			v, perr := strconv.ParseUint(t.text, 10, 64)
			if perr != nil {
				return &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("seed: %q is not a number 0-%d", t.text, uint64(math.MaxUint64))}
			}
			n.Seed, n.HasSeed = v, true
			return nil
		}),
		"ecn": overwrite(func(kw token, _ *cursor) error {
			n.ECN, at.ecn = true, kw
			return nil
		}),
		"reorder": overwrite(func(kw token, c *cursor) error {
			at.reorder = kw
			return percentCorr(kw, c, "reorder", &n.Reorder, &n.ReorderCorr)
		}),
		"corrupt": overwrite(func(kw token, c *cursor) error {
			return percentCorr(kw, c, "corrupt", &n.Corrupt, &n.CorruptCorr)
		}),
		"duplicate": overwrite(func(kw token, c *cursor) error {
			return percentCorr(kw, c, "duplicate", &n.Duplicate, &n.DuplicateCorr)
		}),
		"gap": overwrite(func(kw token, c *cursor) error {
			at.gap = kw
			return need(c, kw, "DISTANCE", &n.Gap, uint32Arg, "gap")
		}),
		"distribution": overwrite(func(kw token, c *cursor) error {
			at.dist = kw
			return need(c, kw, "uniform, normal, pareto or paretonormal", &n.Dist, distArg, "distribution")
		}),
		"rate": overwrite(func(kw token, c *cursor) error {
			if err := need(c, kw, "RATE", &n.Rate, rateArg, "rate"); err != nil {
				return err
			}
			if _, err := optional(c, true, &n.PacketOverhead, int32Arg, "rate packet overhead"); err != nil {
				return err
			}
			if _, err := optional(c, false, &n.CellSize, uint32Arg, "rate cell size"); err != nil {
				return err
			}
			_, err := optional(c, true, &n.CellOverhead, int32Arg, "rate cell overhead")
			return err
		}),
		"slot": overwrite(func(kw token, c *cursor) error {
			slot, err := parseSlot(kw, c)
			n.Slot = slot
			return err
		}),
	}
}

// netemKeywords are what netem takes, for the hint an unknown word of
// another kind gets when it is netem's.
var netemKeywords = netemTable(nil, nil).names()

// percentCorr reads "PERCENT [CORRELATION]" after kw, naming them name
// and "name correlation" in errors.
func percentCorr(kw token, c *cursor, name string, p, corr *units.Percent) error {
	if err := need(c, kw, "PERCENT", p, percentArg, name); err != nil {
		return err
	}
	_, err := optional(c, false, corr, percentArg, name+" correlation")
	return err
}

// parseNetem parses netem's arguments as q_netem.c's netem_parse_opt does:
// keywords in any order, a repeated keyword overwrites what it sets (except
// loss, which may appear once), optional numeric arguments taken only when
// the next word starts with a digit.
func parseNetem(kind token, toks []token) (*Netem, error) {
	n := &Netem{}
	var at netemPositions
	_, err := netemTable(n, &at).read("netem", &cursor{toks: toks}, func(kw token) string {
		if b := kw.text[0]; b >= '0' && b <= '9' || b == '-' || b == '.' {
			return fmt.Sprintf("unexpected value %q where a keyword belongs", kw.text)
		}
		msg := fmt.Sprintf("unknown keyword %q", kw.text)
		if tbfKeywords[kw.text] {
			msg += ` (a tbf keyword: start a tbf stage with "| tbf")`
		}
		return msg
	})
	if err != nil {
		return nil, err
	}
	normalizeNetem(n)
	if err := checkNetem(n, kind, at); err != nil {
		return nil, err
	}
	// q_netem.c: a reorder probability without gap means gap 1.
	if n.Reorder > 0 && n.Gap == 0 {
		n.Gap = 1
	}
	return n, nil
}

// normalizeNetem drops what neither the kernel nor tc's printout can see,
// so that every accepted spec has one canonical form: correlations of
// disabled impairments, a delay correlation without jitter (tabledist
// returns the mean without drawing), overheads of a zero rate.
func normalizeNetem(n *Netem) {
	if n.Limit == DefaultNetemLimit {
		n.Limit = 0
	}
	if n.Jitter == 0 {
		n.DelayCorr = 0
	}
	if n.Loss.Kind == LossRandom && n.Loss.P == 0 {
		n.Loss = Loss{}
	}
	if n.Duplicate == 0 {
		n.DuplicateCorr = 0
	}
	if n.Corrupt == 0 {
		n.CorruptCorr = 0
	}
	if n.Reorder == 0 {
		n.ReorderCorr = 0
	}
	if n.Rate == 0 {
		n.PacketOverhead, n.CellSize, n.CellOverhead = 0, 0, 0
	}
}

// parseLoss parses what follows "loss": "[random] P [CORR]",
// "state P13 [P31 [P32 [P23 [P14]]]]" or "gemodel P [R [1-H [1-K]]]",
// filling in q_netem.c's defaults for omitted parameters.
func parseLoss(kw token, c *cursor, l *Loss) error {
	t, err := c.need(kw, "random, state or gemodel")
	if err != nil {
		return err
	}
	model := t.text
	if b := model[0]; b >= '0' && b <= '9' {
		model = "random" // the old "loss P" form
		c.i--
	}
	switch model {
	case "random":
		*l = Loss{Kind: LossRandom}
		return percentCorr(token{text: "loss random", pos: t.pos}, c, "loss", &l.P, &l.Corr)
	case "state":
		*l = Loss{Kind: LossState}
		return lossParams(c, t, "state", func() { l.P31, l.P32, l.P23, l.P14 = 100-l.P13, 0, 100, 0 },
			lossParam{"p13", &l.P13}, lossParam{"p31", &l.P31}, lossParam{"p32", &l.P32}, lossParam{"p23", &l.P23}, lossParam{"p14", &l.P14})
	case "gemodel":
		*l = Loss{Kind: LossGE}
		return lossParams(c, t, "gemodel", func() { l.GR, l.GH, l.GK = 100-l.GP, 100, 0 },
			lossParam{"p", &l.GP}, lossParam{"r", &l.GR}, lossParam{"1-h", &l.GH}, lossParam{"1-k", &l.GK})
	default:
		return &ParseError{Pos: t.pos, Token: t.text,
			Msg: fmt.Sprintf("loss %q: unknown loss model (use [random] PERCENT, state or gemodel)", t.text)}
	}
}

// lossParam is one percentage of a loss model: its name in errors and
// where it goes.
type lossParam struct {
	name string
	dst  *units.Percent
}

// lossParams reads "loss MODEL" (t the model's token): the first of ps,
// which is required, then q_netem.c's defaults for the rest (defaults,
// which may depend on the first), then as many of the rest as follow.
func lossParams(c *cursor, t token, model string, defaults func(), ps ...lossParam) error {
	v, err := c.need(token{text: "loss " + model, pos: t.pos}, strings.ToUpper(ps[0].name))
	if err != nil {
		return err
	}
	if *ps[0].dst, err = percentArg("loss "+model+" "+ps[0].name, v); err != nil {
		return err
	}
	defaults()
	for _, p := range ps[1:] {
		if !c.nextIsNumber(false) {
			break
		}
		if *p.dst, err = percentArg("loss "+model+" "+p.name, c.next()); err != nil {
			return err
		}
	}
	return nil
}

// parseSlot parses what follows "slot", as q_netem.c does.
func parseSlot(kw token, c *cursor) (*Slot, error) {
	s := &Slot{}
	if c.nextIsNumber(false) {
		var err error
		if s.MinDelay, err = netemTime("slot min delay", c.next()); err != nil {
			return nil, err
		}
		s.MaxDelay = s.MinDelay
		if c.nextIsNumber(false) {
			t := c.next()
			if s.MaxDelay, err = netemTime("slot max delay", t); err != nil {
				return nil, err
			}
			if s.MaxDelay < s.MinDelay {
				return nil, &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("slot max delay %s: must not be less than the min delay %s",
					t.text, units.FormatDuration(s.MinDelay))}
			}
		}
	} else {
		t, err := c.need(kw, "MIN_DELAY or distribution")
		if err != nil {
			return nil, err
		}
		if t.text != "distribution" {
			return nil, &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("slot %q: want MIN_DELAY [MAX_DELAY] or distribution TYPE DELAY JITTER", t.text)}
		}
		if t, err = c.need(t, "uniform, normal, pareto or paretonormal"); err != nil {
			return nil, err
		}
		if s.Dist, err = distArg("slot distribution", t); err != nil {
			return nil, err
		}
		if t, err = c.need(token{text: "slot distribution " + t.text, pos: t.pos}, "DELAY JITTER"); err != nil {
			return nil, err
		}
		if s.Delay, err = netemTime("slot delay", t); err != nil {
			return nil, err
		}
		if t, err = c.need(token{text: "slot distribution", pos: t.pos}, "JITTER"); err != nil {
			return nil, err
		}
		if s.Jitter, err = netemTime("slot jitter", t); err != nil {
			return nil, err
		}
		if s.Jitter <= 0 {
			return nil, &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("slot jitter %s: must be more than 0", t.text)}
		}
	}
	if c.peekIs("packets") {
		err := need(c, c.next(), "PACKETS", &s.Packets, func(name string, t token) (uint32, error) {
			v, err := int32Arg(name, t)
			if err == nil && v < 0 {
				err = &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("%s %s: must not be negative", name, t.text)}
			}
			return uint32(v), err
		}, "slot packets")
		if err != nil {
			return nil, err
		}
	}
	if c.peekIs("bytes") {
		err := need(c, c.next(), "BYTES", &s.Bytes, func(name string, t token) (units.Size, error) {
			v, err := sizeArg(name, t)
			// The kernel keeps max_bytes in an s32.
			if err == nil && v > math.MaxInt32 {
				err = &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("%s %s: must be below 2gb", name, t.text)}
			}
			return v, err
		}, "slot bytes")
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}
