package release

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxBlock bounds one ppoll: the loop's thread holds its P while it
// blocks (see pollWaiter), so a stop-the-world that could not interrupt
// it with a signal (GODEBUG=asyncpreemptoff=1) waits at most this long.
// Each expiry costs about a microsecond of CPU, and expiries only happen
// within parkAhead of a deadline.
const maxBlock = 2 * time.Millisecond

// The loop's goroutine never blocks in the Go scheduler, so after 10 ms
// on one scheduling tick the runtime's monitor (sysmon, forcePreemptNS in
// runtime/proc.go) preempts it. For a goroutine locked to its thread that
// means handing the P to another thread, which must be scheduled by the
// kernel to hand it back (measured: 0.25-1 ms on this VM, an idle vCPU
// is slow to wake). The waiter therefore goes through the scheduler
// itself, unlocked so that its own thread picks it up again at once:
// every yieldEvery when the next deadline leaves at least yieldRoom, and
// after yieldForce in any case.
const (
	yieldEvery = 4 * time.Millisecond
	yieldForce = 8 * time.Millisecond
	yieldRoom  = 20 * time.Microsecond
)

// A loop under SCHED_FIFO that spins without a break starves the
// time-shared tasks of its CPU, and the kernel's fair server (Linux 6.12
// and later; RT throttling before) then takes the CPU away from it for up
// to 50 ms once a second to run them (measured: p99 28-32 ms, max 46-49
// ms over 5 s at 100k packets/s, where the 10 µs gap is below the spin
// window).
// So the loop spins at most spinShare percent of each spinWindow; past
// that, it sleeps until spinOffLag after each deadline and releases what
// is due by then in one go: those packets leave late by spinOffLag plus
// the kernel's wake-up latency (10-20 µs on an idle vCPU here), and the
// CPU is free for most of the time in between, even at 100k packets/s.
const (
	spinWindow = 10 * time.Millisecond
	spinShare  = 80
	spinOffLag = 20 * time.Microsecond
)

// A loop with nothing queued, or whose next deadline is more than
// parkAhead away, blocks in an ordinary system call instead, giving the P
// back (no CPU at all while idle), and returns to the raw wait handBack
// before the deadline: far more than the runtime needs to give it a P
// back even when its monitor thread is slow to run.
const (
	parkAhead = 20 * time.Millisecond
	handBack  = 10 * time.Millisecond
)

// pollWaiter sleeps in ppoll(2) on an eventfd with the time left to the
// deadline (minus the spin window) as timeout, then spins on the vDSO
// clock for the last stretch. It runs on an OS thread it is locked to
// (see yield for the exception), with PR_SET_TIMERSLACK at 1 ns
// (SCHED_FIFO threads have no slack at all) so the kernel expires the
// timeout on time.
//
// Every system call of the wait is a raw one: the Go runtime is not told
// that the thread blocks. With ordinary (runtime-aware) calls, the
// scheduler's monitor may take the P away from the sleeping thread or
// hold the goroutine's scan bit while it looks at it; the thread then
// wakes on time but cannot run Go code until another thread has moved
// (measured: 0.5-16 ms at 10k packets/s with SCHED_FIFO on a loaded
// machine, the realtime thread busy-waiting for a time-shared one). A raw
// call keeps the P, so Start adds one P per running loop (see procs.go),
// and a stop-the-world interrupts the ppoll with its preemption signal
// (EINTR), bounded in any case by maxBlock. Far from any deadline the
// loop blocks the ordinary way instead (see parkAhead).
type pollWaiter struct {
	clock Clock
	early int64
	efd   int
	fds   [1]unix.PollFd
	buf   [8]byte

	wantRT bool
	isRT   bool
	orig   unix.SchedAttr // the thread's policy before init, put back on a thread the loop leaves

	windowStart int64 // start of the current spin accounting window
	spun        int64 // nanoseconds spun in it

	tid       int   // the thread the settings were applied to
	lastYield int64 // clock reading at the last yield
	moves     int   // yields that resumed on another thread
}

func newPollWaiter(c Clock, early time.Duration, rt bool) (*pollWaiter, error) {
	if _, ok := c.(Monotonic); !ok {
		return nil, errors.New("release: the ppoll waiter needs the Monotonic clock")
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("release: eventfd: %w", err)
	}
	w := &pollWaiter{clock: c, early: int64(early), efd: efd, wantRT: rt}
	w.fds[0] = unix.PollFd{Fd: int32(efd), Events: unix.POLLIN}
	return w, nil
}

// init locks the loop's goroutine to its thread (released only for the
// moment of a yield; when the loop ends, the runtime retires the thread
// it is locked to, taking the lowered slack and the policy along), lowers
// the timer slack and sets the scheduling policy.
func (w *pollWaiter) init() error {
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("release: prctl(PR_SET_TIMERSLACK): %w", err)
	}
	if orig, err := unix.SchedGetAttr(0, 0); err == nil {
		w.orig = *orig
	}
	w.setSched()
	w.tid = unix.Gettid()
	w.lastYield = w.clock.Now()
	return nil
}

