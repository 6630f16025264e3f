package release

import (
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
	// microseconds, or stamps would not compare with the kernel's.
	if d := kernelMonotonic() - MonotonicNow(); d > int64(50*time.Microsecond) || d < -int64(50*time.Microsecond) {
		t.Fatalf("Monotonic is %d ns off CLOCK_MONOTONIC", d)
	}
}
