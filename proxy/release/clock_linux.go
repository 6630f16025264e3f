package release

import (
	"math"
	"time"

	"golang.org/x/sys/unix"
)

// calibrate finds the offset between time.Since(monoStart) and the
// kernel's CLOCK_MONOTONIC, keeping the tightest of several bracketed
// readings (error below a microsecond).
func calibrate() int64 {
	best, bestWidth := int64(0), int64(math.MaxInt64)
	for range 16 {
		t0 := time.Since(monoStart)
		var ts unix.Timespec
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
			continue
		}
		t1 := time.Since(monoStart)
		if w := int64(t1 - t0); w < bestWidth {
			bestWidth = w
			best = ts.Nano() - int64(t0+(t1-t0)/2)
		}
	}
	return best
}
