package spec

import (
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/wanlab/wanlab/units"
)

// This file holds what the queue disciplines' parsers share (pfifo,
// bfifo, codel, fq_codel, pie, red). Their grammar is iproute2's: a loop
// over keywords in any order, a repeated keyword overwriting the earlier
// value, flags without arguments. As everywhere in a Spec, a zero field
// means the kernel's default, so Parse stores zero for a value equal to
// the default and String leaves it out.

// queueOption is one option of a queue discipline, bound to a stage's
// field: the keywords Parse reads it from, how String prints it (a kind's
// options stand in tc's print order) and how validate checks a value built
// by hand (nil: nothing to check). A kind's options are built for each
// stage, as tbf's table is for each parse, because they hold its fields.
type queueOption struct {
	keys   keywords
	print  func(a *queueArgs)
	check  func(kind string) error
	isTime bool // checked before the others
}

// parseQueueOptions reads a queue discipline's keywords into its options:
// repeating one overwrites the earlier value.
func parseQueueOptions(kind token, toks []token, opts []queueOption) error {
	ks := keywords{}
	for _, o := range opts {
		maps.Copy(ks, o.keys)
	}
	_, err := ks.read(kind.text, &cursor{toks: toks}, func(kw token) string {
		msg := fmt.Sprintf("unknown %s keyword %q", kind.text, kw.text)
		if netemKeywords[kw.text] || tbfKeywords[kw.text] {
			msg += ` (start a netem or tbf stage with "| netem" or "| tbf", before the queue)`
		}
		return msg
	})
	return err
}

// parseOptions is the parser of a queue discipline that is its options
// alone (codel, fq_codel, pie, pfifo, bfifo).
func parseOptions[Q any, P interface {
	*Q
	Stage
	options() []queueOption
}](kind token, toks []token) (Stage, error) {
	q := P(new(Q))
	if err := parseQueueOptions(kind, toks, q.options()); err != nil {
		return nil, err
	}
	return q, nil
}

// printQueueOptions is a stage's canonical words: its kind, then each
// option that is not at its default.
func printQueueOptions(kind string, opts []queueOption) string {
	a := queueArgs{kind}
	for _, o := range opts {
		o.print(&a)
	}
	return a.String()
}

// checkQueueOptions is validate's check of each option's value: the times
// first, then the counts and sizes, each in print order.
func checkQueueOptions(kind string, opts []queueOption) error {
	for _, times := range []bool{true, false} {
		for _, o := range opts {
			if o.check == nil || o.isTime != times {
				continue
			}
			if err := o.check(kind); err != nil {
				return err
			}
		}
	}
	return nil
}

// usTime parses a time as iproute2's get_time does: bare numbers are
// microseconds, no "ns", kept in whole microseconds below 2^32 us (the
// u32 the qdiscs' netlink attributes carry). Zero is refused: in a Spec
// it means "the default".
func usTime(kw token, t token) (time.Duration, error) {
	d, err := getTime(kw.text, "", t)
	if err == nil && d == 0 {
		return 0, &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("%s %s: must be at least 1us", kw.text, t.text)}
	}
	return d, err
}

// getTime is get_time's reading of t for keyword kw (who, if set, names
// the qdisc in the "ns" error): whole microseconds, 0 to 2^32-1 of them.
// The one reading of a qdisc time: usTime and tbf's latency.
func getTime(kw, who string, t token) (time.Duration, error) {
	num := strings.TrimRightFunc(t.text, unicode.IsLetter)
	switch strings.ToLower(t.text[len(num):]) {
	case "ns", "nsec", "nsecs":
		return 0, &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("%s %s: %stakes s, ms or us, not ns", kw, t.text, who)}
	}
	d, err := units.ParseTime(t.text, time.Microsecond)
	if err != nil {
		return 0, valueError(kw, t, err)
	}
	// units.ParseTime wraps to negative at exactly 2^63 ns.
	if d = d.Truncate(time.Microsecond); d < 0 || d/time.Microsecond > math.MaxUint32 {
		return 0, &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("%s %s: must be below 4294s", kw, t.text)}
	}
	return d, nil
}

// timeOption is a time option kw stored in *dst as usTime reads it, or
// zero when it equals def.
func timeOption(kw string, dst *time.Duration, def time.Duration) queueOption {
	return queueOption{
		keys: keywords{kw: overwrite(func(kw token, c *cursor) error {
			t, err := c.need(kw, "TIME")
			if err != nil {
				return err
			}
			d, err := usTime(kw, t)
			if err != nil {
				return err
			}
			*dst = ZeroIfDefault(d, def)
			return nil
		})},
		print:  func(a *queueArgs) { a.time(kw, *dst) },
		check:  func(kind string) error { return checkUsTime(kind, kw, *dst) },
		isTime: true,
	}
}

// countOption is an unsigned count option kw in [lo, hi] stored in *dst,
// or zero when it equals def (what names the value when it is missing).
func countOption(kw string, dst *uint32, def, lo, hi uint32, what string) queueOption {
	return queueOption{
		keys:  keywords{kw: rangeKeyword(dst, def, lo, hi, what, uint32Arg)},
		print: func(a *queueArgs) { a.count(kw, *dst) },
		check: func(kind string) error { return checkRange(kind, kw, uint64(*dst), uint64(lo), uint64(hi)) },
	}
}

