package spec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/wanlab/wanlab/units"
)

// token is one word of a spec and its 1-based position in the whole spec.
type token struct {
	text string
	pos  int
}

// tokenize splits a spec into words at white space and around "|", so
// "delay 1ms|tbf ..." and "delay 1ms | tbf ..." give the same tokens.
func tokenize(s string) []token {
	var toks []token
	for _, f := range strings.FieldsFunc(s, unicode.IsSpace) {
		for f != "" {
			i := strings.IndexByte(f, '|')
			switch {
			case i < 0:
				toks = append(toks, token{text: f})
				f = ""
			case i == 0:
				toks = append(toks, token{text: "|"})
				f = f[1:]
			default:
				toks = append(toks, token{text: f[:i]})
				f = f[i:]
			}
		}
	}
	for i := range toks {
		toks[i].pos = i + 1
	}
	return toks
}

// Empty returns the spec that impairs nothing; its canonical form is "".
func Empty() *Spec { return &Spec{} }

// IsEmpty reports whether the spec has no stages (no impairment).
func (s *Spec) IsEmpty() bool { return s == nil || len(s.Stages) == 0 }

// Parse reads a spec: stages joined by "|", each in the argument grammar
// of tc-netem(8) or tc-tbf(8) as iproute2's q_netem.c and q_tbf.c parse
// it, starting with its kind ("netem" may be left out for the first
// stage). An empty or blank string is the empty spec. A stage may also be
// written as the whole tc command, "[sudo] tc qdisc add dev DEV root handle
// 1:0 netem delay 100ms", which is read as its qdisc part.
//
// The reference is current iproute2. Since 6.9 q_netem.c takes netem
// times as 64-bit nanoseconds, so a bare number is nanoseconds; before,
// as in 6.1 shipped by Debian 12, it read whole microseconds and had no
// "ns" unit ("seed" came in 6.6, tbf's "burst out of range" check in
// 6.15). Deliberate differences, all in what is rejected:
// keywords must be written in full (tc also takes any prefix, "dela" for
// "delay"; wanlab reports those as unknown so a typo is never silently
// accepted), rates in percent of the interface speed are refused (there is
// no interface), and values tc would silently wrap or that make the kernel
// drop every packet (netem "limit 0", a negative seed, slot packets/bytes
// beyond int32) are errors. "distribution uniform" is accepted as netem's
// built-in distribution (tc itself looks for a uniform.dist file that
// iproute2 does not ship), and "peakrate" must exceed "rate", which the
// kernel enforces with EINVAL. Numbers are read by package units, which
// takes no hexadecimal times, rates or sizes (strtod does) and no tbf
// burst above 4 GiB. TestParserAgreesWithTC compares Parse with the
// installed tc on a few hundred stages.
func Parse(s string) (*Spec, error) {
	toks := tokenize(s)
	if len(toks) == 0 {
		return Empty(), nil
	}
	spec := &Spec{}
	start := 0
	for i := 0; i <= len(toks); i++ {
		if i < len(toks) && toks[i].text != "|" {
			continue
		}
		stage, err := parseStage(toks[start:i], len(spec.Stages), sepAt(toks, i))
		if err != nil {
			return nil, err
		}
		spec.Stages = append(spec.Stages, stage)
		start = i + 1
	}
	return spec, nil
}

// sepAt returns the separator token ending a stage, for errors about an
// empty stage.
func sepAt(toks []token, i int) token {
	if i < len(toks) {
		return toks[i]
	}
	return toks[len(toks)-1]
}

func parseStage(toks []token, index int, sep token) (Stage, error) {
	if len(toks) == 0 {
		return nil, &ParseError{Pos: sep.pos, Token: sep.text, Msg: fmt.Sprintf("empty stage %d before or after \"|\"", index+1)}
	}
	if toks[0].text == "tc" || toks[0].text == "sudo" {
		var err error
		if toks, err = stripTCCommand(toks, index); err != nil {
			return nil, err
		}
	}
	kw := toks[0]
	switch kw.text {
	case "netem":
		return parseNetem(kw, toks[1:])
	case "tbf":
		return parseTBF(kw, toks[1:])
	}
	if index == 0 {
		// "netem" may be left out for the first stage.
		return parseNetem(token{text: "netem", pos: kw.pos}, toks)
	}
	return nil, &ParseError{Pos: kw.pos, Token: kw.text,
		Msg: fmt.Sprintf("stage %d must start with netem or tbf, not %q", index+1, kw.text)}
}

