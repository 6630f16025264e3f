// Package schedule steps a direction's impairment over time: a schedule
// file lists "AT SPEC" lines, each replacing the direction's whole spec at
// AT after the start, and ends with "loop PERIOD" (start again at PERIOD)
// or "end" (the last step stays). The proxy applies each step with the
// engine's Swap, so packets in flight keep the timing they were given;
// Simulate steps the same schedule on its virtual clock.
//
//	# a 5 s delay spike every 20 s
//	0s   delay 20ms
//	10s  delay 200ms loss 1%
//	15s  delay 20ms
//	loop 20s
package schedule

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// Step is one line of a schedule: from At on, the direction runs Spec.
type Step struct {
	At   time.Duration
	Spec *spec.Spec
	Line int // in the schedule file
}

// Schedule is a parsed schedule file.
type Schedule struct {
	Name  string // the file, for messages
	Steps []Step // At strictly increasing
	// Loop is the period after which the steps start again; 0 means the
	// schedule ends and its last step stays in force.
	Loop time.Duration
}

// MaxSteps bounds a schedule's length.
const MaxSteps = 10000

// Parse reads a schedule. Each line is "AT SPEC", "loop PERIOD" or "end"
// (one of the last two ends the steps; without either the schedule ends
// after its last step); "#" starts a comment; blank lines are skipped. AT
// and PERIOD are times in tc syntax (a bare number is seconds), the ATs
// strictly increasing, the loop longer than the last AT. SPEC is a
// pipeline (spec.Parse); "" (nothing after AT) is no impairment. resolve,
// when set, rewrites each SPEC before it is parsed (the command line
// reads "trace FILE" there, spec.ResolveTraceFiles). Errors are one line,
// "NAME:LINE: what".
func Parse(name string, data []byte, resolve func(text string) (string, error)) (*Schedule, error) {
	s := &Schedule{Name: name}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 64<<20)
	line := 0
	ended := 0
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%s:%d: %s", name, line, fmt.Sprintf(format, a...))
	}
	for sc.Scan() {
		line++
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		if ended > 0 {
			return nil, fail("%q after the schedule ended on line %d", short(text), ended)
		}
		first, rest, _ := strings.Cut(text, " ")
		if i := strings.IndexAny(first, "\t"); i >= 0 {
			first, rest = first[:i], first[i+1:]+" "+rest
		}
		rest = strings.TrimSpace(rest)
		switch first {
		case "end":
			if rest != "" {
				return nil, fail("end takes nothing, not %q", short(rest))
			}
			ended = line
			continue
		case "loop":
			d, err := units.ParseTime(rest, time.Second)
			if err != nil || d <= 0 {
				return nil, fail("loop %q: want a period above 0 such as 20s", short(rest))
			}
			if len(s.Steps) == 0 {
				return nil, fail("loop before any step")
			}
			if last := s.Steps[len(s.Steps)-1].At; d <= last {
				return nil, fail("loop %s: must be longer than the last step's time %s", fmtDur(d), fmtDur(last))
			}
			s.Loop, ended = d, line
			continue
		}
		at, err := units.ParseTime(first, time.Second)
		if err != nil || at < 0 {
			return nil, fail("%q: want AT SPEC (AT a time such as 10s), loop PERIOD or end", short(first))
		}
		if n := len(s.Steps); n > 0 && at <= s.Steps[n-1].At {
			return nil, fail("step at %s: times must increase (the previous step is at %s, line %d)",
				fmtDur(at), fmtDur(s.Steps[n-1].At), s.Steps[n-1].Line)
		}
		if len(s.Steps) == MaxSteps {
			return nil, fail("more than %d steps", MaxSteps)
		}
		if resolve != nil {
			if rest, err = resolve(rest); err != nil {
				return nil, fail("%v", err)
			}
		}
		sp, err := spec.Parse(rest)
		if err != nil {
			return nil, fail("%v", err)
		}
		s.Steps = append(s.Steps, Step{At: at, Spec: sp, Line: line})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	if len(s.Steps) == 0 {
		return nil, fmt.Errorf("%s: no steps (want lines of AT SPEC, e.g. \"0s delay 20ms\")", name)
	}
	return s, nil
}

// fmtDur prints a time as tc does, 0 as "0s".
func fmtDur(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	return units.FormatDuration(d)
}

func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// String is the schedule in its file form, canonical: one "AT SPEC" line
// per step, then "loop PERIOD" or "end". Parse reads it back to the same
// steps.
func (s *Schedule) String() string {
	var b strings.Builder
	for _, st := range s.Steps {
		b.WriteString(fmtDur(st.At))
		if t := st.Spec.String(); t != "" {
			b.WriteString(" " + t)
		}
		b.WriteByte('\n')
	}
	if s.Loop > 0 {
		b.WriteString("loop " + fmtDur(s.Loop) + "\n")
	} else {
		b.WriteString("end\n")
	}
	return b.String()
}

// Position is where a schedule stands at some time after its start.
type Position struct {
	// Step is the index of the step in force (-1: before the first).
	Step int
	// Cycle counts the loops done (0 in the first pass).
	Cycle int64
	// Since is when the step in force took over, after the start.
	Since time.Duration
	// Next is the index of the next step (-1: none, the schedule ended)
	// and NextAt when it takes over, after the start.
	Next   int
	NextAt time.Duration
}

// At returns the position at elapsed after the start (elapsed >= 0). A
// step takes over at its time exactly.
func (s *Schedule) At(elapsed time.Duration) Position {
	var cycle int64
	off := elapsed
	if s.Loop > 0 && elapsed >= s.Loop {
		cycle = int64(elapsed / s.Loop)
		off = elapsed - time.Duration(cycle)*s.Loop
	}
	base := time.Duration(cycle) * s.Loop
	pos := Position{Step: -1, Next: -1, Cycle: cycle}
	// Steps are in time order: the first one after off, by binary search,
	// so that running a schedule costs O(log steps) per step.
	i := sort.Search(len(s.Steps), func(i int) bool { return s.Steps[i].At > off })
	if i > 0 {
		pos.Step, pos.Since = i-1, base+s.Steps[i-1].At
	}
	if i < len(s.Steps) {
		pos.Next, pos.NextAt = i, base+s.Steps[i].At
	}
	if pos.Step < 0 && cycle > 0 {
		// Before the first step of a later loop: the last step of the
		// previous one holds.
		pos.Step, pos.Since = len(s.Steps)-1, base-s.Loop+s.Steps[len(s.Steps)-1].At
	}
	if pos.Next < 0 && s.Loop > 0 {
		pos.Next, pos.NextAt = 0, base+s.Loop+s.Steps[0].At
	}
	return pos
}

// ErrStopped is what Run returns after Stop.
var ErrStopped = errors.New("schedule stopped")
