// Package lab builds the three-host test network the experiments run on: a
// client, a router and a server network namespace joined by two veth pairs,
// with IPv4 and IPv6 addresses from private test ranges that exist only
// inside those namespaces, and tears every object down again.
//
// Nothing is created in the caller's namespace: the veth pairs are made
// inside the router namespace with their peers placed straight into the
// client and server namespaces, so a lab can never collide with the host's
// interfaces or with another lab, and deleting the namespaces removes all of
// it. Each lab records its objects in a state file (see Cleanup) before it
// creates them, so a crashed run can be cleaned up afterwards.
package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/wanlab/wanlab/internal/nsrun"
)

// NamePrefix starts the name of every namespace a lab creates
// ("wanlab-<id>-client"); Cleanup only ever touches names of that shape.
const NamePrefix = "wanlab-"

// Roles of the three hosts, used in namespace names and state files.
const (
	RoleClient = "client"
	RoleRouter = "router"
	RoleServer = "server"
)

// Default address plan. The ranges are private test ranges and are
// configured only inside the lab's own namespaces; each lab has its own
// namespaces, so concurrent labs reuse the same plan without conflict.
var (
	DefaultClientNet4 = netip.MustParsePrefix("10.201.1.0/24")
	DefaultServerNet4 = netip.MustParsePrefix("10.201.2.0/24")
	DefaultClientNet6 = netip.MustParsePrefix("fd00:201:1::/64")
	DefaultServerNet6 = netip.MustParsePrefix("fd00:201:2::/64")
)

// Config chooses how a lab is built. The zero value is a working default.
type Config struct {
	// ID names the lab's objects; empty means 6 random hex digits. It must
	// be 1 to 8 characters of [0-9a-z] so link names fit in 15 bytes.
	ID string
	// Rand supplies the random ID; nil means crypto/rand.
	Rand io.Reader

	// ClientNet4/ServerNet4/ClientNet6/ServerNet6 are the client-router and
	// router-server subnets. The router takes the first host address of
	// each (.1, ::1) and the end host the second (.2, ::2).
	ClientNet4, ServerNet4 netip.Prefix
	ClientNet6, ServerNet6 netip.Prefix

	// MTU of all veths; 0 keeps the kernel default (1500).
	MTU int

	// ClientLink, RouterClientLink, RouterServerLink and ServerLink name
	// the veths (client's toward the router, the router's two, the
	// server's); empty means "wl<id>-c", "wl<id>-rc", "wl<id>-rs" and
	// "wl<id>-s". Each lab has its own namespaces, so fixed names ("c0",
	// "eth0") cannot collide between labs.
	ClientLink, RouterClientLink, RouterServerLink, ServerLink string

	// Offloads to turn off on every veth. veth defaults (TSO/GSO/GRO on)
	// make the kernel hand 64 KB super-segments to captures and to a TUN
	// proxy; turning them off gives wire-sized packets at a CPU cost.
	DisableTSO, DisableGSO, DisableGRO bool

	// ClientSysctls, RouterSysctls and ServerSysctls are written into
	// /proc/sys of that host's namespace after it is built, keys in sysctl
	// notation ("net.ipv4.tcp_wmem": "4096 4096 4096").
	ClientSysctls, RouterSysctls, ServerSysctls map[string]string

	// RouterOnly builds the router namespace alone, without veths or end
	// hosts: the caller creates the router's two links in it (the TAP
	// devices of two VMs, named RouterClientLink and RouterServerLink)
	// and then calls AttachRouterLinks. The end hosts keep their planned
	// addresses, for the caller to configure on its own hosts.
	RouterOnly bool

	// Outside makes the caller's own namespace the server end: no server
	// namespace is made, the router's server-side veth has its peer in
	// the caller's namespace, and routes there lead to the client subnets
	// through the router (see outside.go).
	Outside bool
}

// Host is an end host (client or server) of the lab.
type Host struct {
	Role string
	// NS is the named namespace (visible to `ip netns`); Handle an open
	// handle to it, owned by the Lab.
	NS     string
	Handle netns.NsHandle
	// Link is the host's veth toward the router; IPv4/IPv6 its addresses,
	// GatewayIPv4/GatewayIPv6 the router's addresses on the same link.
	Link                     string
	IPv4, IPv6               netip.Addr
	GatewayIPv4, GatewayIPv6 netip.Addr
	// Net4 and Net6 are the subnets of Link.
	Net4, Net6 netip.Prefix
}