// stripTCCommand drops the "[sudo] tc qdisc add|replace|change dev DEV
// [root | parent ID] [handle ID]" in front of a stage, so lines pasted from
// a shell history or from the seeds' notes parse as they are. It returns
// the tokens from the qdisc kind on.
func stripTCCommand(toks []token, index int) ([]token, error) {
	c := &cursor{toks: toks}
	expect := func(what string, ok func(string) bool) (token, error) {
		if !c.more() {
			last := toks[len(toks)-1]
			return token{}, &ParseError{Pos: last.pos, Token: last.text, Msg: fmt.Sprintf("tc command: missing %s", what)}
		}
		t := c.next()
		if !ok(t.text) {
			return token{}, &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("tc command: want %s, not %q", what, t.text)}
		}
		return t, nil
	}
	is := func(words ...string) func(string) bool {
		return func(s string) bool {
			for _, w := range words {
				if s == w {
					return true
				}
			}
			return false
		}
	}
	anyWord := func(string) bool { return true }
	if c.peekIs("sudo") {
		c.next()
	}
	steps := []struct {
		what string
		ok   func(string) bool
	}{{`"tc"`, is("tc")}, {`"qdisc"`, is("qdisc")}, {"add, replace or change", is("add", "replace", "change")},
		{`"dev"`, is("dev")}, {"a device name", anyWord}}
	for _, s := range steps {
		if _, err := expect(s.what, s.ok); err != nil {
			return nil, err
		}
	}
	for c.more() {
		t := c.toks[c.i]
		switch t.text {
		case "root":
			c.next()
		case "parent", "handle":
			c.next()
			if _, err := expect(t.text+" ID", anyWord); err != nil {
				return nil, err
			}
		case "netem", "tbf":
			return c.toks[c.i:], nil
		default:
			return nil, &ParseError{Pos: t.pos, Token: t.text,
				Msg: fmt.Sprintf("stage %d: qdisc %q is not an impairment stage (use netem or tbf)", index+1, t.text)}
		}
	}
	last := toks[len(toks)-1]
	return nil, &ParseError{Pos: last.pos, Token: last.text, Msg: "tc command: missing the qdisc kind (netem or tbf)"}
}

// ParseDirectional parses the proxy's "[IFACE=]SPEC" form. IFACE is what
// precedes the first "=" when that part has no white space (an interface
// name, or "to-client"/"to-server" in the lab); it is "" otherwise. Error
// positions count the tokens of SPEC, after the "=".
func ParseDirectional(s string) (iface string, spec *Spec, err error) {
	if i := strings.IndexByte(s, '='); i >= 0 && !strings.ContainsFunc(s[:i], unicode.IsSpace) {
		iface, s = s[:i], s[i+1:]
		if iface == "" || strings.Contains(iface, "|") {
			return "", nil, &ParseError{Pos: 1, Token: iface + "=", Msg: fmt.Sprintf("bad interface name %q before \"=\"", iface)}
		}
	}
	spec, err = Parse(s)
	if err != nil {
		return "", nil, err
	}
	return iface, spec, nil
}

// cursor walks the tokens of one stage.
type cursor struct {
	toks []token
	i    int
}

func (c *cursor) more() bool { return c.i < len(c.toks) }

func (c *cursor) next() token {
	t := c.toks[c.i]
	c.i++
	return t
}

// need returns the mandatory argument of keyword kw, or an error naming
// what is missing.
func (c *cursor) need(kw token, what string) (token, error) {
	if !c.more() {
		return token{}, &ParseError{Pos: kw.pos, Token: kw.text, Msg: fmt.Sprintf("%s: missing %s", kw.text, what)}
	}
	return c.next(), nil
}

