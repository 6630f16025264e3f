//go:build !linux

package device

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Open is Linux-only: TUN backends need /dev/net/tun.
func Open(backend, name string, mtu int) (Device, error) {
	return OpenIn(netns.None(), backend, name, mtu)
}

// OpenQueuesIn is Linux-only, like Open.
func OpenQueuesIn(ns netns.NsHandle, backend, name string, mtu, _ int) (Device, error) {
	return OpenIn(ns, backend, name, mtu)
}

// MaxQueues bounds the queues of one TUN.
const MaxQueues = 64

// OpenIn is Linux-only, like Open.
func OpenIn(_ netns.NsHandle, backend, name string, _ int) (Device, error) {
	if err := checkBackend(backend); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("tun %s: %w: not supported on %s", name, ErrUnavailable, runtime.GOOS)
}
