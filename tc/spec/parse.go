package spec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/wanlab/wanlab/internal/host"
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
		if n := len(spec.Stages); n > 0 && IsQueueKind(spec.Stages[n-1].Kind()) {
			t := toks[start-1] // the "|" after the queue
			return nil, &ParseError{Pos: t.pos, Token: t.text,
				Msg: fmt.Sprintf("stage %d: %s is classless: it must be the last stage (no qdisc can hang from it)", n+1, spec.Stages[n-1].Kind())}
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
	if k, ok := kinds[kw.text]; ok {
		return k.parse(kw, toks[1:])
	}
	if index == 0 {
		// "netem" may be left out for the first stage.
		return parseNetem(token{text: "netem", pos: kw.pos}, toks)
	}
	return nil, &ParseError{Pos: kw.pos, Token: kw.text,
		Msg: fmt.Sprintf("stage %d must start with %s, not %q", index+1, kindList(), kw.text)}
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
		default:
			if _, ok := kinds[t.text]; ok {
				return c.toks[c.i:], nil
			}
			return nil, &ParseError{Pos: t.pos, Token: t.text,
				Msg: fmt.Sprintf("stage %d: qdisc %q is not an impairment stage (use %s)", index+1, t.text, kindList())}
		}
	}
	last := toks[len(toks)-1]
	return nil, &ParseError{Pos: last.pos, Token: last.text, Msg: "tc command: missing the qdisc kind (" + kindList() + ")"}
}

// SplitDirectional splits the "[IFACE=]TEXT" form every command takes
// (proxy --impair, proxy set, the experiment's directions). tc's netem,
// tbf, htb and class grammars have no '=', so an '=' can only end the
// name: IFACE is what precedes the first one, trimmed, and must be a valid
// interface name (or a lab direction, "to-client"); it is "" without '='.
func SplitDirectional(s string) (iface, text string, err error) {
	before, after, found := strings.Cut(s, "=")
	if !found {
		return "", s, nil
	}
	iface = strings.TrimSpace(before)
	if iface == "" || strings.Contains(iface, "|") || host.CheckIfaceName(iface) != nil {
		return "", "", &ParseError{Pos: 1, Token: before + "=", Msg: fmt.Sprintf("bad interface name %q before \"=\"", iface)}
	}
	return iface, after, nil
}

// ParseDirectional parses "[IFACE=]SPEC" (SplitDirectional) with SPEC a
// pipeline. Error positions count the tokens of SPEC, after the "=".
func ParseDirectional(s string) (iface string, spec *Spec, err error) {
	iface, text, err := SplitDirectional(s)
	if err != nil {
		return "", nil, err
	}
	spec, err = Parse(text)
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

// need reads the value keyword kw must have (what describes it when it is
// missing) into *dst with parse, which names it name in its errors.
func need[T any](c *cursor, kw token, what string, dst *T, parse func(string, token) (T, error), name string) error {
	t, err := c.need(kw, what)
	if err != nil {
		return err
	}
	*dst, err = parse(name, t)
	return err
}

// optional reads an optional value into *dst with parse when the next word
// is a number (signed: it may start with '-'), and reports whether it
// was there.
func optional[T any](c *cursor, signed bool, dst *T, parse func(string, token) (T, error), name string) (bool, error) {
	if !c.nextIsNumber(signed) {
		return false, nil
	}
	var err error
	*dst, err = parse(name, c.next())
	return true, err
}

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
