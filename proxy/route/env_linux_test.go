package route

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/internal/testenv"
)

// testNS is a fresh namespace with a netlink handle into it.
type testNS struct {
	name string
	ns   netns.NsHandle
	nl   *netlink.Handle
}

func newNS(t *testing.T) *testNS {
	t.Helper()
	name, ns := testenv.NetNS(t)
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	n := &testNS{name: name, ns: ns, nl: h}
	// No duplicate address detection: addresses are usable at once and a
	// snapshot does not race with their tentative flag clearing.
	n.sysctl(t, "net/ipv6/conf/all/accept_dad", "0")
	n.sysctl(t, "net/ipv6/conf/default/accept_dad", "0")
	lo, err := h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		t.Fatal(err)
	}
	return n
}

// veth adds a veth pair, name in n and peer in peerNS (nil = n), both up.
func (n *testNS) veth(t *testing.T, name, peer string, peerNS *testNS) {
	t.Helper()
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer}
	if peerNS != nil {
		v.PeerNamespace = netlink.NsFd(int(peerNS.ns))
	} else {
		peerNS = n
	}
	if err := n.nl.LinkAdd(v); err != nil {
		t.Fatalf("veth %s: %v", name, err)
	}
	for _, x := range []struct {
		h    *netlink.Handle
		name string
	}{{n.nl, name}, {peerNS.nl, peer}} {
		l, err := x.h.LinkByName(x.name)
		if err != nil {
			t.Fatal(err)
		}
		if err := x.h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
}

func (n *testNS) addr(t *testing.T, link, cidr string) {
	t.Helper()
	l, err := n.nl.LinkByName(link)
	if err != nil {
		t.Fatal(err)
	}
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		t.Fatal(err)
	}
	a.Flags = unix.IFA_F_NODAD
	if err := n.nl.AddrAdd(l, a); err != nil {
		t.Fatalf("addr %s on %s: %v", cidr, link, err)
	}
}

func (n *testNS) defaultVia(t *testing.T, gw string) {
	t.Helper()
	ip := net.ParseIP(gw)
	r := &netlink.Route{Gw: ip, Dst: defaultDst(4)}
	if ip.To4() == nil {
		r.Dst = defaultDst(6)
	}
	if err := n.nl.RouteAdd(r); err != nil {
		t.Fatalf("default via %s: %v", gw, err)
	}
}

func (n *testNS) sysctl(t *testing.T, path, v string) {
	t.Helper()
	err := nsrun.Do(n.ns, func() error { return os.WriteFile("/proc/sys/"+path, []byte(v), 0) })
	if err != nil {
		t.Fatal(err)
	}
}

// openTUN creates a non-persistent TUN device in n: it disappears when
// the returned file is closed, as when its process dies.
func (n *testNS) openTUN(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := openTUNIn(n.ns, name)
	if err != nil {
		t.Fatalf("TUN %s: %v", name, err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func openTUNIn(ns netns.NsHandle, name string) (*os.File, error) {
	var f *os.File
	err := nsrun.Do(ns, func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			unix.Close(fd)
			return err
		}
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			return err
		}
		f = os.NewFile(uintptr(fd), name)
		return nil
	})
	return f, err
}

func netlinkHandleAt(ns netns.NsHandle) (*netlink.Handle, error) { return netlink.NewHandleAt(ns) }

// addVeth adds an up veth pair inside n.
func addVeth(n *testNS, name, peer string) error {
	if err := n.nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer}); err != nil {
		return err
	}
	for _, x := range []string{name, peer} {
		l, err := n.nl.LinkByName(x)
		if err != nil {
			return err
		}
		if err := n.nl.LinkSetUp(l); err != nil {
			return err
		}
	}
	return nil
}

// snapshot renders everything Apply may touch in n: links, addresses,
// routes of every table, rules, and the forwarding-related sysctls of
// every interface. Two equal snapshots mean the namespace is as it was.
func (n *testNS) snapshot(t *testing.T) string {
	t.Helper()
	var lines []string
	add := func(format string, a ...any) { lines = append(lines, fmt.Sprintf(format, a...)) }
	links, err := n.nl.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		a := l.Attrs()
		add("link %d %s %s mtu %d flags %v txqlen %d master %d", a.Index, a.Name, l.Type(), a.MTU, a.Flags, a.TxQLen, a.MasterIndex)
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		addrs, err := n.nl.AddrList(nil, fam)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			add("addr %d %s flags %d scope %d", a.LinkIndex, a.IPNet, a.Flags, a.Scope)
		}
		routes, err := n.nl.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range routes {
			add("route fam %d table %d dst %v src %v gw %v dev %d proto %d scope %d type %d prio %d",
				fam, r.Table, r.Dst, r.Src, r.Gw, r.LinkIndex, r.Protocol, r.Scope, r.Type, r.Priority)
		}
		rules, err := n.nl.RuleList(fam)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			add("rule fam %d %d iif %q oif %q table %d src %v dst %v", fam, r.Priority, r.IifName, r.OifName, r.Table, r.Src, r.Dst)
		}
	}
	err = nsrun.Do(n.ns, func() error {
		var paths []string
		for _, g := range []string{"net/ipv4/ip_forward", "net/ipv4/conf/*/forwarding", "net/ipv4/conf/*/rp_filter",
			"net/ipv6/conf/*/forwarding", "net/ipv6/conf/*/force_forwarding", "net/ipv6/conf/*/disable_ipv6",
			"net/ipv6/conf/*/addr_gen_mode"} {
			m, _ := filepath.Glob("/proc/sys/" + g)
			paths = append(paths, m...)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			add("sysctl %s=%s", strings.TrimPrefix(p, "/proc/sys/"), strings.TrimSpace(string(b)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// diff shows the lines that differ between two snapshots.
func diff(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	var out []string
	for l := range ma {
		if !mb[l] {
			out = append(out, "- "+l)
		}
	}
	for l := range mb {
		if !ma[l] {
			out = append(out, "+ "+l)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

func netnsOpen(name string) (netns.NsHandle, error) { return nsrun.Open(name) }

// waitReady waits until the links are operationally up and the kernel has
// installed the local routes of their addresses (linkwatch and addrconf
// work asynchronously), so that a snapshot taken next is stable.
func (n *testNS) waitReady(t *testing.T, links ...string) {
	t.Helper()
	waitFor(t, func() bool {
		for _, name := range links {
			l, err := n.nl.LinkByName(name)
			if err != nil || l.Attrs().OperState != netlink.OperUp {
				return false
			}
			addrs, err := n.nl.AddrList(l, netlink.FAMILY_ALL)
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
			for _, a := range addrs {
				rs, err := n.nl.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_LOCAL, Dst: &net.IPNet{IP: a.IP, Mask: net.CIDRMask(8*len(a.IP), 8*len(a.IP))}},
					netlink.RT_FILTER_TABLE|netlink.RT_FILTER_DST)
				if err != nil || len(rs) == 0 {
					return false
				}
			}
		}
		return true
	})
}
