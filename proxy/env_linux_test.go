package proxy

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/internal/testenv"
)

// node is one namespace of the test topology with a netlink handle into it.
type node struct {
	name string
	ns   netns.NsHandle
	nl   *netlink.Handle
}

func newNode(t testing.TB) *node {
	t.Helper()
	name, ns := testenv.NetNS(t)
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	n := &node{name: name, ns: ns, nl: h}
	// Addresses usable at once: no IPv6 duplicate address detection.
	n.sysctl(t, "net/ipv6/conf/all/accept_dad", "0")
	n.sysctl(t, "net/ipv6/conf/default/accept_dad", "0")
	n.up(t, "lo")
	return n
}

func (n *node) sysctl(t testing.TB, key, val string) {
	t.Helper()
	err := nsrun.Do(n.ns, func() error {
		return os.WriteFile(filepath.Join("/proc/sys", key), []byte(val), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (n *node) up(t testing.TB, link string) {
	t.Helper()
	l, err := n.nl.LinkByName(link)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.nl.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
}

func (n *node) addr(t testing.TB, link, cidr string) {
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
		t.Fatalf("%s %s: %v", link, cidr, err)
	}
}

func (n *node) defaultVia(t testing.TB, gw string) {
	t.Helper()
	ip := net.ParseIP(gw)
	dst := &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}
	if ip.To4() == nil {
		dst = &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
	}
	if err := n.nl.RouteAdd(&netlink.Route{Dst: dst, Gw: ip}); err != nil {
		t.Fatalf("default via %s: %v", gw, err)
	}
}

// topo is client - router - server: c0 <-> ra on 10.93.1.0/24 and
// fd00:93:1::/64, rb <-> s0 on 10.93.2.0/24 and fd00:93:2::/64. The router
// forwards (kernel routing) before any proxy starts.
type topo struct {
	client, router, server *node
}

const (
	clientIP  = "10.93.1.2"
	serverIP  = "10.93.2.2"
	serverIP6 = "fd00:93:2::2"
)

func newTopo(t testing.TB) *topo {
	t.Helper()
	tp := &topo{client: newNode(t), router: newNode(t), server: newNode(t)}
	r := tp.router
	for _, v := range []struct {
		name, peer string
		peerNS     *node
	}{{"ra", "c0", tp.client}, {"rb", "s0", tp.server}} {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: v.name, TxQLen: 1000}, PeerName: v.peer,
			PeerNamespace: netlink.NsFd(int(v.peerNS.ns))}
		if err := r.nl.LinkAdd(veth); err != nil {
			t.Fatalf("veth %s: %v", v.name, err)
		}
		r.up(t, v.name)
		v.peerNS.up(t, v.peer)
	}
	tp.client.addr(t, "c0", clientIP+"/24")
	tp.client.addr(t, "c0", "fd00:93:1::2/64")
	r.addr(t, "ra", "10.93.1.1/24")
	r.addr(t, "ra", "fd00:93:1::1/64")
	r.addr(t, "rb", "10.93.2.1/24")
	r.addr(t, "rb", "fd00:93:2::1/64")
	tp.server.addr(t, "s0", serverIP+"/24")
	tp.server.addr(t, "s0", serverIP6+"/64")
	tp.client.defaultVia(t, "10.93.1.1")
	tp.client.defaultVia(t, "fd00:93:1::1")
	tp.server.defaultVia(t, "10.93.2.1")
	tp.server.defaultVia(t, "fd00:93:2::1")
	r.sysctl(t, "net/ipv4/ip_forward", "1")
	r.sysctl(t, "net/ipv6/conf/all/forwarding", "1")
	for _, n := range []*node{tp.client, r, tp.server} {
		n.settle(t)
	}
	return tp
}

// settle waits until no IPv6 address is tentative any more (link-local
// ones stay tentative until the link has carrier) and every address has
// its local route (addrconf adds it asynchronously), so dumps taken later
// are stable.
func (n *node) settle(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !n.settled(t) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: addresses not settled after 10s", n.name)
		}
		time.Sleep(time.Millisecond)
	}
}

func (n *node) settled(t testing.TB) bool {
	addrs, err := n.nl.AddrList(nil, netlink.FAMILY_V6)
	if err != nil {
		t.Fatal(err)
	}
	routes, err := n.nl.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Table: unix.RT_TABLE_LOCAL}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
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