// nextIsNumber mirrors q_netem.c's NEXT_IS_NUMBER: an optional numeric
// argument is taken only when the next word starts with a digit (or a
// minus sign, for signed ones).
func (c *cursor) nextIsNumber(signed bool) bool {
	if !c.more() {
		return false
	}
	b := c.toks[c.i].text[0]
	return b >= '0' && b <= '9' || signed && b == '-'
}

func (c *cursor) peekIs(word string) bool { return c.more() && c.toks[c.i].text == word }

func valueError(kw string, t token, err error) *ParseError {
	return &ParseError{Pos: t.pos, Token: t.text, Msg: kw + ": " + err.Error(), Err: err}
}

func percentArg(kw string, t token) (units.Percent, error) {
	p, err := units.ParsePercent(t.text)
	if err != nil {
		// units says `120%: must be 0-100%`; with the keyword in front
		// the line reads `loss 120%: must be 0-100%`.
		return 0, &ParseError{Pos: t.pos, Token: t.text, Msg: kw + " " + err.Error(), Err: err}
	}
	return p + 0, nil // +0 turns -0 into 0
}

// netemTime parses a netem time as get_time64 does: bare numbers are
// nanoseconds.
func netemTime(kw string, t token) (time.Duration, error) {
	d, err := units.ParseTime(t.text, time.Nanosecond)
	if err != nil {
		return 0, valueError(kw, t, err)
	}
	if d < 0 { // units.ParseTime wraps at exactly 2^63 ns
		return 0, &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("%s %s: too large (at most 292 years)", kw, t.text)}
	}
	return d, nil
}

// wholeBytes truncates a rate to whole bytes per second, as get_rate64
// does before tc hands it to the kernel.
func wholeBytes(r units.Rate) units.Rate { return r / 8 * 8 }

func rateArg(kw string, t token) (units.Rate, error) {
	if strings.Contains(t.text, "%") {
		return 0, &ParseError{Pos: t.pos, Token: t.text,
			Msg: fmt.Sprintf("%s %s: a rate in percent needs the interface speed; give an absolute rate such as 100mbit", kw, t.text)}
	}
	r, err := units.ParseRate(t.text)
	if err != nil {
		return 0, valueError(kw, t, err)
	}
	return wholeBytes(r), nil
}

func sizeArg(kw string, t token) (units.Size, error) {
	sz, err := units.ParseSize(t.text)
	if err != nil {
		return 0, valueError(kw, t, err)
	}
	return sz, nil
}

// parseCInt parses an integer as C's strtol/strtoul with base 0 do
// (get_u32, get_s32 in iproute2): "0x" hex, a leading 0 octal, otherwise
// decimal, with an optional sign.
func parseCInt(s string, bits int, signed bool) (int64, bool) {
	neg := false
	switch {
	case strings.HasPrefix(s, "-"):
		neg, s = true, s[1:]
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	}
	base := 10
	switch {
	case len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X"):
		base, s = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base, s = 8, s[1:]
	}
	if s == "" || strings.ContainsAny(s, "_+-") {
		return 0, false
	}
	u, err := strconv.ParseUint(s, base, 64)
	if err != nil {
		return 0, false
	}
	if signed {
		lim := uint64(1) << (bits - 1)
		if !neg && u >= lim || neg && u > lim {
			return 0, false
		}
		if neg {
			return -int64(u), true
		}
		return int64(u), true
	}
	if neg && u != 0 || u >= uint64(1)<<bits {
		return 0, false
	}
	return int64(u), true
}

func uint32Arg(kw string, t token) (uint32, error) {
	v, ok := parseCInt(t.text, 32, false)
	if !ok {
		return 0, &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("%s: %q is not a number 0-%d", kw, t.text, uint32(math.MaxUint32))}
	}
	return uint32(v), nil
}

func int32Arg(kw string, t token) (int32, error) {
	v, ok := parseCInt(t.text, 32, true)
	if !ok {
		return 0, &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("%s: %q is not a number %d-%d", kw, t.text, math.MinInt32, math.MaxInt32)}
	}
	return int32(v), nil
}

