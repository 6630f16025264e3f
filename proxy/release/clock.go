// Package release sends queued packets at their departure times with
// microsecond precision: a loop on a locked OS thread sleeps on a timerfd
// with the timer slack lowered to 1 ns, wakes a little early and spins to
// the deadline, and is woken through an eventfd when a packet due earlier
// than its current deadline is queued.
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
// kernel's CLOCK_MONOTONIC scale, the one timerfd deadlines use.
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
