package kernel

import (
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/tc/spec"
)

func mustParseB(b *testing.B, s string) *spec.Spec {
	b.Helper()
	sp, err := spec.Parse(s)
	if err != nil {
		b.Fatal(err)
	}
	return sp
}

// BenchmarkKernelTBFGoodput is the kernel side of the cross-check: TCP
// goodput from client to server through a router whose egress towards the
// server carries `wanlab kernel apply` tbf specs, as a fraction of the
// configured rate (the rest is TCP/IP header overhead and the bucket's
// warm-up). Run: go test -run XXX -bench KernelTBFGoodput ./tc/kernel
func BenchmarkKernelTBFGoodput(b *testing.B) {
	testenv.RequireRoot(b)
	_, cns := testenv.NetNS(b)
	rname, rns := testenv.NetNS(b)
	_, sns := testenv.NetNS(b)
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	veth := func(ns netns.NsHandle, name, peer string, peerNS netns.NsHandle) {
		must(nsrun.Do(ns, func() error {
			return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer, PeerNamespace: netlink.NsFd(int(peerNS))})
		}))
	}
	veth(rns, "r0", "c0", cns)
	veth(rns, "r1", "s0", sns)
	conf := func(ns netns.NsHandle, link, cidr, gw string) {
		must(nsrun.Do(ns, func() error {
			l, err := netlink.LinkByName(link)
			if err != nil {
				return err
			}
			a, _ := netlink.ParseAddr(cidr)
			if err := netlink.AddrAdd(l, a); err != nil {
				return err
			}
			if err := netlink.LinkSetUp(l); err != nil {
				return err
			}
			if lo, err := netlink.LinkByName("lo"); err == nil {
				netlink.LinkSetUp(lo)
			}
			if gw == "" {
				return nil
			}
			_, dst, _ := net.ParseCIDR("0.0.0.0/0")
			return netlink.RouteAdd(&netlink.Route{Dst: dst, Gw: net.ParseIP(gw)})
		}))
	}
	conf(cns, "c0", "10.94.1.2/24", "10.94.1.1")
	conf(rns, "r0", "10.94.1.1/24", "")
	conf(rns, "r1", "10.94.2.1/24", "")
	conf(sns, "s0", "10.94.2.2/24", "10.94.2.1")
	must(nsrun.Do(rns, func() error { return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0) }))

	var ln net.Listener
	must(nsrun.Do(sns, func() error {
		var err error
		ln, err = net.Listen("tcp4", "10.94.2.2:0")
		return err
	}))
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	tg := Target{Iface: "r1", Netns: rname, StateDir: b.TempDir()}
	const seconds = 3
	for _, s := range []string{
		"tbf rate 10mbit burst 10kb limit 100kb",
		"tbf rate 50mbit burst 50kb limit 500kb",
		"tbf rate 200mbit burst 200kb limit 2mb",
	} {
		b.Run(s, func(b *testing.B) {
			must(Apply(tg, spec.PipelineImpairment(mustParseB(b, s))))
			defer Clear(tg)
			var total float64
			for range b.N {
				var c net.Conn
				must(nsrun.Do(cns, func() error {
					var err error
					c, err = net.Dial("tcp4", ln.Addr().String())
					return err
				}))
				buf := make([]byte, 64<<10)
				start := time.Now()
				var sent int64
				for time.Since(start) < seconds*time.Second {
					n, err := c.Write(buf)
					sent += int64(n)
					if err != nil {
						b.Fatal(err)
					}
				}
				// Bytes still in flight are not counted: read the socket's
				// unacked queue to subtract them.
				raw, _ := c.(*net.TCPConn).SyscallConn()
				var unacked int
				raw.Control(func(fd uintptr) { unacked, _ = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) })
				total += float64(sent-int64(unacked)) * 8 / time.Since(start).Seconds()
				// Reset instead of draining, so the next round does not
				// share the bucket with this one's leftovers.
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			}
			bps := total / float64(b.N)
			conf := mustParseB(b, s).Stages[0].(*spec.TBF)
			b.ReportMetric(bps/1e6, "Mbit/s")
			b.ReportMetric(bps/float64(conf.Rate), "of-rate")
		})
	}
}
