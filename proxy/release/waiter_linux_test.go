package release

import (
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// policyQueue counts releases that ran on a thread without SCHED_FIFO
// while the loop claims it (checked on the loop's own thread, whichever
// it is after yields).
type policyQueue struct {
	*doneQueue
	wantFIFO atomic.Bool
	notFIFO  atomic.Int64
}

func (p *policyQueue) Release(now int64) {
	if p.wantFIFO.Load() {
		if a, err := unix.SchedGetAttr(0, 0); err != nil || a.Policy != unix.SCHED_FIFO {
			p.notFIFO.Add(1)
		}
	}
	p.doneQueue.Release(now)
}

// TestLoopAddsProc: a running loop's thread holds its P while it waits,
// so Start adds one to GOMAXPROCS and Close takes it away again.
func TestLoopAddsProc(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	a, err := Start(&sliceQueue{clock: Monotonic{}}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Start(&sliceQueue{clock: Monotonic{}}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != before+2 {
		t.Fatalf("GOMAXPROCS with two loops = %d, want %d", got, before+2)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	_ = a.Close() // idempotent: must not take a second P away
	if got := runtime.GOMAXPROCS(0); got != before+1 {
		t.Fatalf("GOMAXPROCS after one Close = %d, want %d", got, before+1)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("GOMAXPROCS after both Close = %d, want %d", got, before)
	}
}

// TestLoopYieldsAndStopTheWorld runs the real waiter through every path
// of a wait: an ordinary park (first packet 40 ms ahead), raw waits with
// yields to the scheduler (packets every 300 µs for 30 ms, past
// yieldForce), and stop-the-world collections meanwhile, which must
// interrupt the raw waits rather than hang. Every packet leaves, in
// order, never early, and the waiter's policy survives a thread change.
func TestLoopYieldsAndStopTheWorld(t *testing.T) {
	for _, rt := range []bool{false, true} {
		q := &sliceQueue{clock: Monotonic{}}
		const n = 100
		done := make(chan struct{})
		pq := &policyQueue{doneQueue: &doneQueue{sliceQueue: q, want: n, done: done}}
		l, err := Start(pq, Config{Realtime: rt})
		if err != nil {
			t.Fatal(err)
		}
		if rt && !l.Realtime() && os.Geteuid() == 0 {
			t.Fatal("Realtime: true as root, but the loop does not run under SCHED_FIFO")
		}
		pq.wantFIFO.Store(l.Realtime())
		start := MonotonicNow() + int64(40*time.Millisecond)
		for i := range n {
			d := start + int64(i)*int64(300*time.Microsecond)
			q.push(d)
			l.Notify(d)
		}
		gcDone := make(chan struct{})
		go func() {
			defer close(gcDone)
			for {
				select {
				case <-done:
					return
				default:
					runtime.GC()
				}
			}
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("realtime=%v: released %d of %d packets", rt, len(q.departed()), n)
		}
		<-gcDone
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if bad := pq.notFIFO.Load(); bad != 0 {
			t.Fatalf("realtime=%v: %d releases ran without SCHED_FIFO", rt, bad)
		}
		for i, r := range q.released {
			if r.at < r.depart {
				t.Fatalf("realtime=%v: packet %d released %d ns early", rt, i, r.depart-r.at)
			}
			if i > 0 && r.depart < q.released[i-1].depart {
				t.Fatalf("realtime=%v: packet %d released out of order", rt, i)
			}
		}
	}
}