// yield passes through the Go scheduler so that sysmon sees a new
// scheduling tick. Unlocked, the goroutine goes to the global run queue
// and its own thread, looking for work right away, takes it back in a
// microsecond or two (a locked goroutine would need another thread to
// wake). Should another thread win the race, the settings move along:
// slack and SCHED_FIFO on the new thread, the original policy back on
// the old one (which keeps the 1 ns slack: its timed waits are merely
// more punctual).
func (w *pollWaiter) yield(now int64) {
	runtime.UnlockOSThread()
	runtime.Gosched()
	runtime.LockOSThread()
	w.lastYield = now
	tid := unix.Gettid()
	if tid == w.tid {
		return
	}
	w.moves++
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	if w.isRT {
		w.setSched()
		orig := w.orig
		_ = unix.SchedSetAttr(w.tid, &orig, 0)
	}
	w.tid = tid
}

// setSched puts the current thread under SCHED_FIFO priority 1 when the
// loop asked for it and may (CAP_SYS_NICE); otherwise the thread stays
// as it was. A short EEVDF slice (sched_attr.sched_runtime) for the
// time-shared case was tried and measured no better under contention: the
// spinning thread uses more than its fair share, so it is not eligible to
// preempt anyway.
func (w *pollWaiter) setSched() {
	if w.wantRT {
		attr := unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 1}
		w.isRT = unix.SchedSetAttr(0, &attr, 0) == nil
	}
}

func (w *pollWaiter) realtime() bool { return w.isRT }

func (w *pollWaiter) wait(deadline int64, armed *atomic.Int64) {
	early := w.early
	if start := w.clock.Now(); start-w.windowStart >= int64(spinWindow) {
		w.windowStart, w.spun = start, 0
	} else if w.spun >= int64(spinWindow)*spinShare/100 {
		early = -int64(spinOffLag) // spin budget spent: sleep past the deadline
	}
	sleepUntil := deadline - early
	for {
		now := w.clock.Now()
		if deadline != never && sleepUntil <= now {
			break
		}
		if deadline == never || sleepUntil-now > int64(parkAhead) {
			// Nothing due soon: block the runtime's way and let the P go
			// (an idle loop then costs nothing), until handBack before
			// the deadline, which leaves ample time to get a P back.
			timeout := int64(-1)
			if deadline != never {
				timeout = sleepUntil - int64(handBack) - now
			}
			if w.park(timeout) {
				return
			}
			if armed.Load() != deadline {
				return
			}
			continue
		}
		if since := now - w.lastYield; since >= int64(yieldEvery) &&
			(sleepUntil-now >= int64(yieldRoom) || since >= int64(yieldForce)) {
			w.yield(now)
			now = w.clock.Now()
		}
		if left := sleepUntil - now; left > 0 && w.poll(min(left, int64(maxBlock))) {
			return // woken by Notify or Close
		}
		if armed.Load() != deadline {
			return
		}
	}
	// Spin for the last stretch; a Notify with an earlier deadline changes
	// armed and ends the spin at once.
	t0 := w.clock.Now()
	t := t0
	for t < deadline && armed.Load() == deadline {
		t = w.clock.Now()
	}
	w.spun += t - t0
}

// park blocks in an ordinary (runtime-aware) ppoll for timeout
// nanoseconds (negative: until woken) and reports whether the eventfd woke
// it. The runtime may hand the P to another thread meanwhile and the loop
// takes an idle one (there is one more, see procs.go) when it returns.
func (w *pollWaiter) park(timeout int64) (woken bool) {
	var ts *unix.Timespec
	if timeout >= 0 {
		t := unix.NsecToTimespec(timeout)
		ts = &t
	}
	w.fds[0].Revents = 0
	n, err := unix.Ppoll(w.fds[:], ts, nil)
	if err != nil || n == 0 {
		return false
	}
	_, _ = unix.Read(w.efd, w.buf[:])
	return true
}

// poll blocks in a raw ppoll for at most timeout nanoseconds and reports
// whether the eventfd woke it (draining it). A timeout or a signal (EINTR)
// returns false. It is not inlined so that every round of wait passes a
// function prologue, the point where the runtime preempts a goroutine
// whose ppoll its signal interrupted.
//
//go:noinline
func (w *pollWaiter) poll(timeout int64) (woken bool) {
	ts := unix.NsecToTimespec(timeout)
	w.fds[0].Revents = 0
	n, _, errno := unix.RawSyscall6(unix.SYS_PPOLL,
		uintptr(unsafe.Pointer(&w.fds[0])), uintptr(len(w.fds)),
		uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	if errno != 0 || n == 0 {
		return false
	}
	_, _, _ = unix.RawSyscall(unix.SYS_READ, uintptr(w.efd), uintptr(unsafe.Pointer(&w.buf[0])), uintptr(len(w.buf)))
	return true
}

var one = [8]byte{1}

// wake writes the eventfd with a raw call: it never blocks (the counter
// would have to reach 2^64-1), so the runtime need not hand the caller's
// P to anyone.
func (w *pollWaiter) wake() {
	_, _, _ = unix.RawSyscall(unix.SYS_WRITE, uintptr(w.efd), uintptr(unsafe.Pointer(&one[0])), uintptr(len(one)))
}

func (w *pollWaiter) close() error {
	return unix.Close(w.efd)
}
