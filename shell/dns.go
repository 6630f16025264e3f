package shell

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netns"

	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/internal/nsrun"
)

// The command reads this host's /etc/resolv.conf (it shares the files).
// A nameserver there on a loopback address (systemd-resolved's
// 127.0.0.53) is this namespace's own and unreachable from the command's,
// so the shell relays it in two hops: a listener on that address, port
// 53, in the command's namespace forwards each query through the link
// (impaired as the rest of the command's traffic) to a listener on the
// shell's veth address here, which forwards it to the nameserver.
// Nameservers on other addresses are reached through the NAT.

// DefaultResolvConf is where the command's resolver reads its servers.
const DefaultResolvConf = "/etc/resolv.conf"

// dnsPort is the port resolvers query.
const dnsPort = 53

// Bounds of the relay: the largest DNS message (over TCP; a UDP one is
// smaller), how long a query may wait for its answer or a TCP exchange
// may stay idle, how many UDP queries may wait at once, and the size of
// a resolv.conf read.
const (
	maxDNSMessage    = 64 << 10
	dnsTimeout       = 10 * time.Second
	maxDNSInFlight   = 64
	maxResolvConfLen = 64 << 10
)

// loopbackNameservers lists the loopback nameservers of a resolv.conf; a
// missing file has none.
func loopbackNameservers(path string) ([]netip.Addr, error) {
	b, err := hostfile.ReadInput(path, maxResolvConfLen)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("resolver configuration: %w", err)
	}
	var out []netip.Addr
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		a, err := netip.ParseAddr(f[1])
		if err == nil && a.Unmap().IsLoopback() {
			out = append(out, a.Unmap())
		}
	}
	return out, nil
}

// dnsRelay is the two hops for every loopback nameserver.
type dnsRelay struct {
	closers []io.Closer
	wg      sync.WaitGroup
}

// startDNSRelay relays the loopback nameservers of resolvConf from the
// command's namespace inner to this one, through via (the shell's veth
// address here, which inner reaches through the link).
func startDNSRelay(resolvConf string, inner netns.NsHandle, via netip.Addr) (*dnsRelay, error) {
	servers, err := loopbackNameservers(resolvConf)
	if err != nil || len(servers) == 0 {
		return nil, err
	}
	r := &dnsRelay{}
	for _, ns := range servers {
		if err := r.relay(ns, inner, via); err != nil {
			r.Close()
			return nil, fmt.Errorf("nameserver %s: %w", ns, err)
		}
	}
	return r, nil
}

func (r *dnsRelay) relay(server netip.Addr, inner netns.NsHandle, via netip.Addr) error {
	upstream := netip.AddrPortFrom(server, dnsPort).String()
	// Hop 2, here: the shell's veth address, ports of the kernel's choice.
	outerUDP, err := net.ListenPacket("udp", netip.AddrPortFrom(via, 0).String())
	if err != nil {
		return err
	}
	r.closers = append(r.closers, outerUDP)
	outerTCP, err := net.Listen("tcp", netip.AddrPortFrom(via, 0).String())
	if err != nil {
		return err
	}
	r.closers = append(r.closers, outerTCP)
	here := func(network string) func() (net.Conn, error) {
		return func() (net.Conn, error) { return net.DialTimeout(network, upstream, dnsTimeout) }
	}
	r.serve(outerUDP, outerTCP, here)
	// Hop 1, in the command's namespace: the nameserver's own address.
	var innerUDP net.PacketConn
	var innerTCP net.Listener
	err = nsrun.Do(inner, func() error {
		a := netip.AddrPortFrom(server, dnsPort).String()
		var err error
		if innerUDP, err = net.ListenPacket("udp", a); err != nil {
			return err
		}
		innerTCP, err = net.Listen("tcp", a)
		return err
	})
	if innerUDP != nil {
		r.closers = append(r.closers, innerUDP)
	}
	if innerTCP != nil {
		r.closers = append(r.closers, innerTCP)
	}
	if err != nil {
		return err
	}
	hop2 := map[string]string{"udp": outerUDP.LocalAddr().String(), "tcp": outerTCP.Addr().String()}
	through := func(network string) func() (net.Conn, error) {
		return func() (net.Conn, error) {
			var c net.Conn
			err := nsrun.Do(inner, func() error {
				var err error
				c, err = net.DialTimeout(network, hop2[network], dnsTimeout)
				return err
			})
			return c, err
		}
	}
	r.serve(innerUDP, innerTCP, through)
	return nil
}

// serve relays every UDP query of pc and every TCP connection of ln to a
// connection dial makes, until they are closed.
func (r *dnsRelay) serve(pc net.PacketConn, ln net.Listener, dial func(network string) func() (net.Conn, error)) {
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		relayUDP(pc, dial("udp"))
	}()
	go func() {
		defer r.wg.Done()
		relayTCP(ln, dial("tcp"))
	}()
}

// relayUDP sends each datagram on a fresh connection and the one answer
// back, at most maxDNSInFlight at once (more are dropped, as a busy
// resolver's would be: the client retries).
func relayUDP(pc net.PacketConn, dial func() (net.Conn, error)) {
	slots := make(chan struct{}, maxDNSInFlight)
	buf := make([]byte, maxDNSMessage)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			continue
		}
		q := append([]byte(nil), buf[:n]...)
		go func() {
			defer func() { <-slots }()
			c, err := dial()
			if err != nil {
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(dnsTimeout))
			if _, err := c.Write(q); err != nil {
				return
			}
			ans := make([]byte, maxDNSMessage)
			m, err := c.Read(ans)
			if err != nil {
				return
			}
			pc.WriteTo(ans[:m], from)
		}()
	}
}

// relayTCP joins each connection to one dial makes, both ways, until
// either side closes or stays idle for dnsTimeout.
func relayTCP(ln net.Listener, dial func() (net.Conn, error)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go func() {
			defer c.Close()
			up, err := dial()
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			pipe := func(dst, src net.Conn) {
				buf := make([]byte, maxDNSMessage)
				for {
					src.SetReadDeadline(time.Now().Add(dnsTimeout))
					n, err := src.Read(buf)
					if n > 0 {
						if _, werr := dst.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				done <- struct{}{}
			}
			go pipe(up, c)
			go pipe(c, up)
			<-done
		}()
	}
}

// Close stops the relay's listeners.
func (r *dnsRelay) Close() error {
	if r == nil {
		return nil
	}
	var errs []error
	for _, c := range r.closers {
		errs = append(errs, c.Close())
	}
	r.wg.Wait()
	return errors.Join(errs...)
}
