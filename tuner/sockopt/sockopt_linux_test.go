package sockopt_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/tuner/sockopt"
	"github.com/wanlab/wanlab/units"
)

// pair connects a client to a server over loopback in a fresh namespace,
// the listener set up with lopts and the dialer with dopts.
func pair(t testing.TB, lopts, dopts sockopt.Options) (client, server *net.TCPConn) {
	t.Helper()
	_, h := testenv.NetNS(t)
	var ln net.Listener
	err := nsrun.Do(h, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		lc := net.ListenConfig{Control: lopts.Control}
		ln, err = lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
		if err != nil {
			return err
		}
		accepted := make(chan net.Conn, 1)
		go func() {
			c, _ := ln.Accept()
			accepted <- c
		}()
		d := net.Dialer{Control: dopts.Control, Timeout: 10 * time.Second}
		c, err := d.Dial("tcp4", ln.Addr().String())
		if err != nil {
			return err
		}
		client = c.(*net.TCPConn)
		s := <-accepted
		if s == nil {
			return errors.New("accept failed")
		}
		server = s.(*net.TCPConn)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.Close()
		server.Close()
		ln.Close()
	})
	return client, server
}

// transfer sends n bytes from src to dst and waits until dst has read all.
func transfer(t *testing.T, src, dst net.Conn, n int64) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, err := io.Copy(src, io.LimitReader(zeros{}, n))
		errc <- err
	}()
	got, err := io.CopyN(io.Discard, dst, n)
	if err != nil || got != n {
		t.Fatalf("read %d of %d bytes: %v", got, n, err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("write: %v", err)
	}
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }

func TestControlSetsOptionsAndReadsBackEffective(t *testing.T) {
	lopts := sockopt.Options{RcvBuf: 64 * units.KiB, CC: "reno"}
	dopts := sockopt.Options{SndBuf: 32 * units.KiB, CC: "cubic", NoDelay: true, QuickAck: true, NotSentLowat: 8 * units.KiB}
	client, server := pair(t, lopts, dopts)
	// TCP_NOTSENT_LOWAT is not inherited from the listener: apply it.
	if err := (sockopt.Options{NotSentLowat: 16 * units.KiB}).Apply(server); err != nil {
		t.Fatal(err)
	}

	se, err := sockopt.Read(server)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel doubles the request; the accepted socket inherits the
	// listener's buffer and congestion control.
	if se.RcvBuf != 128*units.KiB {
		t.Errorf("server rcvbuf = %d, want %d (2 × 64 KiB)", se.RcvBuf, 128*units.KiB)
	}
	if se.CC != "reno" || se.NotSentLowat != 16*units.KiB {
		t.Errorf("server effective = %+v, want cc reno, notsent_lowat 16384", se)
	}
	if err := lopts.Check(se); err != nil {
		t.Errorf("server check: %v", err)
	}
	ce, err := sockopt.Read(client)
	if err != nil {
		t.Fatal(err)
	}
	if ce.SndBuf != 64*units.KiB || ce.CC != "cubic" || !ce.NoDelay || ce.NotSentLowat != 8*units.KiB {
		t.Errorf("client effective = %+v, want sndbuf 65536, cubic, nodelay, notsent_lowat 8192", ce)
	}
	if err := dopts.Check(ce); err != nil {
		t.Errorf("client check: %v", err)
	}
	// A check against options the kernel did not apply must fail.
	if err := (sockopt.Options{CC: "bbr"}).Check(ce); err == nil {
		t.Error("Check accepted cubic for bbr")
	}
}

func readProcInt(t *testing.T, path string) units.Size {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return units.Size(v)
}

func TestBufferCappedByRmemMaxIsReported(t *testing.T) {
	// net.core.rmem_max is not per namespace: the host's value applies.
	rmemMax := readProcInt(t, "/proc/sys/net/core/rmem_max")
	opts := sockopt.Options{RcvBuf: rmemMax + 64*units.KiB}
	_, server := pair(t, opts, sockopt.Options{})
	e, err := sockopt.Read(server)
	if err != nil {
		t.Fatal(err)
	}
	if e.RcvBuf != 2*rmemMax {
		t.Errorf("rcvbuf = %d, want 2 × rmem_max = %d", e.RcvBuf, 2*rmemMax)
	}
	err = opts.Check(e)
	if err == nil || !strings.Contains(err.Error(), "rmem_max") {
		t.Errorf("Check = %v, want an error naming rmem_max", err)
	}
}

func TestUnknownCongestionControlNamed(t *testing.T) {
	testenv.RequireRoot(t)
	_, h := testenv.NetNS(t)
	err := nsrun.Do(h, func() error {
		lc := net.ListenConfig{Control: sockopt.Options{CC: "nosuchcc"}.Control}
		ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
		if err == nil {
			ln.Close()
		}
		return err
	})
	if err == nil || !strings.Contains(err.Error(), `"nosuchcc"`) || !errors.Is(err, unix.ENOENT) {
		t.Fatalf("err = %v, want ENOENT naming nosuchcc", err)
	}
}