// Do runs fn inside the host's namespace on a locked OS thread; sockets it
// opens stay in the namespace.
func (h *Host) Do(fn func() error) error { return nsrun.Do(h.Handle, fn) }

// Router is the middle host. Forwarding is on for IPv4 and IPv6.
type Router struct {
	NS     string
	Handle netns.NsHandle
	// ClientLink faces the client, ServerLink the server.
	ClientLink, ServerLink string
	// Addresses of the router on each side.
	ClientIPv4, ClientIPv6 netip.Addr
	ServerIPv4, ServerIPv6 netip.Addr
}

// Do runs fn inside the router's namespace on a locked OS thread.
func (r *Router) Do(fn func() error) error { return nsrun.Do(r.Handle, fn) }

// Lab is a built topology. Close removes it.
type Lab struct {
	ID     string
	Client Host
	Router Router
	Server Host

	cfg       Config
	state     *stateFile
	stopWatch func() bool
	closeOnce sync.Once
	closeErr  error
	done      chan struct{}
}

// New builds a lab. If ctx is cancelled while the lab exists (Ctrl-C in the
// caller), the lab tears itself down; the caller still calls Close, which
// then returns the same result. On error every object already created is
// removed before New returns.
func New(ctx context.Context, cfg Config) (_ *Lab, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	l := newPlan(cfg)
	st, err := createState(DefaultStateDir, l)
	if err != nil {
		return nil, err
	}
	l.state = st
	defer func() {
		if err != nil {
			if cerr := l.teardown(); cerr != nil {
				err = fmt.Errorf("%w (and teardown: %v)", err, cerr)
			}
		}
	}()
	if err := l.build(ctx, cfg); err != nil {
		return nil, fmt.Errorf("lab %s: %w", l.ID, err)
	}
	l.stopWatch = context.AfterFunc(ctx, func() { _ = l.Close() })
	return l, nil
}

func (cfg Config) withDefaults() (Config, error) {
	if cfg.ID == "" {
		r := cfg.Rand
		if r == nil {
			r = rand.Reader
		}
		var b [3]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return cfg, fmt.Errorf("lab id: %w", err)
		}
		cfg.ID = hex.EncodeToString(b[:])
	}
	if !validID(cfg.ID) {
		return cfg, fmt.Errorf("lab id %q: want 1-8 characters of [0-9a-z]", cfg.ID)
	}
	def := func(p *netip.Prefix, d netip.Prefix) {
		if !p.IsValid() {
			*p = d
		}
	}
	def(&cfg.ClientNet4, DefaultClientNet4)
	def(&cfg.ServerNet4, DefaultServerNet4)
	def(&cfg.ClientNet6, DefaultClientNet6)
	def(&cfg.ServerNet6, DefaultServerNet6)
	for _, p := range []netip.Prefix{cfg.ClientNet4, cfg.ServerNet4} {
		if !p.Addr().Is4() || p.Bits() > 30 {
			return cfg, fmt.Errorf("lab subnet %s: want an IPv4 prefix of /30 or shorter", p)
		}
	}
	for _, p := range []netip.Prefix{cfg.ClientNet6, cfg.ServerNet6} {
		if !p.Addr().Is6() || p.Addr().Is4In6() || p.Bits() > 126 {
			return cfg, fmt.Errorf("lab subnet %s: want an IPv6 prefix of /126 or shorter", p)
		}
	}
	if cfg.ClientNet4.Overlaps(cfg.ServerNet4) || cfg.ClientNet6.Overlaps(cfg.ServerNet6) {
		return cfg, errors.New("lab subnets: client and server subnets overlap")
	}
	for _, l := range []struct {
		name *string
		def  string
	}{{&cfg.ClientLink, "-c"}, {&cfg.RouterClientLink, "-rc"}, {&cfg.RouterServerLink, "-rs"}, {&cfg.ServerLink, "-s"}} {
		if *l.name == "" {
			*l.name = "wl" + cfg.ID + l.def
		}
		if !validLinkName(*l.name) {
			return cfg, fmt.Errorf("lab link name %q: want 1-15 bytes without '/', ':' or spaces", *l.name)
		}
	}
	if cfg.RouterClientLink == cfg.RouterServerLink {
		return cfg, fmt.Errorf("lab link names: the router's two links are both %q", cfg.RouterClientLink)
	}
	return cfg, cfg.checkOutside()
}

