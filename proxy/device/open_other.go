//go:build !linux

package device

import (
	"fmt"
	"runtime"
)

// Open is Linux-only: TUN backends need /dev/net/tun.
func Open(backend, name string, mtu int) (Device, error) {
	if err := checkBackend(backend); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("tun %s: %w: not supported on %s", name, ErrUnavailable, runtime.GOOS)
}
