//go:build !linux

package release

import (
	"fmt"
	"runtime"
	"time"
)

func newPollWaiter(Clock, time.Duration, bool) (waiter, error) {
	return nil, fmt.Errorf("release: precise release loop not supported on %s", runtime.GOOS)
}