// validLinkName applies the kernel's rule for interface names
// (dev_valid_name in net/core/dev.c), minus "." and "..".
func validLinkName(name string) bool {
	return len(name) > 0 && len(name) < 16 && name != "." && name != ".." &&
		!strings.ContainsAny(name, "/: \t\n")
}

func validID(id string) bool {
	if len(id) == 0 || len(id) > 8 {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') {
			return false
		}
	}
	return true
}

// nsName is the namespace name of a role in lab id.
func nsName(id, role string) string { return NamePrefix + id + "-" + role }

// HostAddr returns the n-th address of p (n=1 is .1), as the lab's plan
// numbers the router (.1) and the host (.2) of each network.
func HostAddr(p netip.Prefix, n int) netip.Addr {
	a := p.Masked().Addr()
	for range n {
		a = a.Next()
	}
	return a
}

// newPlan fills in every name and address without creating anything, so
// the state file can list them before the first object exists.
func newPlan(cfg Config) *Lab {
	id := cfg.ID
	// Each end host is .2 of its networks, its gateway the router's .1.
	endHost := func(role, link string, net4, net6 netip.Prefix) Host {
		return Host{
			Role: role, NS: nsName(id, role), Handle: netns.None(), Link: link,
			IPv4: HostAddr(net4, 2), IPv6: HostAddr(net6, 2),
			GatewayIPv4: HostAddr(net4, 1), GatewayIPv6: HostAddr(net6, 1),
			Net4: net4.Masked(), Net6: net6.Masked(),
		}
	}
	l := &Lab{
		ID: id, cfg: cfg, done: make(chan struct{}),
		Client: endHost(RoleClient, cfg.ClientLink, cfg.ClientNet4, cfg.ClientNet6),
		Router: Router{
			NS: nsName(id, RoleRouter), Handle: netns.None(),
			ClientLink: cfg.RouterClientLink, ServerLink: cfg.RouterServerLink,
			ClientIPv4: HostAddr(cfg.ClientNet4, 1), ClientIPv6: HostAddr(cfg.ClientNet6, 1),
			ServerIPv4: HostAddr(cfg.ServerNet4, 1), ServerIPv6: HostAddr(cfg.ServerNet6, 1),
		},
		Server: endHost(RoleServer, cfg.ServerLink, cfg.ServerNet4, cfg.ServerNet6),
	}
	if cfg.Outside {
		l.Server.NS = "" // the caller's namespace
	}
	return l
}

func (l *Lab) build(ctx context.Context, cfg Config) error {
	if cfg.RouterOnly {
		return l.buildRouterOnly(cfg)
	}
	var err error
	for _, ns := range []struct {
		name string
		h    *netns.NsHandle
	}{{l.Router.NS, &l.Router.Handle}, {l.Client.NS, &l.Client.Handle}, {l.Server.NS, &l.Server.Handle}} {
		if ns.name == "" { // Outside: the caller's namespace
			if *ns.h, err = nsrun.Open(""); err != nil {
				return err
			}
			continue
		}
		if *ns.h, err = nsrun.Create(ns.name); err != nil {
			return err
		}
	}
	// Without duplicate address detection the link-local addresses, which
	// IPv6 neighbour discovery needs, are usable as soon as a veth is up
	// instead of about two seconds later. Set before the veths exist so
	// they inherit it from "default".
	for _, ns := range l.namespaces() {
		if err := WriteSysctls(ns, map[string]string{
			"net.ipv6.conf.all.accept_dad":     "0",
			"net.ipv6.conf.default.accept_dad": "0",
		}); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	rt, err := netlink.NewHandleAt(l.Router.Handle)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", l.Router.NS, err)
	}
	defer rt.Close()
	pairs := []struct {
		local, peer string
		peerNS      netns.NsHandle
	}{
		{l.Router.ClientLink, l.Client.Link, l.Client.Handle},
		{l.Router.ServerLink, l.Server.Link, l.Server.Handle},
	}
	for _, p := range pairs {
		// TxQLen -1: the kernel's default queue length (1000), as `ip link
		// add` gives; netlink would otherwise send 0, and qdiscs that size
		// their queue from it (pfifo, htb's direct queue) would hold 1-2
		// packets.
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: p.local, MTU: cfg.MTU, TxQLen: -1},
			PeerName:      p.peer,
			PeerTxQLen:    -1,
			PeerNamespace: netlink.NsFd(p.peerNS),
		}
		if err := rt.LinkAdd(veth); err != nil {
			return fmt.Errorf("veth %s/%s: %w", p.local, p.peer, err)
		}
	}
	if err := l.configureRouter(rt); err != nil {
		return err
	}
	if err := l.Client.configure(); err != nil {
		return err
	}
	if cfg.Outside {
		if err := l.configureOutside(rt); err != nil {
			return err
		}
	} else if err := l.Server.configure(); err != nil {
		return err
	}
	if cfg.DisableTSO || cfg.DisableGSO || cfg.DisableGRO {
		for _, at := range []struct {
			ns   netns.NsHandle
			link string
		}{{l.Router.Handle, l.Router.ClientLink}, {l.Router.Handle, l.Router.ServerLink},
			{l.Client.Handle, l.Client.Link}, {l.Server.Handle, l.Server.Link}} {
			for _, f := range []struct {
				off  bool
				feat Offload
			}{{cfg.DisableTSO, OffloadTSO}, {cfg.DisableGSO, OffloadGSO}, {cfg.DisableGRO, OffloadGRO}} {
				if !f.off {
					continue
				}
				if err := SetOffload(at.ns, at.link, f.feat, false); err != nil {
					return err
				}
			}
		}
	}
	for _, s := range []struct {
		ns string
		kv map[string]string
	}{{l.Client.NS, cfg.ClientSysctls}, {l.Router.NS, cfg.RouterSysctls}, {l.Server.NS, cfg.ServerSysctls}} {
		if err := WriteSysctls(s.ns, s.kv); err != nil {
			return err
		}
	}
	return l.waitLinksUp(ctx, rt)
}

