package release

import (
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// virtualClock is a clock the test moves by hand.
type virtualClock struct{ now atomic.Int64 }

func (c *virtualClock) Now() int64 { return c.now.Load() }

// fakeWaiter reports every wait's deadline and blocks until the test
// resumes it or the loop is woken, so the test sees each decision.
type fakeWaiter struct {
	waits  chan int64
	resume chan struct{}
}

func newFakeWaiter() *fakeWaiter {
	return &fakeWaiter{waits: make(chan int64, 16), resume: make(chan struct{}, 1)}
}

func (f *fakeWaiter) init() error { return nil }
func (f *fakeWaiter) wait(deadline int64, _ *atomic.Int64) {
	f.waits <- deadline
	<-f.resume
}
func (f *fakeWaiter) wake() {
	select {
	case f.resume <- struct{}{}:
	default:
	}
}
func (f *fakeWaiter) close() error { return nil }

// sliceQueue holds departure times, releasing them in order.
type sliceQueue struct {
	clock    Clock
	mu       sync.Mutex
	pending  []int64
	released []released
	calls    int
}

type released struct{ depart, at int64 }

func (q *sliceQueue) push(d int64) {
	q.mu.Lock()
	q.pending = append(q.pending, d)
	sort.Slice(q.pending, func(i, j int) bool { return q.pending[i] < q.pending[j] })
	q.mu.Unlock()
}

func (q *sliceQueue) Release(now int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls++
	for len(q.pending) > 0 && q.pending[0] <= now {
		q.released = append(q.released, released{q.pending[0], q.clock.Now()})
		q.pending = q.pending[1:]
	}
}

func (q *sliceQueue) NextDeparture() (int64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) == 0 {
		return 0, false
	}
	return q.pending[0], true
}

func (q *sliceQueue) departed() []int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []int64
	for _, r := range q.released {
		out = append(out, r.depart)
	}
	return out
}

func expectWait(t *testing.T, w *fakeWaiter, want int64) {
	t.Helper()
	select {
	case got := <-w.waits:
		if got != want {
			t.Fatalf("loop waits for %d, want %d", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("loop never waited (want deadline %d)", want)
	}
}

func TestLoopVirtualClock(t *testing.T) {
	clock := &virtualClock{}
	w := newFakeWaiter()
	q := &sliceQueue{clock: clock}
	l, err := Start(q, Config{Clock: clock, waiter: w})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	expectWait(t, w, never) // idle: sleeps with no deadline

	q.push(100)
	l.Notify(100)
	expectWait(t, w, 100)
	if got := q.departed(); len(got) != 0 {
		t.Fatalf("released %v before its time", got)
	}

	// A later packet must not wake the loop: it is already due to wake.
	before := l.Wakeups()
	q.push(300)
	l.Notify(300)
	if l.Wakeups() != before {
		t.Fatal("Notify of a later departure woke the loop")
	}

	// An earlier one must.
	q.push(50)
	l.Notify(50)
	if l.Wakeups() != before+1 {
		t.Fatalf("wakeups = %d, want %d", l.Wakeups(), before+1)
	}
	expectWait(t, w, 50) // woken, nothing due at 0, now 50 comes first

	clock.now.Store(160)
	w.wake()
	expectWait(t, w, 300)
	if got := q.departed(); !slices.Equal(got, []int64{50, 100}) {
		t.Fatalf("released %v at 160, want [50 100]", got)
	}
	for _, r := range q.released {
		if r.at < r.depart {
			t.Fatalf("packet due at %d released at %d", r.depart, r.at)
		}
	}

	clock.now.Store(1000)
	w.wake()
	expectWait(t, w, never)
	if got := q.departed(); !slices.Equal(got, []int64{50, 100, 300}) {
		t.Fatalf("released %v, want [50 100 300]", got)
	}
}

// TestLoopNotifyDuringRelease covers the race the double NextDeparture
// check closes: a packet queued while Release runs (Notify sees awake and
// does nothing) must still set the next deadline.
func TestLoopNotifyDuringRelease(t *testing.T) {
	clock := &virtualClock{}
	w := newFakeWaiter()
	q := &sliceQueue{clock: clock}
	hook := &hookQueue{sliceQueue: q}
	l, err := Start(hook, Config{Clock: clock, waiter: w})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	expectWait(t, w, never)
	hook.during = func() {
		q.push(50)
		l.Notify(50) // armed == awake: no wake-up
	}
	w.wake()
	expectWait(t, w, 50)
}

type hookQueue struct {
	*sliceQueue
	during func()
}

func (h *hookQueue) Release(now int64) {
	h.sliceQueue.Release(now)
	if f := h.during; f != nil {
		h.during = nil
		f()
	}
}
