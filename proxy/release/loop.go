package release

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Queue is what the loop releases from: typically an engine pipeline and
// the device its packets go to. Both methods are called only from the
// loop's own thread.
type Queue interface {
	// Release sends every packet whose departure is at or before now.
	Release(now int64)
	// NextDeparture returns the earliest departure still queued; ok is
	// false when nothing is queued. It must see packets queued by other
	// goroutines before their Notify call (a mutex or atomics in the
	// queue give that).
	NextDeparture() (next int64, ok bool)
}

// Config tunes a Loop. The zero value is the real clock with defaults.
type Config struct {
	// Early is how long before a deadline the loop stops sleeping and
	// spins on the clock instead. It bounds the spinning per deadline and
	// buys precision: the kernel's wake-up latency is mostly below it.
	// Zero means DefaultEarly; a negative value turns spinning off (the
	// loop then relies on the timer alone: less CPU at high packet rates,
	// wake-up latency as error).
	Early time.Duration
	// Clock is the time source; nil means Monotonic. A non-Monotonic
	// clock needs a waiter of its own (tests).
	Clock Clock
	// Realtime runs the loop's thread under SCHED_FIFO (priority 1) so
	// that other busy processes on the machine cannot delay a release by
	// a scheduler time slice (milliseconds). Without it, on a loaded
	// machine the tail is the time-shared scheduler's (p99 of
	// milliseconds); with it, p99 stays below 100 µs. The spin is bounded
	// by Early and by a budget of 80 % of the time, so the CPU is never
	// taken away from the other tasks for long. Without the privilege
	// (CAP_SYS_NICE) the loop runs normally; Loop.Realtime reports which.
	Realtime bool

	waiter waiter // nil: the ppoll waiter on a locked OS thread
}

// DefaultEarly is the default spin window. Wake-up latency of a sleeping
// thread on an idle vCPU is 10-20 µs here, so 50 µs absorbs most of it
// while keeping the spin short.
const DefaultEarly = 50 * time.Microsecond

const (
	never = int64(math.MaxInt64) // nothing queued: sleep until notified
	awake = int64(math.MinInt64) // the loop is releasing: notifications are not needed
)

// waiter blocks the loop's thread until a deadline or a wake-up.
type waiter interface {
	// init runs on the loop's thread before anything else.
	init() error
	// wait returns once clock reaches deadline (never: only on wake),
	// or early when wake was called or *armed changed away from deadline.
	wait(deadline int64, armed *atomic.Int64)
	// wake interrupts a wait, or makes the next one return at once.
	wake()
	close() error
}

// ErrClosed is returned by operations on a closed Loop.
var ErrClosed = errors.New("release loop closed")

// Loop releases packets from one Queue at their departure times.
type Loop struct {
	q     Queue
	clock Clock
	w     waiter

	// armed is the deadline the loop sleeps towards (never when idle,
	// awake while it is releasing). Notify compares against it to decide
	// whether the sleeping loop must be woken, so a queue whose packets
	// come in departure order costs no syscall per packet.
	armed   atomic.Int64
	stopped atomic.Bool
	done    chan struct{}
	once    sync.Once
	err     error

	wakeups  atomic.Uint64
	ownsProc bool // Start added a P for this loop (procs.go)
}

// Start runs a loop for q on its own locked OS thread.
func Start(q Queue, cfg Config) (*Loop, error) {
	switch {
	case cfg.Early == 0:
		cfg.Early = DefaultEarly
	case cfg.Early < 0:
		cfg.Early = 0
	}
	if cfg.Clock == nil {
		cfg.Clock = Monotonic{}
	}
	w := cfg.waiter
	ownsProc := false
	if w == nil {
		var err error
		if w, err = newPollWaiter(cfg.Clock, cfg.Early, cfg.Realtime); err != nil {
			return nil, err
		}
		// The waiter's thread keeps its P while it sleeps: give the
		// rest of the program one more.
		addProc()
		ownsProc = true
	}
	l := &Loop{q: q, clock: cfg.Clock, w: w, done: make(chan struct{}), ownsProc: ownsProc}
	l.armed.Store(awake)
	started := make(chan error, 1)
	go l.run(started)
	if err := <-started; err != nil {
		<-l.done
		_ = w.close()
		if ownsProc {
			removeProc()
		}
		return nil, err
	}
	return l, nil
}

// Notify tells the loop that a packet departing at depart was queued. It
// is cheap when the loop is already due to wake no later than depart; it
// costs one eventfd write otherwise. Safe from any goroutine.
func (l *Loop) Notify(depart int64) {
	for {
		a := l.armed.Load()
		if depart >= a {
			return // the loop wakes by then anyway (or is releasing now)
		}
		if l.armed.CompareAndSwap(a, depart) {
			l.wakeups.Add(1)
			l.w.wake()
			return
		}
	}
}

// Realtime reports whether the loop's thread runs under SCHED_FIFO.
func (l *Loop) Realtime() bool {
	r, ok := l.w.(interface{ realtime() bool })
	return ok && r.realtime()
}

// Wakeups counts the eventfd wake-ups Notify caused.
func (l *Loop) Wakeups() uint64 { return l.wakeups.Load() }

// Close stops the loop and waits for it. Packets still queued stay in the
// queue. Close is idempotent.
func (l *Loop) Close() error {
	l.once.Do(func() {
		l.stopped.Store(true)
		l.w.wake()
		<-l.done
		l.err = l.w.close()
		if l.ownsProc {
			removeProc()
		}
	})
	return l.err
}

func (l *Loop) run(started chan<- error) {
	defer close(l.done)
	if err := l.w.init(); err != nil {
		started <- err
		return
	}
	started <- nil
	for !l.stopped.Load() {
		l.armed.Store(awake)
		l.q.Release(l.clock.Now())
		next, ok := l.q.NextDeparture()
		if !ok {
			next = never
		}
		l.armed.Store(next)
		// A packet queued while Release ran saw armed == awake and did not
		// wake us: look again now that armed is published.
		if n2, ok2 := l.q.NextDeparture(); ok2 && n2 < next {
			continue
		}
		if next != never && next <= l.clock.Now() {
			continue
		}
		l.w.wait(next, &l.armed)
	}
}
