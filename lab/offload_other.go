//go:build !linux

package lab

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Offload is a segmentation or receive offload of a network device.
type Offload uint32

// Offloads (values as on Linux).
const (
	OffloadTSO Offload = 0x1f
	OffloadGSO Offload = 0x24
	OffloadGRO Offload = 0x2c
)

// SetOffload is not supported outside Linux.
func SetOffload(ns netns.NsHandle, ifname string, o Offload, on bool) error {
	return fmt.Errorf("ethtool %s: not supported on %s", ifname, runtime.GOOS)
}

// Offloaded is not supported outside Linux.
func Offloaded(ns netns.NsHandle, ifname string, o Offload) (bool, error) {
	return false, fmt.Errorf("ethtool %s: not supported on %s", ifname, runtime.GOOS)
}