// buildRouterOnly creates the router namespace with forwarding on and
// duplicate address detection off, and nothing else.
func (l *Lab) buildRouterOnly(cfg Config) error {
	var err error
	if l.Router.Handle, err = nsrun.Create(l.Router.NS); err != nil {
		return err
	}
	if err := WriteSysctls(l.Router.NS, map[string]string{
		"net.ipv6.conf.all.accept_dad":     "0",
		"net.ipv6.conf.default.accept_dad": "0",
		"net.ipv4.ip_forward":              "1",
		"net.ipv6.conf.all.forwarding":     "1",
	}); err != nil {
		return err
	}
	rt, err := netlink.NewHandleAt(l.Router.Handle)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", l.Router.NS, err)
	}
	defer rt.Close()
	if err := upLoopback(rt); err != nil {
		return fmt.Errorf("router: %w", err)
	}
	return WriteSysctls(l.Router.NS, cfg.RouterSysctls)
}

// AttachRouterLinks configures a RouterOnly lab's two links, which the
// caller created in the router namespace: the router's addresses on each,
// the MTU of the config, up, and returns once both are settled.
func (l *Lab) AttachRouterLinks(ctx context.Context) error {
	if !l.cfg.RouterOnly {
		return fmt.Errorf("lab %s: AttachRouterLinks needs a RouterOnly lab", l.ID)
	}
	rt, err := netlink.NewHandleAt(l.Router.Handle)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", l.Router.NS, err)
	}
	defer rt.Close()
	if l.cfg.MTU > 0 {
		for _, name := range []string{l.Router.ClientLink, l.Router.ServerLink} {
			link, err := rt.LinkByName(name)
			if err != nil {
				return fmt.Errorf("lab %s: link %s: %w", l.ID, name, err)
			}
			if err := rt.LinkSetMTU(link, l.cfg.MTU); err != nil {
				return fmt.Errorf("lab %s: MTU %d on %s: %w", l.ID, l.cfg.MTU, name, err)
			}
		}
	}
	if err := l.configureRouter(rt); err != nil {
		return fmt.Errorf("lab %s: %w", l.ID, err)
	}
	deadline := time.Now().Add(settleWithin)
	for _, name := range []string{l.Router.ClientLink, l.Router.ServerLink} {
		if err := waitSettled(ctx, rt, name, true, deadline); err != nil {
			return err
		}
	}
	return nil
}

// settleWithin bounds how long New waits for the kernel's asynchronous
// link set-up; it takes microseconds to milliseconds, seconds only when
// rtnl is held for long by namespace teardowns elsewhere on the host.
const settleWithin = 10 * time.Second