func TestInfoAfterTransfer(t *testing.T) {
	client, server := pair(t, sockopt.Options{}, sockopt.Options{})
	const n = 8 << 20
	transfer(t, client, server, n)
	ci, err := sockopt.Info(client)
	if err != nil {
		t.Fatal(err)
	}
	if ci.State != "established" || ci.CAState != "open" {
		t.Errorf("state = %s/%s, want established/open", ci.State, ci.CAState)
	}
	if ci.BytesAcked < n || ci.BytesSent < n {
		t.Errorf("bytes acked/sent = %d/%d, want >= %d", ci.BytesAcked, ci.BytesSent, n)
	}
	// Busy time is counted in jiffies (tcp_get_info: chrono_stat * USEC_PER_SEC/HZ),
	// so an 8 MiB loopback transfer that takes about a millisecond may read 0;
	// it must not be negative or longer than the test.
	if ci.RTT <= 0 || ci.SndMSS == 0 || ci.SndCwnd == 0 || ci.DeliveryRate == 0 {
		t.Errorf("info = %+v: want rtt, mss, cwnd and delivery rate", ci)
	}
	if ci.BusyTime < 0 || ci.BusyTime > time.Minute {
		t.Errorf("busy time = %v", ci.BusyTime)
	}
	if ci.CwndBytes() != units.Size(ci.SndCwnd)*ci.SndMSS {
		t.Errorf("CwndBytes = %d", ci.CwndBytes())
	}
	if ci.Len < 232 { // struct tcp_info up to tcpi_rcv_wnd (Linux 6.2)
		t.Errorf("kernel filled %d bytes of tcp_info", ci.Len)
	}
	si, err := sockopt.Info(server)
	if err != nil {
		t.Fatal(err)
	}
	if si.BytesReceived != n {
		t.Errorf("server bytes received = %d, want %d", si.BytesReceived, n)
	}
}

func TestInfoRwndLimited(t *testing.T) {
	// A receiver pinned to a tiny buffer that does not read yet: the
	// sender fills the window and waits for it, and the kernel says so.
	// The kernel counts that time in jiffies (tcp_get_info_chrono_stats),
	// so a loopback transfer whose waits each end within a tick can read
	// 0; the test waits until the count shows, then lets the receiver
	// read.
	client, server := pair(t, sockopt.Options{RcvBuf: 4 * units.KiB}, sockopt.Options{})
	const n = 2 << 20
	errc := make(chan error, 1)
	go func() {
		_, err := io.Copy(client, io.LimitReader(zeros{}, n))
		errc <- err
	}()
	testenv.WaitFor(t, "the sender's rwnd-limited time", func() bool {
		ci, err := sockopt.Info(client)
		return err == nil && ci.RwndLimited > 0
	})
	if got, err := io.CopyN(io.Discard, server, n); err != nil || got != n {
		t.Fatalf("read %d of %d bytes: %v", got, n, err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("write: %v", err)
	}
	ci, err := sockopt.Info(client)
	if err != nil {
		t.Fatal(err)
	}
	if ci.RwndLimited <= 0 || ci.RwndLimitedFraction() <= 0 {
		t.Errorf("rwnd_limited = %v of busy %v, want > 0", ci.RwndLimited, ci.BusyTime)
	}
	if ci.SndWnd > 8*units.KiB {
		t.Errorf("peer window = %d, want <= 8 KiB with a 4 KiB SO_RCVBUF", ci.SndWnd)
	}
}

func quickAck(t *testing.T, c *net.TCPConn) bool {
	t.Helper()
	e, err := sockopt.Read(c)
	if err != nil {
		t.Fatal(err)
	}
	return e.QuickAck
}

// pingPong makes rounds of request/response exchanges, which is what
// makes the kernel switch a socket back to delayed ACKs.
func pingPong(t *testing.T, client net.Conn, server net.Conn, rounds int) {
	t.Helper()
	buf := make([]byte, 64)
	for i := 0; i < rounds; i++ {
		if _, err := client.Write(buf); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(server, buf); err != nil {
			t.Fatal(err)
		}
		if _, err := server.Write(buf); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(client, buf); err != nil {
			t.Fatal(err)
		}
	}
}

func TestQuickAckIsNotStickyAndQuickAckConnRearms(t *testing.T) {
	client, server := pair(t, sockopt.Options{}, sockopt.Options{})
	if err := sockopt.ArmQuickAck(server); err != nil {
		t.Fatal(err)
	}
	if !quickAck(t, server) {
		t.Fatal("TCP_QUICKACK reads back off right after setting it")
	}
	pingPong(t, client, server, 4)
	if quickAck(t, server) {
		t.Fatal("quick-ack mode survived request/response traffic; the kernel should have cleared it")
	}
	wrapped := sockopt.QuickAckConn(server)
	pingPong(t, client, wrapped, 4)
	// After the last Read the wrapper re-armed; the server then wrote a
	// response, so check right after a read.
	buf := make([]byte, 64)
	if _, err := client.Write(buf); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(wrapped, buf); err != nil {
		t.Fatal(err)
	}
	if !quickAck(t, server) {
		t.Error("QuickAckConn did not re-arm TCP_QUICKACK after Read")
	}
}
