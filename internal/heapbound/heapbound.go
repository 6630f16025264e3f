// Package heapbound keeps a process's heap near what it holds live, for
// programs whose live data is small but churns fast (the analyzer keeps
// the open connections of a capture and drops millions of finished ones).
//
// Go's collector lets the heap grow to twice the live data (GOGC=100) and
// returns freed pages lazily, so a program holding 30 MB live peaks near
// three times that. A soft memory limit (runtime/debug.SetMemoryLimit)
// caps the heap, but a fixed one turns into a collection after every few
// allocations once the live data nears it. Start sets the limit to a floor
// and raises it with the live heap, checking on a ticker, so that the
// collector always has headroom (see Limit): small live data stays under
// the floor, large live data grows as under GOGC=50.
package heapbound

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// checkEvery is how often the live heap is read.
const checkEvery = 20 * time.Millisecond

// Start bounds the heap to floor bytes, raised with the live heap as
// described above, until the returned stop is called (which restores the
// previous limit). A limit already set through GOMEMLIMIT is left alone.
func Start(floor int64) (stop func()) {
	prev := debug.SetMemoryLimit(-1)
	if prev != math.MaxInt64 {
		return func() {} // the user chose a limit
	}
	debug.SetMemoryLimit(floor)
	prevGC := debug.SetGCPercent(-1)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		t := time.NewTicker(checkEvery)
		defer t.Stop()
		limit := floor
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			metrics.Read(sample)
			if sample[0].Value.Kind() != metrics.KindUint64 {
				continue
			}
			if l := Limit(floor, int64(sample[0].Value.Uint64())); l > limit {
				limit = l
				debug.SetMemoryLimit(limit)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		debug.SetGCPercent(prevGC)
		debug.SetMemoryLimit(prev)
	}
}

// Limit is the limit for a live heap of live bytes: the live heap plus
// headroom for what the collector has yet to free, half the live heap or a
// quarter of the floor, whichever is more, and never under the floor. (GOGC=100
// gives the live heap as headroom: this costs a collection twice as often
// when the live data is large, and saves a third of the memory.)
func Limit(floor, live int64) int64 {
	return max(floor, live+max(live/2, floor/4))
}