// waitLinksUp returns once every veth of the lab is operationally up and
// its IPv6 addresses, a link-local one among them, are no longer
// tentative. Both happen after New's netlink calls return, and until then
// the first packets are lost and cost the caller a one-second
// retransmission:
//
//   - Until the link watch has handled a veth's carrier-on, its transmit
//     queue stays on noop_qdisc, which drops every packet (dev_activate in
//     net/sched/sch_generic.c waits for carrier, which the end brought up
//     first did not have): the first ARP reply or SYN-ACK. Reading a link
//     with RTM_GETLINK runs its pending link-watch event (rtnl_getlink
//     calls linkwatch_sync_dev, net/core/rtnetlink.c), so the first poll
//     normally settles it; on kernels without that the poll waits for the
//     work itself.
//   - Until the addrconf work has run for an address (even one without
//     DAD, addrconf_dad_begin in net/ipv6/addrconf.c), the host has not
//     joined its solicited-node multicast group and ignores the neighbour
//     solicitations for it: the first IPv6 packet waits for the next
//     solicitation, a second later. The work clears the tentative flag
//     after the join.
func (l *Lab) waitLinksUp(ctx context.Context, rt *netlink.Handle) error {
	links := []struct {
		ns   netns.NsHandle
		name string
	}{{l.Router.Handle, l.Router.ClientLink}, {l.Router.Handle, l.Router.ServerLink},
		{l.Client.Handle, l.Client.Link}, {l.Server.Handle, l.Server.Link}}
	deadline := time.Now().Add(settleWithin)
	for _, lk := range links {
		nh := rt
		if lk.ns != l.Router.Handle {
			h, err := netlink.NewHandleAt(lk.ns)
			if err != nil {
				return fmt.Errorf("netlink for %s: %w", lk.name, err)
			}
			defer h.Close()
			nh = h
		}
		if err := waitSettled(ctx, nh, lk.name, false, deadline); err != nil {
			return err
		}
	}
	return nil
}

// waitSettled polls linkSettled until the link has settled, ctx ends or
// the deadline passes.
func waitSettled(ctx context.Context, nh *netlink.Handle, name string, tap bool, deadline time.Time) error {
	for {
		why, err := linkSettled(nh, name, tap)
		if err != nil {
			return err
		}
		if why == "" {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("link %s: %s %v after it was set up", name, why, settleWithin)
		}
		time.Sleep(time.Millisecond) // polling interval: netlink has no "settled" event
	}
}

// linkSettled reports what the link still lacks ("" once settled). A TAP
// reports no operational state ("unknown") while up: tap allows that.
func linkSettled(nh *netlink.Handle, name string, tap bool) (string, error) {
	link, err := nh.LinkByName(name)
	if err != nil {
		return "", fmt.Errorf("link %s: %w", name, err)
	}
	if st := link.Attrs().OperState; st != netlink.OperUp && !(tap && st == netlink.OperUnknown && link.Attrs().Flags&net.FlagUp != 0) {
		return fmt.Sprintf("operational state %s", st), nil
	}
	addrs, err := nh.AddrList(link, familyV6)
	if err != nil {
		return "", fmt.Errorf("link %s: addresses: %w", name, err)
	}
	linkLocal := false
	for _, a := range addrs {
		if a.Flags&ifaFTentative != 0 {
			return fmt.Sprintf("address %s tentative", a.IPNet), nil
		}
		linkLocal = linkLocal || a.IP.IsLinkLocalUnicast()
	}
	if !linkLocal && len(addrs) > 0 {
		// (No IPv6 address at all: a sysctl of the config turned IPv6 off.)
		return "no IPv6 link-local address", nil
	}
	return "", nil
}

// ifaFTentative is IFA_F_TENTATIVE of include/uapi/linux/if_addr.h.
const ifaFTentative = 0x40

// nodad makes IPv6 addresses usable at once instead of after duplicate
// address detection (about a second), which nobody else on a veth could
// fail anyway. (IFA_F_NODAD of include/uapi/linux/if_addr.h.)
const nodad = 0x02

// Address families as Linux numbers them (AF_INET, AF_INET6), spelled out so
// the package still compiles on other systems.
const (
	familyV4 = 2
	familyV6 = 10
)

func addrOf(a netip.Addr, p netip.Prefix) *netlink.Addr {
	ad := &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(p.Bits(), a.BitLen())}}
	if a.Is6() {
		ad.Flags = nodad
	}
	return ad
}

