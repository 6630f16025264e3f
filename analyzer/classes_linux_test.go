//go:build linux

package analyzer

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/lab/traffic"
	"github.com/wanlab/wanlab/proxy"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// classOneWay is the lab's delay each way: a 40 ms round trip, far above
// the hosts' own timing, so where a capture was taken shows.
const classOneWay = 20 * time.Millisecond

// synTimeoutMs is Linux's initial retransmission timeout of a SYN
// (TCP_TIMEOUT_INIT, 1 s).
const synTimeoutMs = 1000

// classLab is a lab whose router delays each direction by classOneWay
// through the userspace proxy (this kernel has no netem), with TCP
// timestamps on or off in both hosts.
func classLab(t *testing.T, timestamps bool) testLab {
	t.Helper()
	l := newLab(t)
	if !timestamps {
		for _, ns := range []string{l.Client.NS, l.Server.NS} {
			run(t, "ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.tcp_timestamps=0")
		}
	}
	imp, err := spec.ParseImpairment(fmt.Sprintf("delay %dms", classOneWay.Milliseconds()))
	if err != nil {
		t.Fatal(err)
	}
	p, err := proxy.Start(context.Background(), proxy.Config{Ifaces: [2]string{l.Router.ClientLink, l.Router.ServerLink},
		Specs: [2]spec.Impairment{imp, imp}, Netns: l.Router.NS, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("proxy: %v", err)
		}
	})
	return l
}

// bothEnds captures at the client and at the server while traffic runs,
// and returns the two captures' main connections, client's first.
func (l testLab) bothEnds(t *testing.T, traffic func()) [2]*Connection {
	t.Helper()
	stops := [2]func() string{capture(t, l.Client.Handle, l.Client.Link), capture(t, l.Server.Handle, l.Server.Link)}
	traffic()
	var cs [2]*Connection
	for i, stop := range stops {
		cs[i] = mainConn(t, mustAnalyze(t, stop()))
	}
	return cs
}

// dataDir is the direction of c that carried the most data.
func dataDir(c *Connection) *Direction {
	if c.Directions[0].UniqueBytes > c.Directions[1].UniqueBytes {
		return c.Directions[0]
	}
	return c.Directions[1]
}

// checkClass checks, at both ends, the data direction's limit (one of
// want), where each capture was taken, and the handshake's round trip.
func checkClass(t *testing.T, cs [2]*Connection, upload bool, want ...string) {
	t.Helper()
	for i, c := range cs {
		end := [2]string{"client", "server"}[i]
		near := [2]string{"receiver", "sender"}[i]
		if upload {
			near = [2]string{"sender", "receiver"}[i]
		}
		d := dataDir(c)
		if d.CapturedNear != near {
			t.Errorf("at the %s: captured near %q (%s: %.3g ms to the receiver, %.3g to the sender), want %q",
				end, d.CapturedNear, d.CapturedNearFrom, d.CaptureToReceiverMs, d.CaptureToSenderMs, near)
		}
		// The round trip is the proxy's 40 ms and the hosts' reaction; the
		// first packets through a proxy just started on a loaded machine
		// can take tens of milliseconds more (up to 100 seen beside a
		// busy loop). Timed from a first SYN that was sent again, the
		// handshake would add the SYN's 1 s timeout: half of it is the
		// bound.
		if rtt := 2 * float64(classOneWay) / 1e6; c.HandshakeRTTMs < rtt || c.HandshakeRTTMs > rtt+synTimeoutMs/2 {
			t.Errorf("at the %s: handshake RTT %.3g ms, want %.3g ms + under %d", end, c.HandshakeRTTMs, rtt, synTimeoutMs/2)
		}
		if dg := d.Diagnosis; dg == nil || !slices.Contains(want, dg.Limit) {
			t.Errorf("at the %s: diagnosis %v, want one of %v", end, dg, want)
		}
	}
}

// download runs one download of size bytes from a traffic server with cfg.
func (l testLab) download(t *testing.T, size units.Size, cfg traffic.ServerConfig) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg.Listen = netip.AddrPortFrom(l.Server.IPv4, 0)
	srv, err := traffic.StartServer(ctx, l.Server.Handle, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	res, err := traffic.Download(ctx, l.Client.Handle, traffic.DownloadConfig{Server: srv.Addr(), Size: size})
	if err != nil || res.Bytes != size {
		t.Fatalf("download: %d of %d bytes: %v", res.Bytes, size, err)
	}
}

