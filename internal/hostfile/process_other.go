//go:build !linux

package hostfile

import "errors"

// ProcessStart fails outside Linux.
func ProcessStart(int) (uint64, error) {
	return 0, errors.New("process start times are read from Linux's /proc")
}