func (l *Lab) configureRouter(rt *netlink.Handle) error {
	cfg := l.cfg
	for _, side := range []struct {
		link   string
		a4, a6 netip.Addr
		p4, p6 netip.Prefix
	}{
		{l.Router.ClientLink, l.Router.ClientIPv4, l.Router.ClientIPv6, cfg.ClientNet4, cfg.ClientNet6},
		{l.Router.ServerLink, l.Router.ServerIPv4, l.Router.ServerIPv6, cfg.ServerNet4, cfg.ServerNet6},
	} {
		if err := upWithAddrs(rt, side.link, addrOf(side.a4, side.p4), addrOf(side.a6, side.p6)); err != nil {
			return fmt.Errorf("router: %w", err)
		}
	}
	if err := upLoopback(rt); err != nil {
		return fmt.Errorf("router: %w", err)
	}
	return WriteSysctls(l.Router.NS, map[string]string{
		"net.ipv4.ip_forward":          "1",
		"net.ipv6.conf.all.forwarding": "1",
	})
}

func (h *Host) configure() error {
	nh, err := netlink.NewHandleAt(h.Handle)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", h.NS, err)
	}
	defer nh.Close()
	if err := upWithAddrs(nh, h.Link, addrOf(h.IPv4, h.Net4), addrOf(h.IPv6, h.Net6)); err != nil {
		return fmt.Errorf("%s: %w", h.Role, err)
	}
	if err := upLoopback(nh); err != nil {
		return fmt.Errorf("%s: %w", h.Role, err)
	}
	link, err := nh.LinkByName(h.Link)
	if err != nil {
		return fmt.Errorf("%s: link %s: %w", h.Role, h.Link, err)
	}
	for _, gw := range []netip.Addr{h.GatewayIPv4, h.GatewayIPv6} {
		r := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: gw.AsSlice()}
		if gw.Is6() {
			r.Family = familyV6
		} else {
			r.Family = familyV4
		}
		if err := nh.RouteAdd(r); err != nil {
			return fmt.Errorf("%s: default route via %s dev %s: %w", h.Role, gw, h.Link, err)
		}
	}
	return nil
}

func upWithAddrs(nh *netlink.Handle, name string, addrs ...*netlink.Addr) error {
	link, err := nh.LinkByName(name)
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	for _, a := range addrs {
		if err := nh.AddrAdd(link, a); err != nil {
			return fmt.Errorf("address %s on %s: %w", a.IPNet, name, err)
		}
	}
	if err := nh.LinkSetUp(link); err != nil {
		return fmt.Errorf("link %s up: %w", name, err)
	}
	return nil
}

func upLoopback(nh *netlink.Handle) error {
	lo, err := nh.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("link lo: %w", err)
	}
	if err := nh.LinkSetUp(lo); err != nil {
		return fmt.Errorf("link lo up: %w", err)
	}
	return nil
}

// Close removes the lab: the veth pairs, the three namespaces and the state
// file. It is safe to call more than once and from several goroutines.
func (l *Lab) Close() error {
	l.closeOnce.Do(func() {
		if l.stopWatch != nil {
			l.stopWatch()
		}
		l.closeErr = l.teardown()
		close(l.done)
	})
	return l.closeErr
}

// Done is closed once the lab has been torn down, by Close or by the
// cancellation of New's context.
func (l *Lab) Done() <-chan struct{} { return l.done }

// teardown deletes whatever of the plan exists. The router's veths are
// deleted explicitly so the pairs vanish at once even while a socket still
// holds a namespace alive; the state file goes last, and only when
// everything else went, so Cleanup can retry a partial teardown.
func (l *Lab) teardown() error {
	var errs []error
	if l.Router.Handle.IsOpen() {
		if rt, err := netlink.NewHandleAt(l.Router.Handle); err == nil {
			for _, name := range []string{l.Router.ClientLink, l.Router.ServerLink} {
				if link, err := rt.LinkByName(name); err == nil {
					if err := rt.LinkDel(link); err != nil {
						errs = append(errs, fmt.Errorf("delete veth %s: %w", name, err))
					}
				}
			}
			rt.Close()
		}
	}
	for _, h := range []*netns.NsHandle{&l.Client.Handle, &l.Router.Handle, &l.Server.Handle} {
		if h.IsOpen() {
			_ = h.Close()
			*h = netns.None()
		}
	}
	for _, name := range l.namespaces() {
		if err := nsrun.Delete(name); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 && l.state != nil {
		if err := l.state.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("lab %s: teardown: %w", l.ID, errors.Join(errs...))
	}
	return nil
}
