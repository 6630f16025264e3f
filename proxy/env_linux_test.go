package proxy

import (
	"context"
	"net"
	"net/netip"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/labtest"
)

// node is one host of the test topology.
type node struct{ *testenv.Node }

// addr adds an address to a link of n.
func (n *node) addr(t testing.TB, link, cidr string) { n.Addr(t, link, cidr) }

// in runs fn inside n (sockets it opens stay there).
func (n *node) in(t testing.TB, fn func() error) { n.Do(t, fn) }

// topo is client - router - server, a lab: c0 <-> ra on 10.93.1.0/24 and
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
	l := labtest.Lab(t, context.Background(), lab.Config{
		ClientLink: "c0", RouterClientLink: "ra", RouterServerLink: "rb", ServerLink: "s0",
		ClientNet4: netip.MustParsePrefix("10.93.1.0/24"), ServerNet4: netip.MustParsePrefix("10.93.2.0/24"),
		ClientNet6: netip.MustParsePrefix("fd00:93:1::/64"), ServerNet6: netip.MustParsePrefix("fd00:93:2::/64"),
	})
	tp := &topo{
		client: &node{testenv.NodeAt(t, l.Client.NS, l.Client.Handle)},
		router: &node{testenv.NodeAt(t, l.Router.NS, l.Router.Handle)},
		server: &node{testenv.NodeAt(t, l.Server.NS, l.Server.Handle)},
	}
	// Snapshots of the router taken later must not see addrconf finish.
	for _, n := range []*node{tp.client, tp.router, tp.server} {
		n.WaitSettled(t)
	}
	return tp
}

// udpPair opens a UDP socket on the server at ip:port and one on the
// client connected to it; both close when the test ends.
func (tp *topo) udpPair(t testing.TB, network, ip string, port int) (srv, cli *net.UDPConn) {
	t.Helper()
	dst := &net.UDPAddr{IP: net.ParseIP(ip), Port: port}
	tp.server.in(t, func() (err error) {
		srv, err = net.ListenUDP(network, dst)
		return err
	})
	t.Cleanup(func() { srv.Close() })
	tp.client.in(t, func() (err error) {
		cli, err = net.DialUDP(network, nil, dst)
		return err
	})
	t.Cleanup(func() { cli.Close() })
	return srv, cli
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
