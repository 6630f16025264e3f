//go:build !linux

package pair

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netlink"
)

// setGSOMaxSegs is Linux's alone (the guests run Linux).
func setGSOMaxSegs(netlink.Link, int) error {
	return fmt.Errorf("gso_max_segs: not supported on %s", runtime.GOOS)
}
