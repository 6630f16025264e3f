package release

import (
	"math"
	"sync"
	"testing"
	"time"
)

// TestLoopRealClock runs the ppoll waiter: every packet leaves in order
// and never before its departure time.
func TestLoopRealClock(t *testing.T) {
	q := &sliceQueue{clock: Monotonic{}}
	done := make(chan struct{})
	const n = 300
	dq := &doneQueue{sliceQueue: q, want: n, done: done}
	l, err := Start(dq, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// Packets come in out of departure order; each earlier one must wake
	// the loop, later ones must not be released first.
	start := MonotonicNow() + int64(20*time.Millisecond)
	for i := range n {
		d := start + int64((i*7919)%n)*int64(20*time.Microsecond)
		q.push(d)
		l.Notify(d)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("released %d of %d packets", len(q.departed()), n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for i, r := range q.released {
		if r.at < r.depart {
			t.Fatalf("packet %d due at %d released %d ns early", i, r.depart, r.depart-r.at)
		}
		if i > 0 && r.depart < q.released[i-1].depart {
			t.Fatalf("packet %d released out of order", i)
		}
	}
}

type doneQueue struct {
	*sliceQueue
	want int
	done chan struct{}
	once sync.Once
}

func (d *doneQueue) Release(now int64) {
	d.sliceQueue.Release(now)
	d.mu.Lock()
	n := len(d.released)
	d.mu.Unlock()
	if n >= d.want {
		d.once.Do(func() { close(d.done) })
	}
}

func TestCloseIdle(t *testing.T) {
	l, err := Start(&sliceQueue{clock: Monotonic{}}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestMonotonicMatchesKernel(t *testing.T) {
	// The calibrated clock must agree with CLOCK_MONOTONIC to within a few
	// microseconds, or stamps would not compare with the kernel's. Each
	// reading is bracketed by two of the kernel's and the narrowest bracket
	// of many is kept: a goroutine preempted between two reads (a busy
	// machine) widens its bracket, it does not move the clock.
	var lo, hi, m int64
	width := int64(math.MaxInt64)
	for range 200 {
		k0 := kernelMonotonic()
		now := MonotonicNow()
		k1 := kernelMonotonic()
		if k1-k0 < width {
			lo, hi, m, width = k0, k1, now, k1-k0
		}
	}
	const tol = int64(50 * time.Microsecond)
	if m < lo-tol || m > hi+tol {
		t.Fatalf("Monotonic read %d, CLOCK_MONOTONIC %d-%d around it: %d ns off", m, lo, hi, min(m-lo, m-hi))
	}
}