// TestLabClasses makes a capture per limit class the field shows, at both
// ends, with TCP timestamps on and off, and checks each end's reading.
func TestLabClasses(t *testing.T) {
	for _, ts := range []bool{true, false} {
		name := map[bool]string{true: "timestamps", false: "no-timestamps"}[ts]
		t.Run(name, func(t *testing.T) {
			t.Run("app-paced", func(t *testing.T) {
				// The server writes 32 KiB every 65 ms (4 Mbit/s), longer
				// than the 40 ms round trip: between writes it has nothing
				// outstanding.
				l := classLab(t, ts)
				cs := l.bothEnds(t, func() { l.download(t, 1*units.MiB, traffic.ServerConfig{WriteRate: 4 * units.Mbit}) })
				checkClass(t, cs, false, LimitApplication)
			})
			t.Run("slow-start", func(t *testing.T) {
				// 100 KiB behind an initial window of 10 segments is over
				// in 3-4 round trips, the window still opening.
				l := classLab(t, ts)
				cs := l.bothEnds(t, func() { l.download(t, 100*units.KiB, traffic.ServerConfig{}) })
				checkClass(t, cs, false, LimitSlowStart)
			})
			t.Run("keep-alive", func(t *testing.T) {
				// Twenty 16 KiB responses on one kept-alive connection:
				// between them the server waits a round trip for the next
				// request.
				l := classLab(t, ts)
				cs := l.bothEnds(t, func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					srv, err := traffic.StartServer(ctx, l.Server.Handle, traffic.ServerConfig{Listen: netip.AddrPortFrom(l.Server.IPv4, 0)})
					if err != nil {
						t.Fatal(err)
					}
					defer srv.Close()
					if _, err := traffic.RequestResponse(ctx, l.Client.Handle, traffic.RRConfig{Server: srv.Addr(), Requests: 20, Concurrency: 1, BodySize: 16 * units.KiB}); err != nil {
						t.Fatal(err)
					}
				})
				checkClass(t, cs, false, LimitApplication)
				for i, c := range cs {
					if d := dataDir(c); d.Turns < 15 {
						t.Errorf("capture %d: %d request/response turns, want about 19", i, d.Turns)
					}
				}
			})
			t.Run("retransmitted-SYN", func(t *testing.T) {
				// The server's host drops the first SYN: the client sends
				// it again after its 1 s timeout. The handshake is the
				// second SYN's.
				testenv.RequireCommand(t, "iptables")
				l := classLab(t, ts)
				run(t, "ip", "netns", "exec", l.Server.NS, "iptables", "-A", "INPUT", "-p", "tcp", "--syn",
					"-m", "statistic", "--mode", "nth", "--every", "1000000", "--packet", "0", "-j", "DROP")
				cs := l.bothEnds(t, func() { l.download(t, 100*units.KiB, traffic.ServerConfig{}) })
				checkClass(t, cs, false, LimitSlowStart)
			})
			t.Run("upload", func(t *testing.T) {
				// 2 MiB from the client to the server: captured at its
				// sender, the client.
				l := classLab(t, ts)
				cs := l.bothEnds(t, func() { l.upload(t, 2<<20) })
				checkClass(t, cs, true, LimitSlowStart, LimitCongestion, LimitReceiveWindow)
			})
		})
	}
}

// upload sends n bytes from the client to a sink in the server and
// returns when the server has read them all and both closed.
func (l testLab) upload(t *testing.T, n int64) {
	t.Helper()
	var ln net.Listener
	if err := nsrun.Do(l.Server.Handle, func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(l.Server.IPv4, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	read := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			read <- err
			return
		}
		defer c.Close()
		got, err := io.Copy(io.Discard, c)
		if err == nil && got != n {
			err = fmt.Errorf("server read %d of %d bytes", got, n)
		}
		read <- err
	}()
	var conn net.Conn
	if err := nsrun.Do(l.Client.Handle, func() (err error) {
		conn, err = net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute))
	buf := make([]byte, 64<<10)
	for left := n; left > 0; {
		k, err := conn.Write(buf[:min(int64(len(buf)), left)])
		if err != nil {
			t.Fatal(err)
		}
		left -= int64(k)
	}
	conn.(*net.TCPConn).CloseWrite()
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, conn) // the server's FIN
}
