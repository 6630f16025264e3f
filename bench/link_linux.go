package bench

import (
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/wanlab/wanlab/lab"
)

// linkCounter reads a lab host's link counters through a netlink handle
// opened inside its namespace.
type linkCounter struct {
	nh   *netlink.Handle
	name string
}

func openLinkCounter(h *lab.Host) (*linkCounter, error) {
	nh, err := netlink.NewHandleAt(h.Handle)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", h.NS, err)
	}
	return &linkCounter{nh: nh, name: h.Link}, nil
}

// ethHeader is what a veth counts per packet on top of the IP packet.
const ethHeader = 14

// IPBytes is the IP bytes received on the link so far: rx_bytes less the
// Ethernet header of each packet, so it compares with the proxy's and a
// spec's IP-byte rates.
func (c *linkCounter) IPBytes() (uint64, error) {
	l, err := c.nh.LinkByName(c.name)
	if err != nil {
		return 0, fmt.Errorf("link %q: %w", c.name, err)
	}
	st := l.Attrs().Statistics
	if st == nil {
		return 0, fmt.Errorf("link %q: no statistics", c.name)
	}
	return st.RxBytes - ethHeader*st.RxPackets, nil
}

func (c *linkCounter) Close() { c.nh.Close() }
