package schedule

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

const example = `# a 5 s delay spike every 20 s
0s   delay 20ms
10s  delay 200ms loss 1%   # the spike
15s  delay 20ms

loop 20s
`

func TestParse(t *testing.T) {
	s, err := Parse("spike.sched", []byte(example), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Steps) != 3 || s.Loop != 20*time.Second || s.Steps[1].Line != 3 || s.Steps[1].Spec.String() != "delay 200ms loss 1%" {
		t.Fatalf("parsed %+v", s)
	}
	want := "0s delay 20ms\n10s delay 200ms loss 1%\n15s delay 20ms\nloop 20s\n"
	if s.String() != want {
		t.Fatalf("String = %q", s.String())
	}
	again, err := Parse("x", []byte(s.String()), nil)
	if err != nil || again.String() != want {
		t.Fatalf("round trip: %v %q", err, again.String())
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "f: no steps (want lines of AT SPEC, e.g. \"0s delay 20ms\")"},
		{"0s delay 1ms\n0s delay 2ms\n", "f:2: step at 0s: times must increase (the previous step is at 0s, line 1)"},
		{"0s dela 1ms\n", `f:1: unknown keyword "dela" at position 1`},
		{"soon delay 1ms\n", `f:1: "soon": want AT SPEC (AT a time such as 10s), loop PERIOD or end`},
		{"0s delay 1ms\n5s\nloop 5s\n", "f:3: loop 5s: must be longer than the last step's time 5s"},
		{"loop 5s\n", "f:1: loop before any step"},
		{"0s delay 1ms\nend\n1s delay 2ms\n", `f:3: "1s delay 2ms" after the schedule ended on line 2`},
		{"0s delay 1ms\nend now\n", `f:2: end takes nothing, not "now"`},
		{"0s trace lte.down\n", "f:1: trace lte.down: a trace file is read where it is typed, not here: send its opportunities inline (trace NAME data COUNTS, what the command line sends) at position 2"},
	} {
		_, err := Parse("f", []byte(c.in), nil)
		if err == nil || err.Error() != c.want {
			t.Errorf("Parse(%q) = %v\nwant %q", c.in, err, c.want)
		}
	}
}

func TestAt(t *testing.T) {
	s, _ := Parse("f", []byte("2s delay 1ms\n5s delay 2ms\nloop 10s\n"), nil)
	for _, c := range []struct {
		at            time.Duration
		step, next    int
		since, nextAt time.Duration
		cycle         int64
	}{
		{0, -1, 0, 0, 2 * time.Second, 0},
		{2 * time.Second, 0, 1, 2 * time.Second, 5 * time.Second, 0},
		{7 * time.Second, 1, 0, 5 * time.Second, 12 * time.Second, 0},
		{11 * time.Second, 1, 0, 5 * time.Second, 12 * time.Second, 1},
		{12 * time.Second, 0, 1, 12 * time.Second, 15 * time.Second, 1},
	} {
		p := s.At(c.at)
		if p.Step != c.step || p.Next != c.next || p.Since != c.since || p.NextAt != c.nextAt || p.Cycle != c.cycle {
			t.Errorf("At(%s) = %+v", c.at, p)
		}
	}
	e, _ := Parse("f", []byte("0s delay 1ms\n1s\n"), nil)
	if p := e.At(time.Hour); p.Step != 1 || p.Next != -1 {
		t.Errorf("ended schedule: %+v", p)
	}
}

// fakeClock is a manual clock: After fires when Advance passes its time.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	added   chan struct{}
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1000, 0), added: make(chan struct{}, 100)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, waiter{c.now.Add(d), ch})
	c.added <- struct{}{}
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}