func distArg(kw string, t token) (Distribution, error) {
	for d, name := range distNames {
		if t.text == name {
			return Distribution(d), nil
		}
	}
	return 0, &ParseError{Pos: t.pos, Token: t.text,
		Msg: fmt.Sprintf("%s %q: unknown distribution (use uniform, normal, pareto or paretonormal)", kw, t.text)}
}

// netemKeywords and tbfKeywords list each kind's keywords; an unknown
// keyword of one that belongs to the other points the user at the missing
// "|".
var (
	netemKeywords = map[string]bool{"limit": true, "delay": true, "latency": true, "distribution": true,
		"loss": true, "drop": true, "ecn": true, "duplicate": true, "corrupt": true, "reorder": true,
		"gap": true, "rate": true, "slot": true, "seed": true}
	tbfKeywords = map[string]bool{"rate": true, "burst": true, "buffer": true, "maxburst": true,
		"limit": true, "latency": true, "peakrate": true, "mtu": true, "minburst": true, "mpu": true,
		"overhead": true, "linklayer": true}
)

// tbfArgNames names what each tbf keyword takes, for "missing" errors.
var tbfArgNames = map[string]string{"rate": "RATE", "burst": "BYTES", "limit": "BYTES", "latency": "TIME",
	"peakrate": "RATE", "mtu": "BYTES", "mpu": "BYTES", "overhead": "BYTES", "linklayer": "ethernet, atm or adsl"}

// netemPositions remembers where the keywords that later checks complain
// about were typed.
type netemPositions struct {
	reorder, gap, ecn, dist token
}

