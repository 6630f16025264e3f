package trace

import (
	"fmt"
	"strconv"
	"strings"
)

// Encode is t's inline form, the one a spec carries ("trace NAME data
// COUNTS"): the number of opportunities in each millisecond from 0 to the
// period, comma-separated, a run of N equal counts C written CxN. A
// constant 12 Mbit/s trace of lines 1..1000 encodes as "0,1x1000". It is
// a single word (no blanks, no "|"), so it travels in any spec text.
func (t *Trace) Encode() string {
	var b strings.Builder
	item := func(count uint64, run uint64) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(count, 10))
		if run > 1 {
			b.WriteByte('x')
			b.WriteString(strconv.FormatUint(run, 10))
		}
	}
	var curCount, run uint64
	flushMs := func(count uint64) {
		if run > 0 && count == curCount {
			run++
			return
		}
		if run > 0 {
			item(curCount, run)
		}
		curCount, run = count, 1
	}
	var ms uint32
	i := 0
	for i < len(t.Times) {
		at := t.Times[i]
		if at > ms {
			// Milliseconds without an opportunity.
			gap := uint64(at - ms)
			if run > 0 && curCount == 0 {
				run += gap
			} else {
				if run > 0 {
					item(curCount, run)
				}
				curCount, run = 0, gap
			}
			ms = at
		}
		j := i
		for j < len(t.Times) && t.Times[j] == at {
			j++
		}
		flushMs(uint64(j - i))
		i = j
		ms = at + 1
	}
	if run > 0 {
		item(curCount, run)
	}
	return b.String()
}

// Decode reads Encode's form back. Errors name the item (1-based) and say
// what is wrong with it; the result passes Check.
func Decode(s string) (*Trace, error) {
	if s == "" {
		return nil, fmt.Errorf("empty opportunity list")
	}
	t := &Trace{}
	var ms uint64
	var lastCount uint64
	items := 0
	for s != "" {
		items++
		var it string
		if i := strings.IndexByte(s, ','); i >= 0 {
			it, s = s[:i], s[i+1:]
			if s == "" {
				return nil, fmt.Errorf("item %d: trailing \",\"", items+1)
			}
		} else {
			it, s = s, ""
		}
		countText, runText, hasRun := strings.Cut(it, "x")
		count, ok := decimal(countText)
		if !ok {
			return nil, fmt.Errorf("item %d %q: want COUNT or COUNTxMILLISECONDS", items, short(it))
		}
		run := uint64(1)
		if hasRun {
			if run, ok = decimal(runText); !ok || run == 0 {
				return nil, fmt.Errorf("item %d %q: want COUNT or COUNTxMILLISECONDS (at least 1)", items, short(it))
			}
		}
		if ms+run > MaxPeriod+1 {
			return nil, fmt.Errorf("item %d %q: period beyond %d ms", items, short(it), MaxPeriod)
		}
		if count > 0 {
			if count > MaxOpportunities || uint64(len(t.Times))+count*run > MaxOpportunities {
				return nil, fmt.Errorf("item %d %q: more than %d opportunities", items, short(it), MaxOpportunities)
			}
			for k := uint64(0); k < run; k++ {
				for c := uint64(0); c < count; c++ {
					t.Times = append(t.Times, uint32(ms+k))
				}
			}
		}
		ms += run
		lastCount = count
	}
	if lastCount == 0 {
		return nil, fmt.Errorf("the last millisecond holds no opportunity (the last one ends the period)")
	}
	if err := t.Check(); err != nil {
		return nil, err
	}
	return t, nil
}

// decimal parses a plain decimal number (no sign, at most 10 digits).
func decimal(s string) (uint64, bool) {
	if s == "" || len(s) > 10 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}