func TestRunnerOnFakeClock(t *testing.T) {
	s, err := Parse("spike.sched", []byte(example), nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := newFakeClock()
	applied := make(chan string, 10)
	r := NewRunner(s, clk, func(st Step) error {
		applied <- st.Spec.String()
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	expect := func(want string) {
		t.Helper()
		select {
		case got := <-applied:
			if got != want {
				t.Fatalf("applied %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no step applied, want %q", want)
		}
	}
	waitTimer := func() {
		t.Helper()
		select {
		case <-clk.added:
		case <-time.After(10 * time.Second):
			t.Fatal("runner set no timer")
		}
	}
	expect("delay 20ms")
	waitTimer()
	if st := r.State(); st.Step != 1 || st.NextStep != 2 || st.NextMs != 10000 || st.Spec != "delay 20ms" {
		t.Fatalf("state at 0: %+v", st)
	}
	clk.Advance(9 * time.Second)
	select {
	case got := <-applied:
		t.Fatalf("step %q applied before its time", got)
	default:
	}
	clk.Advance(time.Second)
	expect("delay 200ms loss 1%")
	waitTimer()
	clk.Advance(5 * time.Second)
	expect("delay 20ms")
	waitTimer()
	if st := r.State(); st.Step != 3 || st.NextStep != 1 || st.NextMs != 20000 || st.Cycle != 0 {
		t.Fatalf("state at 15s: %+v", st)
	}
	clk.Advance(5 * time.Second) // the loop: step 1 again at 20 s
	expect("delay 20ms")
	waitTimer()
	if st := r.State(); st.Step != 1 || st.Cycle != 1 || st.SinceMs != 20000 || st.NextMs != 30000 {
		t.Fatalf("state at 20s: %+v", st)
	}
	if d := r.State().Describe(nil); d != "step 1 (line 2) since 20s: delay 20ms; next step 2 at 30s: delay 200ms loss 1% (loop 20s, cycle 1)" {
		t.Fatalf("Describe = %q", d)
	}
	r.Stop()
	if err := <-done; !errors.Is(err, ErrStopped) {
		t.Fatalf("Run after Stop = %v", err)
	}
	cancel()
	if st := r.State(); !st.Stopped || st.NextStep != 0 || st.Applied != 4 {
		t.Fatalf("stopped state %+v", st)
	}
}

// FuzzParse checks that Parse never panics, that its errors are one line
// naming the file, and that what it accepts prints back to itself.
//
//	go test ./tc/schedule -run '^$' -fuzz FuzzParse -fuzztime 1m
func FuzzParse(f *testing.F) {
	for _, s := range []string{example, "0s delay 1ms\nend\n", "1s\n2s loss 1%\n", "0 tbf rate 1mbit burst 10kb limit 100kb\nloop 1\n",
		"0s delay 1ms\n0s\n", "loop 1s\n", "# only a comment\n", "5s trace x data 0,1\nloop 6s\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := Parse("f.sched", []byte(in), nil)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.sched") || strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("Parse(%q): bad error %q", in, err)
			}
			return
		}
		text := s.String()
		again, err := Parse("again", []byte(text), nil)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", text, in, err)
		}
		if again.String() != text {
			t.Fatalf("canonical form not stable: %q then %q", text, again.String())
		}
		p := s.At(0)
		if p.Step >= len(s.Steps) || p.Next >= len(s.Steps) {
			t.Fatalf("At(0) out of range: %+v", p)
		}
	})
}

// TestStopWaitsForStep checks that Stop returns only after a step being
// applied has been, and that no step is applied after it: what proxy set
// relies on, so that its spec is not replaced by a step due meanwhile.
func TestStopWaitsForStep(t *testing.T) {
	s, err := Parse("spike.sched", []byte(example), nil)
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	applying, after := false, 0
	stopped := false
	r := NewRunner(s, newFakeClock(), func(st Step) error {
		mu.Lock()
		if stopped {
			after++
		}
		applying = true
		mu.Unlock()
		close(entered)
		<-release
		mu.Lock()
		applying = false
		mu.Unlock()
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	<-entered // the first step is being applied
	stopReturned := make(chan struct{})
	go func() {
		r.Stop()
		mu.Lock()
		stopped = true
		if applying {
			t.Error("Stop returned while a step was being applied")
		}
		mu.Unlock()
		close(stopReturned)
	}()
	select {
	case <-stopReturned:
		t.Fatal("Stop returned before the step being applied was done")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-stopReturned
	if err := <-done; !errors.Is(err, ErrStopped) {
		t.Fatalf("Run after Stop = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if after != 0 {
		t.Errorf("%d steps applied after Stop", after)
	}
}