// parseNetem parses netem's arguments as q_netem.c's netem_parse_opt does:
// keywords in any order, a repeated keyword overwrites what it sets (except
// loss, which may appear once), optional numeric arguments taken only when
// the next word starts with a digit.
func parseNetem(kind token, toks []token) (*Netem, error) {
	n := &Netem{}
	c := &cursor{toks: toks}
	var at netemPositions
	lossSet := false
	for c.more() {
		kw := c.next()
		switch kw.text {
		case "limit":
			t, err := c.need(kw, "PACKETS")
			if err != nil {
				return nil, err
			}
			// q_netem.c reads the limit with get_size, so "1k" is 1024 packets.
			v, err := sizeArg("limit", t)
			if err != nil {
				return nil, err
			}
			if v == 0 {
				return nil, &ParseError{Pos: t.pos, Token: t.text, Msg: "limit 0: must be at least 1 packet (netem with limit 0 drops every packet)"}
			}
			n.Limit = uint32(v)

		case "delay", "latency":
			t, err := c.need(kw, "TIME")
			if err != nil {
				return nil, err
			}
			if n.Latency, err = netemTime(kw.text, t); err != nil {
				return nil, err
			}
			if c.nextIsNumber(false) {
				if n.Jitter, err = netemTime(kw.text+" jitter", c.next()); err != nil {
					return nil, err
				}
				if c.nextIsNumber(false) {
					if n.DelayCorr, err = percentArg(kw.text+" correlation", c.next()); err != nil {
						return nil, err
					}
				}
			}

		case "loss", "drop":
			if lossSet {
				return nil, &ParseError{Pos: kw.pos, Token: kw.text, Msg: "duplicate loss argument (give one loss model)"}
			}
			if err := parseLoss(kw, c, &n.Loss); err != nil {
				return nil, err
			}
			// q_netem.c only counts a loss as given when it drops
			// something: "loss 0%" may be followed by another loss.
			lossSet = n.Loss.Kind != LossRandom || n.Loss.P > 0

		case "seed":
			t, err := c.need(kw, "VALUE")
			if err != nil {
				return nil, err
			}
			v, perr := strconv.ParseUint(t.text, 10, 64)
			if perr != nil {
				return nil, &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("seed: %q is not a number 0-%d", t.text, uint64(math.MaxUint64))}
			}
			n.Seed, n.HasSeed = v, true

		case "ecn":
			n.ECN, at.ecn = true, kw

		case "reorder":
			t, err := c.need(kw, "PERCENT")
			if err != nil {
				return nil, err
			}
			if n.Reorder, err = percentArg("reorder", t); err != nil {
				return nil, err
			}
			at.reorder = kw
			if c.nextIsNumber(false) {
				if n.ReorderCorr, err = percentArg("reorder correlation", c.next()); err != nil {
					return nil, err
				}
			}

		case "corrupt":
			t, err := c.need(kw, "PERCENT")
			if err != nil {
				return nil, err
			}
			if n.Corrupt, err = percentArg("corrupt", t); err != nil {
				return nil, err
			}
			if c.nextIsNumber(false) {
				if n.CorruptCorr, err = percentArg("corrupt correlation", c.next()); err != nil {
					return nil, err
				}
			}

		case "gap":
			t, err := c.need(kw, "DISTANCE")
			if err != nil {
				return nil, err
			}
			if n.Gap, err = uint32Arg("gap", t); err != nil {
				return nil, err
			}
			at.gap = kw

		case "duplicate":
			t, err := c.need(kw, "PERCENT")
			if err != nil {
				return nil, err
			}
			if n.Duplicate, err = percentArg("duplicate", t); err != nil {
				return nil, err
			}
			if c.nextIsNumber(false) {
				if n.DuplicateCorr, err = percentArg("duplicate correlation", c.next()); err != nil {
					return nil, err
				}
			}

		case "distribution":
			t, err := c.need(kw, "uniform, normal, pareto or paretonormal")
			if err != nil {
				return nil, err
			}
			if n.Dist, err = distArg("distribution", t); err != nil {
				return nil, err
			}
			at.dist = kw

		case "rate":
			t, err := c.need(kw, "RATE")
			if err != nil {
				return nil, err
			}
			if n.Rate, err = rateArg("rate", t); err != nil {
				return nil, err
			}
			if c.nextIsNumber(true) {
				if n.PacketOverhead, err = int32Arg("rate packet overhead", c.next()); err != nil {
					return nil, err
				}
			}
			if c.nextIsNumber(false) {
				if n.CellSize, err = uint32Arg("rate cell size", c.next()); err != nil {
					return nil, err
				}
			}
			if c.nextIsNumber(true) {
				if n.CellOverhead, err = int32Arg("rate cell overhead", c.next()); err != nil {
					return nil, err
				}
			}

		case "slot":
			slot, err := parseSlot(kw, c)
			if err != nil {
				return nil, err
			}
			n.Slot = slot

		default:
			msg := fmt.Sprintf("unknown keyword %q", kw.text)
			if b := kw.text[0]; b >= '0' && b <= '9' || b == '-' || b == '.' {
				msg = fmt.Sprintf("unexpected value %q where a keyword belongs", kw.text)
			} else if tbfKeywords[kw.text] {
				msg += ` (a tbf keyword: start a tbf stage with "| tbf")`
			}
			return nil, &ParseError{Pos: kw.pos, Token: kw.text, Msg: msg}
		}
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
		t, err := c.need(token{text: "loss random", pos: t.pos}, "PERCENT")
		if err != nil {
			return err
		}
		*l = Loss{Kind: LossRandom}
		if l.P, err = percentArg("loss", t); err != nil {
			return err
		}
		if c.nextIsNumber(false) {
			if l.Corr, err = percentArg("loss correlation", c.next()); err != nil {
				return err
			}
		}
	case "state":
		p, err := c.need(token{text: "loss state", pos: t.pos}, "P13")
		if err != nil {
			return err
		}
		*l = Loss{Kind: LossState}
		if l.P13, err = percentArg("loss state p13", p); err != nil {
			return err
		}
		l.P31, l.P32, l.P23, l.P14 = 100-l.P13, 0, 100, 0
		for _, f := range []struct {
			name string
			dst  *units.Percent
		}{{"p31", &l.P31}, {"p32", &l.P32}, {"p23", &l.P23}, {"p14", &l.P14}} {
			if !c.nextIsNumber(false) {
				break
			}
			if *f.dst, err = percentArg("loss state "+f.name, c.next()); err != nil {
				return err
			}
		}
	case "gemodel":
		p, err := c.need(token{text: "loss gemodel", pos: t.pos}, "P")
		if err != nil {
			return err
		}
		*l = Loss{Kind: LossGE}
		if l.GP, err = percentArg("loss gemodel p", p); err != nil {
			return err
		}
		l.GR, l.GH, l.GK = 100-l.GP, 100, 0
		for _, f := range []struct {
			name string
			dst  *units.Percent
		}{{"r", &l.GR}, {"1-h", &l.GH}, {"1-k", &l.GK}} {
			if !c.nextIsNumber(false) {
				break
			}
			if *f.dst, err = percentArg("loss gemodel "+f.name, c.next()); err != nil {
				return err
			}
		}
	default:
		return &ParseError{Pos: t.pos, Token: t.text,
			Msg: fmt.Sprintf("loss %q: unknown loss model (use [random] PERCENT, state or gemodel)", t.text)}
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
		kw := c.next()
		t, err := c.need(kw, "PACKETS")
		if err != nil {
			return nil, err
		}
		v, err := int32Arg("slot packets", t)
		if err != nil {
			return nil, err
		}
		if v < 0 {
			return nil, &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("slot packets %s: must not be negative", t.text)}
		}
		s.Packets = uint32(v)
	}
	if c.peekIs("bytes") {
		kw := c.next()
		t, err := c.need(kw, "BYTES")
		if err != nil {
			return nil, err
		}
		v, err := sizeArg("slot bytes", t)
		if err != nil {
			return nil, err
		}
		// The kernel keeps max_bytes in an s32.
		if v > math.MaxInt32 {
			return nil, &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("slot bytes %s: must be below 2gb", t.text)}
		}
		s.Bytes = v
	}
	return s, nil
}

