package lab

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// An Outside lab (Config.Outside) has the caller's own namespace as its
// server end: `wanlab shell` puts a command behind a router namespace
// whose far side is the host. The host end of the router's server-side
// veth (Server.Link) gets the server address; the routes added there lead
// to the client subnets through the router and no further, so the host's
// own default route is untouched. Everything added in the caller's
// namespace hangs off that veth, which goes with the router namespace.

// checkOutside refuses the combinations an Outside lab cannot honour.
func (cfg Config) checkOutside() error {
	if !cfg.Outside {
		return nil
	}
	if cfg.RouterOnly {
		return errors.New("lab: Outside and RouterOnly exclude each other")
	}
	if len(cfg.ServerSysctls) > 0 {
		return errors.New("lab: an Outside lab's server is the caller's namespace; its sysctls are not the lab's to write")
	}
	return nil
}

// namespaces lists the named namespaces the lab creates.
func (l *Lab) namespaces() []string {
	if l.cfg.Outside {
		return []string{l.Router.NS, l.Client.NS}
	}
	return []string{l.Router.NS, l.Client.NS, l.Server.NS}
}

// configureOutside sets up the host end of the router's server-side veth
// in the caller's namespace and gives the router its default routes
// through it. Duplicate address detection is turned off on that one link
// (a sysctl of the lab's own link, gone with it), so its link-local
// address is usable at once, as in the lab's own namespaces.
func (l *Lab) configureOutside(rt *netlink.Handle) error {
	h := &l.Server
	if err := WriteSysctls("", map[string]string{"net.ipv6.conf." + h.Link + ".accept_dad": "0"}); err != nil {
		return fmt.Errorf("outside: %w", err)
	}
	nh, err := netlink.NewHandleAt(h.Handle)
	if err != nil {
		return fmt.Errorf("outside: netlink: %w", err)
	}
	defer nh.Close()
	if err := upWithAddrs(nh, h.Link, addrOf(h.IPv4, h.Net4), addrOf(h.IPv6, h.Net6)); err != nil {
		return fmt.Errorf("outside: %w", err)
	}
	link, err := nh.LinkByName(h.Link)
	if err != nil {
		return fmt.Errorf("outside: link %s: %w", h.Link, err)
	}
	for _, r := range []struct {
		dst netip.Prefix
		gw  netip.Addr
	}{{l.Client.Net4, h.GatewayIPv4}, {l.Client.Net6, h.GatewayIPv6}} {
		route := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: prefixNet(r.dst), Gw: r.gw.AsSlice()}
		if err := nh.RouteAdd(route); err != nil {
			return fmt.Errorf("outside: route %s via %s dev %s: %w", r.dst, r.gw, h.Link, err)
		}
	}
	rlink, err := rt.LinkByName(l.Router.ServerLink)
	if err != nil {
		return fmt.Errorf("router: link %s: %w", l.Router.ServerLink, err)
	}
	for _, gw := range []netip.Addr{h.IPv4, h.IPv6} {
		r := &netlink.Route{LinkIndex: rlink.Attrs().Index, Gw: gw.AsSlice(), Family: familyV4}
		if gw.Is6() {
			r.Family = familyV6
		}
		if err := rt.RouteAdd(r); err != nil {
			return fmt.Errorf("router: default route via %s dev %s: %w", gw, l.Router.ServerLink, err)
		}
	}
	return nil
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// ValidID reports whether id can name a lab (Config.ID).
func ValidID(id string) bool { return validID(id) }
