//go:build !linux

package hostfile

import "errors"

// ProcessStart fails outside Linux.
func ProcessStart(int) (uint64, error) {
	return 0, errors.New("process start times are read from Linux's /proc")
}

// Running is false outside Linux: there is no /proc to ask.
func Running(int, uint64) bool { return false }
