// Package trace holds link capacity traces in mahimahi's mm-link format:
// one integer millisecond per line, each line one delivery opportunity of
// OpportunityBytes bytes at that time since the start, repeated lines
// giving several opportunities in the same millisecond. The last
// timestamp is the trace's period: a looping trace starts again there.
//
// It reads and writes that format (Read, Write), carries a trace inline
// in a spec as a run-length list of opportunities per millisecond
// (Encode, Decode), summarises one (Summarize) and generates synthetic
// ones (gen.go). The engine's trace stage (tc/engine/trace.go) replays
// them.
package trace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/wanlab/wanlab/units"
)

// OpportunityBytes is what one delivery opportunity carries: mahimahi's
// PACKET_SIZE. Bytes are counted across packets, so a 100-byte packet uses
// 100 of them and the rest serve the next packet.
const OpportunityBytes = 1500

// Limits that keep a trace's memory bounded: at most MaxOpportunities
// opportunities (4 bytes each in memory) and a period of at most
// MaxPeriod milliseconds (about 24.8 days).
const (
	MaxOpportunities = 1 << 22
	MaxPeriod        = 1<<31 - 1
)

// Trace is a sequence of delivery opportunities.
type Trace struct {
	// Times are the opportunities in milliseconds since the start,
	// non-decreasing; the last one is the period and is above 0.
	Times []uint32
}

// Period is the trace's length: its last timestamp.
func (t *Trace) Period() time.Duration {
	if t == nil || len(t.Times) == 0 {
		return 0
	}
	return time.Duration(t.Times[len(t.Times)-1]) * time.Millisecond
}

// Bytes is the capacity of one period in bytes.
func (t *Trace) Bytes() int64 { return int64(len(t.Times)) * OpportunityBytes }

// MeanRate is the capacity averaged over the period.
func (t *Trace) MeanRate() units.Rate {
	p := t.Period()
	if p <= 0 {
		return 0
	}
	return units.Rate(float64(t.Bytes()) * 8 / p.Seconds())
}

// Check reports what makes t unusable: no opportunities, timestamps that
// go back, a zero period, or a trace beyond the limits. The messages are
// mahimahi's where it has one.
func (t *Trace) Check() error {
	switch {
	case t == nil || len(t.Times) == 0:
		return errors.New("no valid timestamps found")
	case len(t.Times) > MaxOpportunities:
		return fmt.Errorf("%d opportunities: at most %d", len(t.Times), MaxOpportunities)
	}
	for i := 1; i < len(t.Times); i++ {
		if t.Times[i] < t.Times[i-1] {
			return fmt.Errorf("opportunity %d at %d ms: timestamps must be monotonically nondecreasing", i+1, t.Times[i])
		}
	}
	last := t.Times[len(t.Times)-1]
	if last == 0 {
		return errors.New("trace must last for a nonzero amount of time")
	}
	if last > MaxPeriod {
		return fmt.Errorf("period %d ms: at most %d ms", last, MaxPeriod)
	}
	return nil
}

// Read parses an mm-link trace: one decimal millisecond per line
// (trailing "\r" allowed), non-decreasing, the last above 0. As mahimahi,
// an empty line is an error; unlike it, so is anything but digits
// (mahimahi's myatoi takes a leading sign and white space). name is used
// in the errors, which read "NAME:LINE: what".
func Read(r io.Reader, name string) (*Trace, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64), 64)
	t := &Trace{}
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSuffix(sc.Text(), "\r")
		if text == "" {
			return nil, fmt.Errorf("%s:%d: invalid empty line", name, line)
		}
		if text[0] < '0' || text[0] > '9' {
			return nil, fmt.Errorf("%s:%d: %q is not a millisecond count", name, line, short(text))
		}
		v, err := strconv.ParseUint(text, 10, 32)
		if err != nil || v > MaxPeriod {
			return nil, fmt.Errorf("%s:%d: %q is not a millisecond count 0-%d", name, line, short(text), MaxPeriod)
		}
		ms := uint32(v)
		if n := len(t.Times); n > 0 && ms < t.Times[n-1] {
			return nil, fmt.Errorf("%s:%d: %d after %d: timestamps must be monotonically nondecreasing", name, line, ms, t.Times[n-1])
		}
		if len(t.Times) == MaxOpportunities {
			return nil, fmt.Errorf("%s:%d: more than %d opportunities", name, line, MaxOpportunities)
		}
		t.Times = append(t.Times, ms)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: line too long for a millisecond count", name, line+1)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(t.Times) == 0 {
		return nil, fmt.Errorf("%s: no valid timestamps found", name)
	}
	if t.Times[len(t.Times)-1] == 0 {
		return nil, fmt.Errorf("%s:%d: trace must last for a nonzero amount of time", name, line)
	}
	return t, nil
}

func short(s string) string {
	if len(s) > 20 {
		return s[:20] + "..."
	}
	return s
}

// Write writes t in mm-link format.
func (t *Trace) Write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	var buf []byte
	for _, ms := range t.Times {
		buf = strconv.AppendUint(buf[:0], uint64(ms), 10)
		buf = append(buf, '\n')
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	return bw.Flush()
}
