// Package release sends queued packets at their departure times with
// microsecond precision, far better than Go's timers (about 1 ms here).
//
// A loop runs on its own locked OS thread (optionally SCHED_FIFO). It
// sleeps in ppoll(2) on an eventfd with the time to the deadline as
// timeout (timer slack 1 ns), wakes a little early (Config.Early) and
// spins to the deadline; Notify writes the eventfd when a packet due
// earlier than the current deadline is queued. The waiting is built so
// that nothing but the kernel stands between the deadline and the
// release (see waiter_linux.go): the sleep is a raw system call that the
// Go runtime never sees (the thread keeps its P, so each loop adds one P
// to GOMAXPROCS while it runs), the loop passes through the scheduler by
// itself every few milliseconds before the runtime would preempt it and
// park its locked thread, it spins at most 80 % of the time so that under
// SCHED_FIFO the kernel never has to stop it to run starved time-shared
// tasks, and far from any deadline it blocks the ordinary way (an idle
// loop costs nothing). Measured figures and their commands are in
// bench_linux_test.go.
package release

import (
	"time"
)

// Clock reads the current time in nanoseconds. The loop compares it with
// the departure times it is given, so both must be on the same scale.
type Clock interface {
	Now() int64
}

// monoStart anchors Monotonic: time.Since reads the runtime's vDSO
// CLOCK_MONOTONIC without a syscall, and adding monoBase puts it on the
// kernel's CLOCK_MONOTONIC scale (the one ppoll timeouts run on).
var (
	monoStart = time.Now()
	monoBase  = calibrate()
)

// Monotonic is the real clock: nanoseconds of CLOCK_MONOTONIC, read
// through the vDSO (about 20 ns) so spinning on it is cheap.
type Monotonic struct{}

// Now returns CLOCK_MONOTONIC in nanoseconds.
func (Monotonic) Now() int64 { return monoBase + int64(time.Since(monoStart)) }

// MonotonicNow is Monotonic{}.Now as a plain function, for callers that
// stamp arrivals.
func MonotonicNow() int64 { return monoBase + int64(time.Since(monoStart)) }