// parseTBF parses tbf's arguments as q_tbf.c's tbf_parse_opt does. A
// zero value counts as not given there, and so here: a keyword may be
// repeated while its earlier value was zero, limit and latency exclude
// each other only when the earlier one is non-zero, linklayer may be
// repeated freely. Rate, burst and one of limit/latency are required, mtu
// with peakrate.
func parseTBF(kind token, toks []token) (*TBF, error) {
	b := &TBF{}
	c := &cursor{toks: toks}
	given := map[string]token{}   // keyword of each non-zero value given
	lastVal := map[string]token{} // value token of each keyword, for errors about zeros
	for c.more() {
		kw := c.next()
		name := kw.text
		switch name {
		case "buffer", "maxburst":
			name = "burst"
		case "minburst":
			name = "mtu"
		}
		if !tbfKeywords[name] {
			msg := fmt.Sprintf("unknown tbf keyword %q", kw.text)
			if netemKeywords[name] {
				msg += ` (a netem keyword: start a netem stage with "| netem")`
			}
			return nil, &ParseError{Pos: kw.pos, Token: kw.text, Msg: msg}
		}
		if prev, dup := given[name]; dup && name != "linklayer" {
			return nil, &ParseError{Pos: kw.pos, Token: kw.text, Msg: fmt.Sprintf("tbf: %s given twice (first at position %d)", kw.text, prev.pos)}
		}
		switch other := map[string]string{"limit": "latency", "latency": "limit"}[name]; {
		case other == "":
		case given[other].text != "":
			return nil, &ParseError{Pos: kw.pos, Token: kw.text, Msg: "limit and latency are mutually exclusive"}
		}
		t, err := c.need(kw, tbfArgNames[name])
		if err != nil {
			return nil, err
		}
		lastVal[name] = t
		var nonZero bool
		switch name {
		case "rate":
			b.Rate, err = rateArg("rate", t)
			nonZero = b.Rate != 0
		case "peakrate":
			b.PeakRate, err = rateArg("peakrate", t)
			nonZero = b.PeakRate != 0
		case "burst":
			var cell units.Size
			if b.Burst, cell, err = sizeAndCell(kw.text, t); cell != 0 {
				b.BurstCell = cell // get_size64_and_cell keeps an earlier cell otherwise
			}
			nonZero = b.Burst != 0
		case "mtu":
			var cell units.Size
			if b.MTU, cell, err = sizeAndCell(kw.text, t); cell != 0 {
				b.MTUCell = cell
			}
			nonZero = b.MTU != 0
		case "mpu":
			b.MPU, err = sizeArg("mpu", t)
			nonZero = b.MPU != 0
		case "limit":
			b.Limit, err = sizeArg("limit", t)
			nonZero = b.Limit != 0
		case "latency":
			b.Latency, err = tbfLatency(t)
			nonZero = b.Latency != 0
		case "overhead":
			v, perr := strconv.ParseUint(t.text, 10, 16)
			if perr != nil {
				return nil, &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("overhead: %q is not a number 0-65535", t.text)}
			}
			b.Overhead = uint16(v)
			nonZero = v != 0
		case "linklayer":
			switch t.text {
			case "ethernet":
				b.LinkLayer = LinkEthernet
			case "atm", "adsl":
				b.LinkLayer = LinkATM
			default:
				return nil, &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("linklayer %q: use ethernet, atm or adsl", t.text)}
			}
		}
		if err != nil {
			return nil, err
		}
		if nonZero {
			given[name] = kw
		}
	}
	// Values that ended up zero: say which token made them so rather than
	// that the keyword is missing.
	zero := func(name, why string) error {
		t := lastVal[name]
		return &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("%s %s: %s", name, t.text, why)}
	}
	switch {
	case b.Rate == 0 && lastVal["rate"].text != "":
		return nil, zero("rate", "must be at least 8bit (one byte per second)")
	case b.Burst == 0 && lastVal["burst"].text != "":
		return nil, zero("burst", "must be more than 0")
	case b.Limit == 0 && b.Latency == 0 && lastVal["latency"].text != "":
		return nil, zero("latency", "must be at least 1us")
	case b.Limit == 0 && b.Latency == 0 && lastVal["limit"].text != "":
		return nil, zero("limit", "must be at least 1 byte")
	}
	if err := checkTBF(b, kind, given); err != nil {
		return nil, err
	}
	return b, nil
}

