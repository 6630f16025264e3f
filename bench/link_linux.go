package bench

import (
	"fmt"
	"net"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

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

// IPBytes is the IP bytes received on the link so far, rx_bytes less the
// Ethernet header of each packet (so it compares with the proxy's and a
// spec's IP-byte rates), and the packets (skbs: a GRO/GSO super-packet
// counts once, with one set of headers).
func (c *linkCounter) IPBytes() (bytes, packets uint64, err error) {
	l, err := c.nh.LinkByName(c.name)
	if err != nil {
		return 0, 0, fmt.Errorf("link %q: %w", c.name, err)
	}
	st := l.Attrs().Statistics
	if st == nil {
		return 0, 0, fmt.Errorf("link %q: no statistics", c.name)
	}
	return st.RxBytes - ethHeader*st.RxPackets, st.RxPackets, nil
}

// dataSegsIn is a TCP socket's count of data segments received, a
// super-packet counting as the segments it carries (tcpi_data_segs_in),
// and the IP+TCP header length of each (IPv4, with timestamps if
// negotiated).
func dataSegsIn(c *net.TCPConn) (segs uint64, hdr uint64, err error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var info *unix.TCPInfo
	var serr error
	if err := rc.Control(func(fd uintptr) { info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
		return 0, 0, err
	}
	if serr != nil {
		return 0, 0, fmt.Errorf("TCP_INFO: %w", serr)
	}
	hdr = 20 + 20
	if info.Options&tcpiOptTimestamps != 0 {
		hdr += 12
	}
	return uint64(info.Data_segs_in), hdr, nil
}

// tcpiOptTimestamps is TCPI_OPT_TIMESTAMPS of linux/tcp.h.
const tcpiOptTimestamps = 1

// wireSample is the receiver's link and socket counters at one instant.
type wireSample struct {
	bytes, packets, segs uint64
	// before and after bracket the reads.
	before, after time.Time
}

// wireBytes is the on-wire IP bytes of the receiver's TCP data between
// two samples: the link's IP bytes plus the headers of the segments that
// crossed inside super-packets (segments the socket counted beyond the
// link's packets), as a kernel path forwards GSO packets whole.
func wireBytes(a, b wireSample, hdr uint64) uint64 {
	n := b.bytes - a.bytes
	if segs, pkts := b.segs-a.segs, b.packets-a.packets; segs > pkts {
		n += (segs - pkts) * hdr
	}
	return n
}

func (c *linkCounter) Close() { c.nh.Close() }
