package route

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/labtest"
)

// trio is client - router - server: client c0 <-> ra (router), router rb
// <-> s0 server, IPv4 and IPv6 on both links, built by lab with the
// router's forwarding turned off again: Apply must turn on what it needs.
type trio struct {
	client, server *lab.Host
	router         *router
}

func newTrio(t *testing.T) *trio {
	l := labtest.Lab(t, context.Background(), lab.Config{
		ClientLink: "c0", RouterClientLink: "ra", RouterServerLink: "rb", ServerLink: "s0",
		ClientNet4: netip.MustParsePrefix("10.92.1.0/24"), ServerNet4: netip.MustParsePrefix("10.92.2.0/24"),
		ClientNet6: netip.MustParsePrefix("fd00:92:1::/64"), ServerNet6: netip.MustParsePrefix("fd00:92:2::/64"),
		RouterSysctls: map[string]string{"net.ipv4.ip_forward": "0", "net.ipv6.conf.all.forwarding": "0"},
	})
	r := testenv.NodeAt(t, l.Router.NS, l.Router.Handle)
	r.WaitSettled(t, "ra", "rb")
	return &trio{client: &l.Client, server: &l.Server, router: &router{Node: r,
		cfg: Config{Ifaces: [2]string{"ra", "rb"}, StateDir: t.TempDir(), Netns: l.Router.NS}}}
}

// echoTUN writes every packet read from f back into f: the smallest proxy.
// It counts the packets it saw.
func echoTUN(f *os.File, n *atomic.Int64) {
	buf := make([]byte, 65536)
	for {
		k, err := f.Read(buf)
		if err != nil {
			return
		}
		n.Add(1)
		if _, err := f.Write(buf[:k]); err != nil && errors.Is(err, os.ErrClosed) {
			return
		}
	}
}

// listenUDP opens a UDP socket inside h.
func listenUDP(t *testing.T, h *lab.Host, addr string) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	err := h.Do(func() error {
		a, err := net.ResolveUDPAddr("udp", addr)
		if err != nil {
			return err
		}
		c, err = net.ListenUDP("udp", a)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends a datagram from client to server, which echoes it back,
// and waits up to timeout for the echo. One datagram, no resend: the lab's
// links are up before the test starts (lab.New) and neighbour resolution
// queues packets instead of dropping them, so a missing echo means the
// router did not forward.
func roundTrip(t *testing.T, tr *trio, serverAddr string, timeout time.Duration) error {
	srv := listenUDP(t, tr.server, serverAddr)
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := srv.ReadFromUDP(buf)
			if err != nil {
				return
			}
			srv.WriteToUDP(buf[:n], from)
		}
	}()
	cli := listenUDP(t, tr.client, "[::]:0")
	dst := srv.LocalAddr().(*net.UDPAddr)
	msg := []byte("wanlab route probe")
	buf := make([]byte, 2048)
	if _, err := cli.WriteToUDP(msg, dst); err != nil {
		return err
	}
	cli.SetReadDeadline(time.Now().Add(timeout))
	n, _, err := cli.ReadFromUDP(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != string(msg) {
		return errors.New("reply differs")
	}
	return nil
}

// TestForwardingThroughTUNs checks that with Apply's settings a datagram
// from client to server and back crosses the router through both TUNs,
// for IPv4 and IPv6, starting from a router with forwarding off and strict
// rp_filter.
func TestForwardingThroughTUNs(t *testing.T) {
	t.Run("force_forwarding", func(t *testing.T) { testForwarding(t, true) })
	t.Run("all.forwarding", func(t *testing.T) { testForwarding(t, false) })
}

func testForwarding(t *testing.T, forceFwd bool) {
	tr := newTrio(t)
	r := tr.router
	r.cfg.hooks.noForceForwarding = !forceFwd
	r.Sysctl(t, "net/ipv4/conf/all/rp_filter", "1")
	r.Sysctl(t, "net/ipv4/conf/default/rp_filter", "1")
	if forceFwd {
		// TUNs created with IPv6 off (ra and rb have it): Apply turns it on.
		r.Sysctl(t, "net/ipv6/conf/default/disable_ipv6", "1")
	}
	r.openTUNs(t)
	var seen [2]atomic.Int64
	for i, f := range r.tuns {
		go echoTUN(f, &seen[i])
	}
	before := r.Snapshot(t)
	if forceFwd && !strings.Contains(before, "sysctl net/ipv6/conf/wl-ra/disable_ipv6=1") {
		t.Fatal("TUN created with IPv6 enabled")
	}
	// Without the proxy's settings the router does not forward.
	if err := roundTrip(t, tr, "10.92.2.2:7001", 200*time.Millisecond); err == nil {
		t.Fatal("forwarded before Apply")
	}
	a, err := Apply(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"10.92.2.2:7002", "[fd00:92:2::2]:7003"} {
		s0, s1 := seen[0].Load(), seen[1].Load()
		if err := roundTrip(t, tr, addr, 10*time.Second); err != nil {
			t.Fatalf("%s: %v (TUN packets %d, %d)", addr, err, seen[0].Load(), seen[1].Load())
		}
		// The request left through rb (TUN 1), the reply through ra (TUN 0).
		if seen[0].Load() == s0 || seen[1].Load() == s1 {
			t.Errorf("%s: TUN packets %d->%d (ra), %d->%d (rb): not routed through both", addr, s0, seen[0].Load(), s1, seen[1].Load())
		}
	}
	if err := a.Undo(); err != nil {
		t.Fatal(err)
	}
	r.RequireSnapshot(t, before, "Undo did not restore")
}

// TestEverySettingIsNeeded leaves out, one at a time, each forwarding and
// rp_filter setting Apply makes, and checks that the datagram then no
// longer gets through: the set is minimal. (Raising the other interfaces'
// rp_filter keeps their behaviour, and addr_gen_mode keeps the TUNs quiet;
// neither is needed to forward.)
func TestEverySettingIsNeeded(t *testing.T) {
	tr := newTrio(t)
	r := tr.router
	r.Sysctl(t, "net/ipv4/conf/all/rp_filter", "1")
	r.Sysctl(t, "net/ipv4/conf/default/rp_filter", "1") // the TUNs start strict
	r.openTUNs(t)
	var seen [2]atomic.Int64
	for i, f := range r.tuns {
		go echoTUN(f, &seen[i])
	}
	a, err := Apply(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	var needed []change
	for _, c := range a.st.Changes {
		if c.Kind == kindSysctl && c.Value != "" && c.Value != c.Prev && !(strings.HasSuffix(c.Path, "/rp_filter") && c.Value != "0") {
			needed = append(needed, c)
		}
	}
	if err := a.Undo(); err != nil {
		t.Fatal(err)
	}
	if len(needed) < 10 {
		t.Fatalf("only %d settings: %v", len(needed), needed)
	}
	port := 7100
	for _, leave := range needed {
		cfg := r.cfg
		cfg.hooks.skipChange = func(c change) bool { return c.Path == leave.Path }
		a, err := Apply(cfg)
		if err != nil {
			t.Fatal(err)
		}
		addr := "10.92.2.2:"
		if strings.HasPrefix(leave.Path, "net/ipv6/") {
			addr = "[fd00:92:2::2]:"
		}
		port++
		if err := roundTrip(t, tr, addr+strconv.Itoa(port), 300*time.Millisecond); err == nil {
			t.Errorf("forwarded without %s", leave)
		}
		if err := a.Undo(); err != nil {
			t.Fatal(err)
		}
	}
}
