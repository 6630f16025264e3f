package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/nsrun"
)

// waitIfaces waits until both interfaces exist and are up in namespace ns
// ("" for the proxy's own), polling netlink, for at most within: a
// container's links are often added after its entrypoint starts
// (containerlab wires a node once it runs). It returns at once when they
// are there, and names the ones still missing when time runs out.
func waitIfaces(ctx context.Context, ns string, ifaces [2]string, within time.Duration) error {
	// The proxy's own namespace needs no setns (which a container
	// without CAP_SYS_ADMIN may not do).
	nl, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if ns != "" {
		h, oerr := nsrun.Open(ns)
		if oerr != nil {
			return oerr
		}
		defer h.Close()
		nl, err = netlink.NewHandleAt(h)
	}
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer nl.Close()
	missing := func() []string {
		var m []string
		for _, name := range ifaces {
			l, err := nl.LinkByName(name)
			if err != nil {
				m = append(m, name)
			} else if l.Attrs().Flags&net.FlagUp == 0 {
				m = append(m, name+" (down)")
			}
		}
		return m
	}
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		m := missing()
		if len(m) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("--wait-ifaces %v: still missing %s", within, strings.Join(m, ", "))
		case <-tick.C:
		}
	}
}
