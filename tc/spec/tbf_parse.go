package spec

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/wanlab/wanlab/units"
)

// tbfArgNames names what each tbf keyword takes, for "missing" errors.
var tbfArgNames = map[string]string{"rate": "RATE", "burst": "BYTES", "limit": "BYTES", "latency": "TIME",
	"peakrate": "RATE", "mtu": "BYTES", "mpu": "BYTES", "overhead": "BYTES", "linklayer": "ethernet, atm or adsl"}

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
			if netemKeywords[name] != nil {
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
			b.Latency, err = getTime("latency", "tbf ", t) // 0 is refused below, after every argument
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
