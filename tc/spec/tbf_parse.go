package spec

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/wanlab/wanlab/units"
)

// parseTBF parses tbf's arguments as q_tbf.c's tbf_parse_opt does. A
// zero value counts as not given there, and so here: a keyword may be
// repeated while its earlier value was zero, limit and latency exclude
// each other only when the earlier one is non-zero, linklayer may be
// repeated freely. Rate, burst and one of limit/latency are required, mtu
// with peakrate.
func parseTBF(kind token, toks []token) (*TBF, error) {
	b := &TBF{}
	lastVal := map[string]token{} // value token of each keyword, for errors about zeros
	given, err := tbfTable(b, lastVal).read("tbf", &cursor{toks: toks}, func(kw token) string {
		msg := fmt.Sprintf("unknown tbf keyword %q", kw.text)
		if netemKeywords[kw.text] {
			msg += ` (a netem keyword: start a netem stage with "| netem")`
		}
		return msg
	})
	if err != nil {
		return nil, err
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

// tbfTable is tbf_parse_opt's keywords, read into b; lastVal gets the
// value token of each.
func tbfTable(b *TBF, lastVal map[string]token) keywords {
	one := func(name, what string, set func(kw, t token) (bool, error)) keyword {
		return keyword{name: name, once: true, read: arg(what, func(kw, t token) (bool, error) {
			lastVal[name] = t
			return set(kw, t)
		})}
	}
	// sizeCell reads BYTES[/CELL]; get_size64_and_cell keeps an earlier
	// cell when none is given.
	sizeCell := func(size, cell *units.Size) func(kw, t token) (bool, error) {
		return func(kw, t token) (bool, error) {
			sz, c, err := sizeAndCell(kw.text, t)
			if *size = sz; c != 0 {
				*cell = c
			}
			return sz != 0, err
		}
	}
	burst := one("burst", "BYTES", sizeCell(&b.Burst, &b.BurstCell))
	mtu := one("mtu", "BYTES", sizeCell(&b.MTU, &b.MTUCell))
	limit := one("limit", "BYTES", setArg(&b.Limit, sizeArg))
	limit.exclusive = [2]string{"limit", "latency"}
	latency := one("latency", "TIME", func(_, t token) (bool, error) {
		var err error
		b.Latency, err = getTime("latency", "tbf ", t) // 0 is refused after every argument
		return b.Latency != 0, err
	})
	latency.exclusive = limit.exclusive
	return keywords{
		"rate": one("rate", "RATE", setArg(&b.Rate, rateArg)), "peakrate": one("peakrate", "RATE", setArg(&b.PeakRate, rateArg)),
		"burst": burst, "buffer": burst, "maxburst": burst, "mtu": mtu, "minburst": mtu,
		"mpu": one("mpu", "BYTES", setArg(&b.MPU, sizeArg)), "limit": limit, "latency": latency,
		"overhead": one("overhead", "BYTES", func(_, t token) (bool, error) {
			v, err := strconv.ParseUint(t.text, 10, 16)
			if err != nil {
				return false, &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("overhead: %q is not a number 0-65535", t.text)}
			}
			b.Overhead = uint16(v)
			return v != 0, nil
		}),
		"linklayer": {read: arg("ethernet, atm or adsl", func(_, t token) (bool, error) {
			switch t.text {
			case "ethernet":
				b.LinkLayer = LinkEthernet
			case "atm", "adsl":
				b.LinkLayer = LinkATM
			default:
				return false, &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("linklayer %q: use ethernet, atm or adsl", t.text)}
			}
			return false, nil
		})},
	}
}

// tbfKeywords are what tbf's table takes, for the hint an unknown word of
// another kind gets when it is tbf's: the missing "|".
var tbfKeywords = tbfTable(&TBF{}, nil).names()

// setArg stores what parse reads of the argument in *dst; a zero counts
// as not given.
func setArg[T comparable](dst *T, parse func(string, token) (T, error)) func(kw, t token) (bool, error) {
	return func(kw, t token) (bool, error) {
		var err error
		*dst, err = parse(kw.text, t)
		var zero T
		return *dst != zero, err
	}
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
