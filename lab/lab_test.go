package lab_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/labtest"
)

// echoOnce listens on addr inside the server and checks that a TCP
// connection from the client reaches it through the router.
func echoOnce(t *testing.T, l *lab.Lab, addr netip.Addr) {
	t.Helper()
	var ln net.Listener
	err := l.Server.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	var c net.Conn
	err = l.Client.Do(func() error {
		var err error
		c, err = net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		return err
	})
	if err != nil {
		t.Fatalf("dial %s from client: %v", ln.Addr(), err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	msg := []byte("through the router " + addr.String())
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("echo via %s: %v", addr, err)
	}
	if string(got) != string(msg) {
		t.Fatalf("echo = %q, want %q", got, msg)
	}
	// The client's peer is the server's address, not the router's: the
	// packets were routed, not proxied.
	if rp := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap(); rp != addr {
		t.Fatalf("remote %s, want %s", rp, addr)
	}
}

func linkNamesIn(t *testing.T, h interface{ Do(func() error) error }) []string {
	t.Helper()
	var names []string
	err := h.Do(func() error {
		links, err := netlink.LinkList()
		for _, l := range links {
			names = append(names, l.Attrs().Name)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

func rootLinksWithPrefix(t *testing.T, prefix string) []string {
	t.Helper()
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, prefix) {
			out = append(out, l.Attrs().Name)
		}
	}
	return out
}

func TestUpDown(t *testing.T) {
	l := labtest.Lab(t, context.Background(), lab.Config{})
	for _, name := range []string{l.Client.Link, l.Server.Link, l.Router.ClientLink, l.Router.ServerLink} {
		if len(name) > 15 {
			t.Errorf("link name %q longer than 15 bytes", name)
		}
	}
	if got, want := linkNamesIn(t, &l.Router), []string{"lo", l.Router.ClientLink, l.Router.ServerLink}; !slices.Equal(got, want) {
		t.Errorf("router links = %v, want %v", got, want)
	}
	if got, want := linkNamesIn(t, &l.Client), []string{"lo", l.Client.Link}; !slices.Equal(got, want) {
		t.Errorf("client links = %v, want %v", got, want)
	}
	if left := rootLinksWithPrefix(t, "wl"+l.ID); len(left) > 0 {
		t.Errorf("lab created links in the root namespace: %v", left)
	}
	for _, k := range []string{"net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"} {
		v, err := lab.ReadSysctl(l.Router.NS, k)
		if err != nil || v != "1" {
			t.Errorf("router %s = %q, %v; want 1", k, v, err)
		}
	}
	// The state file lists every object before Close.
	b, err := os.ReadFile(filepath.Join(lab.DefaultStateDir, l.ID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		PID        int      `json:"pid"`
		Namespaces []string `json:"namespaces"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.PID != os.Getpid() || len(st.Namespaces) != 3 {
		t.Errorf("state file = %s", b)
	}
	echoOnce(t, l, l.Server.IPv4)
	echoOnce(t, l, l.Server.IPv6)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	labtest.AssertLabGone(t, l.ID)
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestFirstPacketsArrive checks that a lab is ready when New returns:
// every veth is operationally up, and the first TCP exchange over IPv4
// and over IPv6 (neighbour resolution, handshake, echo) drops no packet
// on the way and needs no retransmission on either side. A veth still on
// noop_qdisc when New returned dropped the first ARP reply or SYN-ACK
// (counted in its tx_dropped) and the handshake was resent a second
// later. (What the kernel itself sent while New brought the links up,
// multicast reports, may be counted as dropped before the exchange; only
// the exchange's count matters.)
func TestFirstPacketsArrive(t *testing.T) {
	l := labtest.Lab(t, context.Background(), lab.Config{})
	type end struct {
		host interface{ Do(func() error) error }
		link string
	}
	ends := []end{{&l.Client, l.Client.Link}, {&l.Router, l.Router.ClientLink}, {&l.Router, l.Router.ServerLink}, {&l.Server, l.Server.Link}}
	dropped := func(e end) (n uint64, up bool) {
		if err := e.host.Do(func() error {
			link, err := netlink.LinkByName(e.link)
			if err == nil {
				n, up = link.Attrs().Statistics.TxDropped, link.Attrs().OperState == netlink.OperUp
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n, up
	}
	before := make([]uint64, len(ends))
	for i, e := range ends {
		var up bool
		if before[i], up = dropped(e); !up {
			t.Errorf("%s not operationally up right after New", e.link)
		}
	}
	for _, addr := range []netip.Addr{l.Server.IPv4, l.Server.IPv6} {
		client, server := exchange(t, l, addr)
		if client != 0 || server != 0 {
			t.Errorf("first exchange with %s: %d retransmissions by the client, %d by the server, want none", addr, client, server)
		}
	}
	for i, e := range ends {
		if n, _ := dropped(e); n != before[i] {
			t.Errorf("%s dropped %d packets of the first exchanges", e.link, n-before[i])
		}
	}
}

// exchange connects from the client to addr on the server, has a message
// echoed and returns both sockets' retransmission counts (TCP_INFO
// tcpi_total_retrans, the SYN and SYN-ACK included).
func exchange(t *testing.T, l *lab.Lab, addr netip.Addr) (client, server uint32) {
	t.Helper()
	retrans := func(c net.Conn) uint32 {
		rc, err := c.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var info *unix.TCPInfo
		var serr error
		if err := rc.Control(func(fd uintptr) { info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil || serr != nil {
			t.Fatal(errors.Join(err, serr))
		}
		return info.Total_retrans
	}
	var ln net.Listener
	if err := l.Server.Do(func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan uint32, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- 0
			return
		}
		defer c.Close()
		buf := make([]byte, 64)
		n, _ := c.Read(buf)
		c.Write(buf[:n])
		served <- retrans(c)
	}()
	var c net.Conn
	if err := l.Client.Do(func() (err error) {
		c, err = net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	msg := []byte("first exchange")
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, len(msg))); err != nil {
		t.Fatalf("echo via %s: %v", addr, err)
	}
	return retrans(c), <-served
}

// TestIPv6OffBuilds: a config that turns IPv6 off on a host (no link-local
// address will ever come) still builds, and IPv4 routes.
func TestIPv6OffBuilds(t *testing.T) {
	l := labtest.Lab(t, context.Background(), lab.Config{ClientSysctls: map[string]string{"net.ipv6.conf.all.disable_ipv6": "1"}})
	echoOnce(t, l, l.Server.IPv4)
}

func TestTwoLabsAtOnce(t *testing.T) {
	a := labtest.Lab(t, context.Background(), lab.Config{})
	b := labtest.Lab(t, context.Background(), lab.Config{})
	if a.ID == b.ID || a.Router.NS == b.Router.NS || a.Client.Link == b.Client.Link {
		t.Fatalf("labs share names: %s/%s", a.ID, b.ID)
	}
	// Same address plan, separate namespaces: both route.
	echoOnce(t, a, a.Server.IPv4)
	echoOnce(t, b, b.Server.IPv6)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	echoOnce(t, b, b.Server.IPv4)
}

func TestSameIDRefused(t *testing.T) {
	id := strings.TrimPrefix(testenv.UniqueName("t"), "t")
	a := labtest.Lab(t, context.Background(), lab.Config{ID: id})
	_, err := lab.New(context.Background(), lab.Config{ID: id})
	if err == nil {
		t.Fatal("second lab with the same ID built")
	}
	// The failed attempt must not have removed the first lab's objects.
	if !nsrun.Exists(a.Router.NS) {
		t.Fatal("failed New removed the existing lab")
	}
	echoOnce(t, a, a.Server.IPv4)
}

func TestCancelTearsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	l := labtest.Lab(t, ctx, lab.Config{})
	cancel()
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("lab not torn down 10 s after its context was cancelled")
	}
	labtest.AssertLabGone(t, l.ID)
}

func TestErrorRollsBack(t *testing.T) {
	testenv.RequireRoot(t)
	id := strings.TrimPrefix(testenv.UniqueName("t"), "t")
	_, err := lab.New(context.Background(), lab.Config{
		ID:            id,
		ServerSysctls: map[string]string{"net.ipv4.no_such_sysctl": "1"},
	})
	if err == nil || !strings.Contains(err.Error(), "no_such_sysctl") {
		t.Fatalf("New = %v, want an error naming the bad sysctl", err)
	}
	labtest.AssertLabGone(t, id) // nothing left after a failed New
}

func TestSysctlsAndOffloads(t *testing.T) {
	l := labtest.Lab(t, context.Background(), lab.Config{
		DisableTSO:    true,
		DisableGRO:    true,
		ClientSysctls: map[string]string{"net.ipv4.tcp_rmem": "4096 131072 1048576"},
		ServerSysctls: map[string]string{"net.ipv4.tcp_wmem": "4096 4096 4096"},
	})
	if v, err := lab.ReadSysctl(l.Client.NS, "net.ipv4.tcp_rmem"); err != nil || strings.Join(strings.Fields(v), " ") != "4096 131072 1048576" {
		t.Errorf("client tcp_rmem = %q, %v", v, err)
	}
	if v, err := lab.ReadSysctl(l.Server.NS, "net.ipv4.tcp_wmem"); err != nil || strings.Join(strings.Fields(v), " ") != "4096 4096 4096" {
		t.Errorf("server tcp_wmem = %q, %v", v, err)
	}
	// The router kept the host's default: sysctls went only where asked.
	if v, _ := lab.ReadSysctl(l.Router.NS, "net.ipv4.tcp_wmem"); strings.Join(strings.Fields(v), " ") == "4096 4096 4096" {
		t.Errorf("router tcp_wmem changed too")
	}
	for _, o := range []lab.Offload{lab.OffloadTSO, lab.OffloadGRO} {
		on, err := lab.Offloaded(l.Client.Handle, l.Client.Link, o)
		if err != nil || on {
			t.Errorf("client %s = %v, %v; want off", o, on, err)
		}
	}
	on, err := lab.Offloaded(l.Router.Handle, l.Router.ServerLink, lab.OffloadGSO)
	if err != nil || !on {
		t.Errorf("router gso = %v, %v; want the default, on", on, err)
	}
	if err := lab.SetOffload(l.Router.Handle, l.Router.ServerLink, lab.OffloadGSO, false); err != nil {
		t.Fatal(err)
	}
	if on, err := lab.Offloaded(l.Router.Handle, l.Router.ServerLink, lab.OffloadGSO); err != nil || on {
		t.Errorf("router gso after SetOffload off = %v, %v", on, err)
	}
	if err := lab.SetOffload(l.Router.Handle, "nosuchlink0", lab.OffloadGSO, false); err == nil || !strings.Contains(err.Error(), "nosuchlink0") {
		t.Errorf("SetOffload on a missing link = %v, want an error naming it", err)
	}
	if err := lab.WriteSysctls(l.Client.NS, map[string]string{"kernel.hostname": "x"}); err == nil {
		t.Error("a global sysctl was accepted for a namespace")
	}
}

// deadPID returns the PID of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func TestCleanupRemovesCrashedLabs(t *testing.T) {
	crashed := labtest.Lab(t, context.Background(), lab.Config{})
	live := labtest.Lab(t, context.Background(), lab.Config{})
	// Make the first lab look as if its process had died: rewrite the
	// owner in its state file.
	path := filepath.Join(lab.DefaultStateDir, crashed.ID+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	st["pid"] = deadPID(t)
	b, _ = json.Marshal(st)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// And an orphan namespace with a lab's name but no state file at all,
	// as a crash between teardown steps would leave.
	orphanID := strings.TrimPrefix(testenv.UniqueName("o"), "o")
	orphan := lab.NamePrefix + orphanID + "-router"
	h, err := nsrun.Create(orphan)
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	t.Cleanup(func() { _ = nsrun.Delete(orphan) })
	// A namespace that merely resembles a lab's is not touched.
	other := testenv.UniqueName("wanlab-x")
	h, err = nsrun.Create(other)
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	t.Cleanup(func() { _ = nsrun.Delete(other) })

	removed, err := lab.Cleanup()
	if err != nil {
		t.Fatal(err)
	}
	// Another test process may run Cleanup at the same moment and remove
	// some of these first, so the end state is what must hold; what this
	// call reports must be a subset of what was there.
	t.Logf("Cleanup removed %v", removed)
	want := []string{"netns " + crashed.Router.NS, "netns " + crashed.Client.NS, "netns " + crashed.Server.NS, "netns " + orphan, "state " + path}
	for _, r := range removed {
		if strings.Contains(r, crashed.ID) || strings.Contains(r, orphanID) {
			if !slices.Contains(want, r) {
				t.Errorf("Cleanup reports %q, not one of %v", r, want)
			}
		}
	}
	for _, r := range removed {
		if strings.Contains(r, live.ID) {
			t.Errorf("Cleanup removed %q of a live lab", r)
		}
	}
	if nsrun.Exists(orphan) || !nsrun.Exists(other) {
		t.Errorf("orphan exists=%v, unrelated namespace exists=%v", nsrun.Exists(orphan), nsrun.Exists(other))
	}
	labtest.AssertLabGone(t, crashed.ID)
	echoOnce(t, live, live.Server.IPv4)
}

func TestNamedLinksAndQueueLength(t *testing.T) {
	l := labtest.Lab(t, context.Background(), lab.Config{
		ClientLink: "c0", RouterClientLink: "ra", RouterServerLink: "rb", ServerLink: "s0",
	})
	if got, want := linkNamesIn(t, &l.Router), []string{"lo", "ra", "rb"}; !slices.Equal(got, want) {
		t.Errorf("router links = %v, want %v", got, want)
	}
	if l.Client.Link != "c0" || l.Server.Link != "s0" || l.Router.ClientLink != "ra" || l.Router.ServerLink != "rb" {
		t.Errorf("lab links %q %q %q %q", l.Client.Link, l.Router.ClientLink, l.Router.ServerLink, l.Server.Link)
	}
	// Both ends of each veth get the kernel's default queue length, as
	// `ip link add` gives them, not 0.
	for _, at := range []struct {
		h    interface{ Do(func() error) error }
		link string
	}{{&l.Client, "c0"}, {&l.Router, "ra"}, {&l.Router, "rb"}, {&l.Server, "s0"}} {
		var qlen int
		if err := at.h.Do(func() error {
			link, err := netlink.LinkByName(at.link)
			if err == nil {
				qlen = link.Attrs().TxQLen
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if qlen != 1000 {
			t.Errorf("%s txqlen %d, want 1000", at.link, qlen)
		}
	}
	echoOnce(t, l, l.Server.IPv6)
}

func TestBadLinkNamesRefused(t *testing.T) {
	for _, cfg := range []lab.Config{
		{ClientLink: "a/b"},
		{ServerLink: "sixteen-bytes-00"},
		{RouterClientLink: "r", RouterServerLink: "r"},
	} {
		if _, err := lab.New(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "link name") {
			t.Errorf("New(%+v) = %v, want a link name error", cfg, err)
		}
	}
}

// A state directory whose lab is gone is removed; a live lab's, a name
// that cannot be a lab ID and a plain file are kept.
func TestRemoveStaleStateDirs(t *testing.T) {
	l := labtest.Lab(t, context.Background(), lab.Config{})
	dir := t.TempDir()
	stale, live := filepath.Join(dir, "zz0dead"), filepath.Join(dir, l.ID)
	notID, file := filepath.Join(dir, "Not-A-Lab"), filepath.Join(dir, "zz1file")
	for _, d := range []string{stale, live, notID} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	removed, err := lab.RemoveStaleStateDirs(dir, "bench")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"state " + stale}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there", stale)
	}
	for _, p := range []string{live, notID, file} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s went: %v", p, err)
		}
	}
	if removed, err := lab.RemoveStaleStateDirs(filepath.Join(dir, "missing"), "bench"); err != nil || removed != nil {
		t.Errorf("missing dir: %v, %v", removed, err)
	}
}

// A router-only lab holds the router namespace alone; links the caller
// creates in it under the router's link names (TAPs of VMs; the two ends
// of a veth pair here) get the router's addresses and the MTU, and go
// with the namespace.
func TestRouterOnly(t *testing.T) {
	testenv.RequireRoot(t)
	l, err := lab.New(context.Background(), lab.Config{RouterOnly: true, MTU: 9000})
	if err != nil {
		t.Fatal(err)
	}
	defer labtest.AssertLabGone(t, l.ID)
	defer l.Close()
	for _, ns := range []string{l.Client.NS, l.Server.NS} {
		if nsrun.Exists(ns) {
			t.Errorf("router-only lab created %s", ns)
		}
	}
	b, err := os.ReadFile(filepath.Join(lab.DefaultStateDir, l.ID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct{ Namespaces []string }
	if err := json.Unmarshal(b, &st); err != nil || !slices.Equal(st.Namespaces, []string{l.Router.NS}) {
		t.Fatalf("state file namespaces %v (%v), want only %s", st.Namespaces, err, l.Router.NS)
	}
	rt := testenv.NodeAt(t, l.Router.NS, l.Router.Handle)
	if err := rt.NL.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: l.Router.ClientLink, TxQLen: -1},
		PeerName: l.Router.ServerLink, PeerTxQLen: -1}); err != nil {
		t.Fatal(err)
	}
	if err := l.AttachRouterLinks(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		link string
		a4   netip.Addr
	}{{l.Router.ClientLink, l.Router.ClientIPv4}, {l.Router.ServerLink, l.Router.ServerIPv4}} {
		link, err := rt.NL.LinkByName(c.link)
		if err != nil {
			t.Fatal(err)
		}
		if link.Attrs().MTU != 9000 {
			t.Errorf("%s MTU %d, want 9000", c.link, link.Attrs().MTU)
		}
		addrs, err := rt.NL.AddrList(link, netlink.FAMILY_V4)
		if err != nil || len(addrs) != 1 || addrs[0].IP.String() != c.a4.String() {
			t.Errorf("%s addresses %v (%v), want %s", c.link, addrs, err, c.a4)
		}
	}
	if v, err := lab.ReadSysctl(l.Router.NS, "net.ipv4.ip_forward"); err != nil || v != "1" {
		t.Errorf("router forwarding %q (%v)", v, err)
	}
}
