package release

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// timerWaiter sleeps in poll(2) on a timerfd (absolute CLOCK_MONOTONIC
// deadline, no slack: hrtimers armed through timerfd expire on time) and
// an eventfd for wake-ups, then spins on the vDSO clock for the last
// stretch. It runs on one OS thread locked for its lifetime, with
// PR_SET_TIMERSLACK at 1 ns so the kernel does not coalesce its wake-ups.
type timerWaiter struct {
	clock Clock
	early int64
	tfd   int
	efd   int
	fds   [2]unix.PollFd
	buf   [8]byte

	wantRT bool
	isRT   bool
}

func newTimerWaiter(c Clock, early time.Duration, rt bool) (*timerWaiter, error) {
	if _, ok := c.(Monotonic); !ok {
		return nil, errors.New("release: the timerfd waiter needs the Monotonic clock")
	}
	tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC|unix.TFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("release: timerfd_create: %w", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(tfd)
		return nil, fmt.Errorf("release: eventfd: %w", err)
	}
	w := &timerWaiter{clock: c, early: int64(early), tfd: tfd, efd: efd, wantRT: rt}
	w.fds[0] = unix.PollFd{Fd: int32(tfd), Events: unix.POLLIN}
	w.fds[1] = unix.PollFd{Fd: int32(efd), Events: unix.POLLIN}
	return w, nil
}

// init locks the loop's goroutine to its thread for good (the thread dies
// with it, taking the lowered slack along) and lowers the timer slack.
func (w *timerWaiter) init() error {
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("release: prctl(PR_SET_TIMERSLACK): %w", err)
	}
	if w.wantRT {
		// Thread-scoped (pid 0 = this thread); EPERM leaves it SCHED_OTHER.
		attr := unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 1}
		w.isRT = unix.SchedSetAttr(0, &attr, 0) == nil
	}
	return nil
}

func (w *timerWaiter) realtime() bool { return w.isRT }

func (w *timerWaiter) wait(deadline int64, armed *atomic.Int64) {
	if deadline == never {
		w.disarm()
		w.poll()
		return
	}
	if sleepUntil := deadline - w.early; sleepUntil > w.clock.Now() {
		var spec unix.ItimerSpec
		spec.Value = unix.NsecToTimespec(sleepUntil)
		if unix.TimerfdSettime(w.tfd, unix.TFD_TIMER_ABSTIME, &spec, nil) != nil {
			return // cannot sleep precisely: fall back to the caller's loop
		}
		if w.poll() {
			return // woken by Notify or Close
		}
	}
	// Spin for the last stretch; a Notify with an earlier deadline changes
	// armed and ends the spin at once.
	for w.clock.Now() < deadline && armed.Load() == deadline {
	}
}

func (w *timerWaiter) disarm() {
	var zero unix.ItimerSpec
	_ = unix.TimerfdSettime(w.tfd, 0, &zero, nil)
}

// poll blocks until the timer fires or the eventfd is written; it reports
// whether the eventfd woke it. Both counters are drained.
func (w *timerWaiter) poll() (woken bool) {
	for {
		w.fds[0].Revents, w.fds[1].Revents = 0, 0
		_, err := unix.Poll(w.fds[:], -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return true
		}
		break
	}
	if w.fds[0].Revents != 0 {
		_, _ = unix.Read(w.tfd, w.buf[:])
	}
	if w.fds[1].Revents != 0 {
		_, _ = unix.Read(w.efd, w.buf[:])
		return true
	}
	return false
}

var one = [8]byte{1}

func (w *timerWaiter) wake() {
	_, _ = unix.Write(w.efd, one[:])
}

func (w *timerWaiter) close() error {
	return errors.Join(unix.Close(w.tfd), unix.Close(w.efd))
}
