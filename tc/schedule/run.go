package schedule

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// Clock is the time a Runner steps by: the real one (Real) or a test's.
type Clock interface {
	Now() time.Time
	// After delivers once d has passed.
	After(d time.Duration) <-chan time.Time
}

// Real is the wall clock (time.Now, time.After).
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Runner applies a schedule's steps at their times. Apply is called from
// Run's goroutine with each step as it falls due (the one in force at the
// start first); an error from it is recorded and the schedule goes on.
type Runner struct {
	s     *Schedule
	clock Clock
	apply func(Step) error

	// applying is held while a step is applied and while Stop stops, so
	// that no step lands after Stop returns (proxy set's spec would be
	// replaced by it).
	applying sync.Mutex

	mu      sync.Mutex
	start   time.Time
	started bool
	stopped bool
	applied int // steps applied
	lastErr error
	stop    chan struct{}
	once    sync.Once
}

// NewRunner is a runner of s on clock calling apply.
func NewRunner(s *Schedule, clock Clock, apply func(Step) error) *Runner {
	if clock == nil {
		clock = Real{}
	}
	return &Runner{s: s, clock: clock, apply: apply, stop: make(chan struct{})}
}

// Run applies the steps until the schedule ends (returns nil), ctx is
// done (ctx.Err()) or Stop is called (ErrStopped).
func (r *Runner) Run(ctx context.Context) error {
	r.mu.Lock()
	r.start, r.started = r.clock.Now(), true
	r.mu.Unlock()
	pos := r.s.At(0)
	if pos.Step >= 0 && !r.do(r.s.Steps[pos.Step]) {
		return ErrStopped
	}
	for pos.Next >= 0 {
		wait := pos.NextAt - r.clock.Now().Sub(r.start)
		if wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-r.stop:
				return ErrStopped
			case <-r.clock.After(wait):
			}
		}
		if !r.do(r.s.Steps[pos.Next]) {
			return ErrStopped
		}
		// Steps are applied at their times, never skipped: after a late
		// wake-up the next one follows at once.
		at := pos.NextAt
		pos = r.s.At(at)
	}
	return nil
}

// do applies st unless the runner was stopped; it reports whether it did.
func (r *Runner) do(st Step) bool {
	r.applying.Lock()
	defer r.applying.Unlock()
	select {
	case <-r.stop:
		return false
	default:
	}
	err := r.apply(st)
	r.mu.Lock()
	r.applied++
	if err != nil {
		r.lastErr = err
	}
	r.mu.Unlock()
	return true
}

// Stop ends Run before its next step (proxy set took the direction
// over): once it returns, no step is applied any more, one being applied
// when it was called included (Stop waits for it). It is idempotent. It
// must not be called from the apply function.
func (r *Runner) Stop() {
	r.once.Do(func() {
		r.applying.Lock()
		defer r.applying.Unlock()
		r.mu.Lock()
		r.stopped = true
		r.mu.Unlock()
		close(r.stop)
	})
}

// State is a running schedule's position, for stats (the JSON field names
// are a contract with `wanlab proxy stats --json` users).
type State struct {
	File string `json:"file"`
	// Step is the 1-based number of the step in force (0: before the
	// first), Line its line in the file and Spec its canonical spec.
	Step int    `json:"step"`
	Line int    `json:"line,omitempty"`
	Spec string `json:"spec"`
	// SinceMs is when it took over, NextMs when the next step (NextStep,
	// NextSpec) does, both in ms after the start; NextStep 0: none.
	SinceMs  int64  `json:"since_ms"`
	NextStep int    `json:"next_step,omitempty"`
	NextMs   int64  `json:"next_ms,omitempty"`
	NextSpec string `json:"next_spec,omitempty"`
	// ElapsedMs is the time since the start; LoopMs the loop period (0:
	// the schedule ends); Cycle the loops done.
	ElapsedMs int64 `json:"elapsed_ms"`
	LoopMs    int64 `json:"loop_ms,omitempty"`
	Cycle     int64 `json:"cycle"`
	// Stopped: proxy set replaced the spec and ended the schedule.
	Stopped bool `json:"stopped,omitempty"`
	// Applied counts the steps applied; Error is the last step's error.
	Applied int    `json:"applied"`
	Error   string `json:"error,omitempty"`
}

// State returns where the schedule stands now.
func (r *Runner) State() State {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := State{File: r.s.Name, LoopMs: r.s.Loop.Milliseconds(), Stopped: r.stopped, Applied: r.applied}
	if r.lastErr != nil {
		st.Error = r.lastErr.Error()
	}
	var elapsed time.Duration
	if r.started {
		elapsed = r.clock.Now().Sub(r.start)
	}
	pos := r.s.At(max(elapsed, 0))
	st.ElapsedMs, st.Cycle = elapsed.Milliseconds(), pos.Cycle
	if pos.Step >= 0 {
		step := r.s.Steps[pos.Step]
		st.Step, st.Line, st.Spec, st.SinceMs = pos.Step+1, step.Line, step.Spec.String(), pos.Since.Milliseconds()
	}
	if pos.Next >= 0 && !r.stopped {
		st.NextStep, st.NextMs, st.NextSpec = pos.Next+1, pos.NextAt.Milliseconds(), r.s.Steps[pos.Next].Spec.String()
	}
	return st
}

// Describe is the state in one line: "step 2 of 3 (line 4) since 10s:
// SPEC; next step 3 at 15s: SPEC".
func (st State) Describe(abbrev func(string) string) string {
	if abbrev == nil {
		abbrev = func(s string) string { return s }
	}
	show := func(s string) string {
		if s == "" {
			return "(no impairment)"
		}
		return abbrev(s)
	}
	ms := func(v int64) string { return fmtDur(time.Duration(v) * time.Millisecond) }
	var b string
	if st.Step == 0 {
		b = "before the first step"
	} else {
		b = "step " + itoa(st.Step) + " (line " + itoa(st.Line) + ") since " + ms(st.SinceMs) + ": " + show(st.Spec)
	}
	switch {
	case st.Stopped:
		b += "; stopped by proxy set"
	case st.NextStep > 0:
		b += "; next step " + itoa(st.NextStep) + " at " + ms(st.NextMs) + ": " + show(st.NextSpec)
	default:
		b += "; schedule ended"
	}
	if st.LoopMs > 0 {
		b += " (loop " + ms(st.LoopMs) + ", cycle " + itoa(int(st.Cycle)) + ")"
	}
	if st.Error != "" {
		b += "; last error: " + st.Error
	}
	return b
}

func itoa(v int) string { return strconv.Itoa(v) }