// sizeOption is a size option kw in [lo, hi] bytes stored in *dst, or
// zero when it equals def.
func sizeOption(kw string, dst *units.Size, def, lo, hi units.Size) queueOption {
	return queueOption{
		keys:  keywords{kw: sizeKeyword(dst, def, lo, hi)},
		print: func(a *queueArgs) { a.size(kw, *dst) },
		check: func(kind string) error { return checkRange(kind, kw, uint64(*dst), uint64(lo), uint64(hi)) },
	}
}

// flagOption is a flag that on sets and each of off clears; it prints as
// on.
func flagOption(on string, dst *bool, off ...string) queueOption {
	ks := keywords{on: overwrite(func(token, *cursor) error { *dst = true; return nil })}
	for _, w := range off {
		ks[w] = overwrite(func(token, *cursor) error { *dst = false; return nil })
	}
	return queueOption{keys: ks, print: func(a *queueArgs) { a.flag(on, *dst) }}
}

// sizeKeyword stores a size in [lo, hi] bytes in *dst, or zero when it
// equals def.
func sizeKeyword(dst *units.Size, def, lo, hi units.Size) keyword {
	return rangeKeyword(dst, def, lo, hi, "BYTES", sizeArg)
}

// rangeKeyword stores a value parse reads and in [lo, hi] in *dst, or zero
// when it equals def.
func rangeKeyword[T uint32 | units.Size](dst *T, def, lo, hi T, what string, parse func(string, token) (T, error)) keyword {
	return overwrite(func(kw token, c *cursor) error {
		t, err := c.need(kw, what)
		if err != nil {
			return err
		}
		v, err := parse(kw.text, t)
		if err != nil {
			return err
		}
		if v < lo || v > hi {
			return &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("%s %s: must be %v-%v", kw.text, t.text, lo, hi)}
		}
		*dst = ZeroIfDefault(v, def)
		return nil
	})
}

// ZeroIfDefault is v, or zero when v is the default def: a parameter given
// at its default is stored as unset, so that it prints as tc prints it
// (and the kernel codecs read defaults back the same way).
func ZeroIfDefault[T comparable](v, def T) T {
	if v == def {
		var zero T
		return zero
	}
	return v
}

// or returns v, or def when v is zero.
func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// queueArgs builds a stage's canonical words.
type queueArgs []string

func (a *queueArgs) count(kw string, v uint32) {
	if v != 0 {
		*a = append(*a, kw, strconv.FormatUint(uint64(v), 10))
	}
}

func (a *queueArgs) time(kw string, d time.Duration) {
	if d != 0 {
		*a = append(*a, kw, units.FormatDuration(d))
	}
}

func (a *queueArgs) size(kw string, s units.Size) {
	if s != 0 {
		*a = append(*a, kw, s.String())
	}
}

func (a *queueArgs) flag(kw string, on bool) {
	if on {
		*a = append(*a, kw)
	}
}

func (a queueArgs) String() string { return strings.Join(a, " ") }

// checkUsTime is validate's check of a time usTime would have produced.
func checkUsTime(kind, kw string, d time.Duration) error {
	if d < 0 || d%time.Microsecond != 0 || d/time.Microsecond > math.MaxUint32 {
		return &ParseError{Token: kind, Msg: fmt.Sprintf("%s: %s %s: must be whole microseconds below 4294s", kind, kw, d)}
	}
	return nil
}

// checkRange is Validate's check of a count.
func checkRange(kind, kw string, v, lo, hi uint64) error {
	if v != 0 && (v < lo || v > hi) {
		return &ParseError{Token: kind, Msg: fmt.Sprintf("%s: %s %d: must be %d-%d", kind, kw, v, lo, hi)}
	}
	return nil
}

// checkQueueLast is the rule every queue discipline shares: it is
// classless, so no stage can follow it (the kernel has no class to
// attach one to).
func checkQueueLast(s *Spec) error {
	for i, st := range s.Stages {
		if st != nil && IsQueueKind(st.Kind()) && i < len(s.Stages)-1 {
			return &ParseError{Token: st.Kind(), Msg: fmt.Sprintf("stage %d: %s is classless: it must be the last stage (no qdisc can hang from it)", i+2, st.Kind())}
		}
	}
	return nil
}

// Limited is a stage that holds packets: the most it holds, in packets
// and in bytes (0: no such limit; both bind when both are set). Every
// kind that queues implements it, so that what a queue can hold is
// answered in one place (the engine's queue budget and Simulate's
// queueing bound).
type Limited interface {
	Limits() (packets uint32, bytes units.Size)
}

func (n *Netem) Limits() (uint32, units.Size)   { return n.QueueLimit(), 0 }
func (b *TBF) Limits() (uint32, units.Size)     { return 0, b.QueueLimit() }
func (q *PFIFO) Limits() (uint32, units.Size)   { return q.PacketLimit(), 0 }
func (q *BFIFO) Limits() (uint32, units.Size)   { return 0, q.ByteLimit() }
func (q *CoDel) Limits() (uint32, units.Size)   { return q.PacketLimit(), 0 }
func (q *FQCoDel) Limits() (uint32, units.Size) { return q.PacketLimit(), q.MemoryBytes() }
func (q *PIE) Limits() (uint32, units.Size)     { return q.PacketLimit(), 0 }
func (r *RED) Limits() (uint32, units.Size)     { return 0, r.Limit }

// LimitBytes is the most a Limited stage holds in bytes of packetSize-byte
// packets.
func LimitBytes(l Limited, packetSize units.Size) units.Size {
	pk, by := l.Limits()
	switch {
	case pk == 0:
		return by
	case by == 0:
		return units.Size(pk) * packetSize
	}
	return min(units.Size(pk)*packetSize, by)
}