// dump is a textual netlink dump of a namespace: links, addresses, routes
// of every table and rules, each sorted, plus the sysctls a proxy touches.
func (n *node) dump(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	links, err := n.nl.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range links {
		a := l.Attrs()
		lines = append(lines, fmt.Sprintf("link %d %s %s mtu %d flags %v master %d", a.Index, a.Name, l.Type(), a.MTU, a.Flags, a.MasterIndex))
	}
	addrs, err := n.nl.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		lines = append(lines, fmt.Sprintf("addr %d %s flags %d scope %d", a.LinkIndex, a.IPNet, a.Flags, a.Scope))
	}
	routes, err := n.nl.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		lines = append(lines, fmt.Sprintf("route table %d dst %v gw %v dev %d src %v proto %d scope %d type %d prio %d",
			r.Table, r.Dst, r.Gw, r.LinkIndex, r.Src, r.Protocol, r.Scope, r.Type, r.Priority))
	}
	rules, err := n.nl.RuleList(netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		lines = append(lines, fmt.Sprintf("rule %d prio %d table %d iif %q oif %q src %v dst %v",
			r.Family, r.Priority, r.Table, r.IifName, r.OifName, r.Src, r.Dst))
	}
	err = nsrun.Do(n.ns, func() error {
		for _, pattern := range []string{"net/ipv4/ip_forward", "net/ipv4/conf/*/rp_filter", "net/ipv4/conf/*/forwarding",
			"net/ipv6/conf/*/forwarding", "net/ipv4/conf/*/accept_local"} {
			files, _ := filepath.Glob(filepath.Join("/proc/sys", pattern))
			for _, f := range files {
				v, err := os.ReadFile(f)
				if err != nil {
					return err
				}
				lines = append(lines, fmt.Sprintf("sysctl %s = %s", strings.TrimPrefix(f, "/proc/sys/"), strings.TrimSpace(string(v))))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

func diffLines(a, b string) string {
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

// in runs fn inside n (sockets it opens stay there).
func (n *node) in(t testing.TB, fn func() error) {
	t.Helper()
	if err := nsrun.Do(n.ns, fn); err != nil {
		t.Fatal(err)
	}
}

// pinger sends ICMP echo requests from the client to dst over a raw
// socket and measures round-trip times.
type pinger struct {
	conn *net.IPConn
	dst  *net.IPAddr
	id   uint16
	seq  uint16
	buf  []byte
}

func newPinger(t testing.TB, n *node, dst string) *pinger {
	t.Helper()
	p := &pinger{dst: &net.IPAddr{IP: net.ParseIP(dst)}, id: uint16(os.Getpid()), buf: make([]byte, 1500)}
	n.in(t, func() error {
		c, err := net.ListenIP("ip4:icmp", &net.IPAddr{IP: net.IPv4zero})
		p.conn = c
		return err
	})
	t.Cleanup(func() { p.conn.Close() })
	return p
}

// rtt sends one echo request and waits for its reply (timeout: error).
func (p *pinger) rtt(timeout time.Duration) (time.Duration, error) {
	p.seq++
	msg := []byte{8, 0, 0, 0, byte(p.id >> 8), byte(p.id), byte(p.seq >> 8), byte(p.seq), 'w', 'a', 'n', 'l', 'a', 'b'}
	cs := icmpChecksum(msg)
	msg[2], msg[3] = byte(cs>>8), byte(cs)
	start := time.Now()
	if _, err := p.conn.WriteToIP(msg, p.dst); err != nil {
		return 0, err
	}
	deadline := start.Add(timeout)
	p.conn.SetReadDeadline(deadline)
	for {
		n, _, err := p.conn.ReadFromIP(p.buf)
		if err != nil {
			return 0, err
		}
		r := p.buf[:n]
		if n >= 8 && r[0] == 0 && uint16(r[4])<<8|uint16(r[5]) == p.id && uint16(r[6])<<8|uint16(r[7]) == p.seq {
			return time.Since(start), nil
		}
	}
}

// minRTT pings count times and returns the smallest RTT, retrying a lost
// first echo (neighbour resolution). The minimum is what the path adds:
// on a shared machine single echoes can be late by scheduling, never
// early.
func (p *pinger) minRTT(t testing.TB, count int) time.Duration {
	t.Helper()
	var rtts []time.Duration
	misses := 0
	for len(rtts) < count {
		d, err := p.rtt(2 * time.Second)
		if err != nil {
			if misses++; misses > 3 {
				t.Fatalf("ping %s: %v", p.dst, err)
			}
			continue
		}
		rtts = append(rtts, d)
	}
	sort.Slice(rtts, func(i, j int) bool { return rtts[i] < rtts[j] })
	return rtts[0]
}

func icmpChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}
