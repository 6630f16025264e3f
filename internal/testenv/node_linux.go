package testenv

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/nsrun"
)

// Node is a network namespace with a netlink handle into it, for tests
// that build their own topology link by link. A test that needs a
// client-router-server trio uses Lab instead.
type Node struct {
	Name string
	NS   netns.NsHandle
	NL   *netlink.Handle
}

// NewNode creates a fresh namespace (removed at test end) with loopback up
// and IPv6 duplicate address detection off, so addresses are usable at
// once and a snapshot does not race with their tentative flag clearing.
func NewNode(t testing.TB) *Node {
	t.Helper()
	name, ns := NetNS(t)
	n := NodeAt(t, name, ns)
	n.Sysctl(t, "net/ipv6/conf/all/accept_dad", "0")
	n.Sysctl(t, "net/ipv6/conf/default/accept_dad", "0")
	n.Up(t, "lo")
	return n
}

// NodeAt opens a netlink handle into an existing namespace; the handle is
// closed at test end, the namespace stays the caller's.
func NodeAt(t testing.TB, name string, ns netns.NsHandle) *Node {
	t.Helper()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatalf("netlink in %s: %v", name, err)
	}
	t.Cleanup(h.Close)
	return &Node{Name: name, NS: ns, NL: h}
}

// Do runs fn inside n (sockets it opens stay there) and fails the test on
// its error.
func (n *Node) Do(t testing.TB, fn func() error) {
	t.Helper()
	if err := nsrun.Do(n.NS, fn); err != nil {
		t.Fatal(err)
	}
}

// Sysctl writes /proc/sys/<key> inside n; key is a path
// ("net/ipv4/ip_forward").
func (n *Node) Sysctl(t testing.TB, key, val string) {
	t.Helper()
	n.Do(t, func() error {
		return os.WriteFile(filepath.Join("/proc/sys", key), []byte(val), 0o644)
	})
}

// Up sets a link of n up.
func (n *Node) Up(t testing.TB, link string) {
	t.Helper()
	l, err := n.NL.LinkByName(link)
	if err != nil {
		t.Fatalf("%s: link %s: %v", n.Name, link, err)
	}
	if err := n.NL.LinkSetUp(l); err != nil {
		t.Fatalf("%s: link %s up: %v", n.Name, link, err)
	}
}

// Addr adds an address ("10.0.0.1/24", "fd00::1/64") to a link of n,
// without duplicate address detection.
func (n *Node) Addr(t testing.TB, link, cidr string) {
	t.Helper()
	l, err := n.NL.LinkByName(link)
	if err != nil {
		t.Fatalf("%s: link %s: %v", n.Name, link, err)
	}
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		t.Fatal(err)
	}
	a.Flags = unix.IFA_F_NODAD
	if err := n.NL.AddrAdd(l, a); err != nil {
		t.Fatalf("%s: addr %s on %s: %v", n.Name, cidr, link, err)
	}
}

// DefaultVia adds the default route of gw's family via gw.
func (n *Node) DefaultVia(t testing.TB, gw string) {
	t.Helper()
	ip := net.ParseIP(gw)
	dst := &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}
	if ip.To4() == nil {
		dst = &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
	}
	if err := n.NL.RouteAdd(&netlink.Route{Dst: dst, Gw: ip}); err != nil {
		t.Fatalf("%s: default via %s: %v", n.Name, gw, err)
	}
}

// Veth adds a veth pair, name in n and peer in peerNode (nil: n as well),
// sets both ends up and waits until both are operationally up. Both get
// the kernel's default queue length, as `ip link add` gives them. Until
// the link watch has seen the carrier of the end set up first, that end
// transmits into noop_qdisc, which drops everything (see lab.New); the
// wait makes a test's first packet arrive instead of costing it a
// retransmission, or a loss in what it counts.
func (n *Node) Veth(t testing.TB, name, peer string, peerNode *Node) {
	t.Helper()
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, TxQLen: -1}, PeerName: peer, PeerTxQLen: -1}
	if peerNode != nil {
		v.PeerNamespace = netlink.NsFd(int(peerNode.NS))
	} else {
		peerNode = n
	}
	if err := n.NL.LinkAdd(v); err != nil {
		t.Fatalf("%s: veth %s/%s: %v", n.Name, name, peer, err)
	}
	n.Up(t, name)
	peerNode.Up(t, peer)
	for _, end := range []struct {
		node *Node
		link string
	}{{n, name}, {peerNode, peer}} {
		WaitFor(t, end.node.Name+": "+end.link+" operationally up", func() bool {
			l, err := end.node.NL.LinkByName(end.link)
			return err == nil && l.Attrs().OperState == netlink.OperUp
		})
	}
}

// WaitSettled waits until every address of n is no longer tentative and
// has its local route, and each named link is operationally up with an
// IPv6 link-local address (linkwatch and addrconf work asynchronously), so
// that a Snapshot taken next is stable.
func (n *Node) WaitSettled(t testing.TB, links ...string) {
	t.Helper()
	WaitFor(t, n.Name+": addresses settled", func() bool { return n.settled(links) })
}

func (n *Node) settled(links []string) bool {
	for _, name := range links {
		l, err := n.NL.LinkByName(name)
		if err != nil || l.Attrs().OperState != netlink.OperUp {
			return false
		}
		addrs, err := n.NL.AddrList(l, netlink.FAMILY_V6)
		if err != nil {
			return false
		}
		linkLocal := false
		for _, a := range addrs {
			linkLocal = linkLocal || a.IP.IsLinkLocalUnicast()
		}
		if !linkLocal {
			return false
		}
	}
	addrs, err := n.NL.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return false
	}
	routes, err := n.NL.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_LOCAL}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return false
	}
	local := map[string]bool{}
	for _, r := range routes {
		if r.Dst != nil {
			local[r.Dst.IP.String()] = true
		}
	}
	for _, a := range addrs {
		if a.Flags&unix.IFA_F_TENTATIVE != 0 || !local[a.IP.String()] {
			return false
		}
	}
	return true
}
