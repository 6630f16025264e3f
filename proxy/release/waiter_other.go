//go:build !linux

package release

import (
	"fmt"
	"runtime"
	"time"
)

func newTimerWaiter(Clock, time.Duration, bool) (waiter, error) {
	return nil, fmt.Errorf("release: precise release loop not supported on %s", runtime.GOOS)
}