// sizeAndCell parses "BYTES[/CELL]" as get_size64_and_cell does; CELL
// must be a power of two.
func sizeAndCell(kw string, t token) (units.Size, units.Size, error) {
	sizeText, cellText, hasCell := strings.Cut(t.text, "/")
	sz, err := units.ParseSize(sizeText)
	if err != nil {
		return 0, 0, valueError(kw, t, err)
	}
	if !hasCell {
		return sz, 0, nil
	}
	cell, ok := parseCInt(cellText, 32, true)
	if !ok || cell <= 0 || cell&(cell-1) != 0 {
		return 0, 0, &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("%s %s: cell size %q must be a power of two", kw, t.text, cellText)}
	}
	return sz, units.Size(cell), nil
}

// tbfLatency parses tbf's latency as get_time does: bare numbers are
// microseconds, there is no "ns" unit, and the value is kept in whole
// microseconds (an unsigned 32-bit count).
func tbfLatency(t token) (time.Duration, error) {
	num := strings.TrimRightFunc(t.text, unicode.IsLetter)
	switch strings.ToLower(t.text[len(num):]) {
	case "ns", "nsec", "nsecs":
		return 0, &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("latency %s: tbf takes s, ms or us, not ns", t.text)}
	}
	d, err := units.ParseTime(t.text, time.Microsecond)
	if err != nil {
		return 0, valueError("latency", t, err)
	}
	if d < 0 { // units.ParseTime wraps at exactly 2^63 ns
		return 0, &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("latency %s: must be below 4294s", t.text)}
	}
	d = d.Truncate(time.Microsecond)
	if d/time.Microsecond > math.MaxUint32 {
		return 0, &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("latency %s: must be below 4294s", t.text)}
	}
	return d, nil
}

// tbfLimitFromLatency computes the byte limit for a latency as q_tbf.c
// does: the bytes the rate drains in that time plus the bucket, or, with a
// peakrate, the smaller of that and the peakrate's bytes plus mtu.
func tbfLimitFromLatency(b *TBF) float64 {
	lat := float64(b.Latency / time.Microsecond)
	lim := float64(b.Rate/8)*lat/1e6 + float64(b.Burst)
	if b.PeakRate > 0 {
		if lim2 := float64(b.PeakRate/8)*lat/1e6 + float64(b.MTU); lim2 < lim {
			lim = lim2
		}
	}
	return lim
}
