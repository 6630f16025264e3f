package shell

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// A shell's two subnets (command-router, router-host) come from a range of
// their own, 10.202.0.0/16 and fd00:202::/48, as pair k: 10.202.2k.0/24
// and 10.202.2k+1.0/24. The first pair that overlaps no route and no
// address of the namespace the shell starts in is taken, so a shell
// started inside another (whose command's namespace holds the outer pair)
// and shells side by side each get their own.
var (
	shellRange4 = netip.MustParsePrefix("10.202.0.0/16")
	shellRange6 = netip.MustParsePrefix("fd00:202::/48")
)

// maxPairs is how many pairs 10.202.0.0/16 holds.
const maxPairs = 128

// subnetPair is pair k of the shell range.
type subnetPair struct {
	Inner4, Outer4 netip.Prefix
	Inner6, Outer6 netip.Prefix
}

func pairAt(k int) subnetPair {
	b4 := shellRange4.Addr().As4()
	b6 := shellRange6.Addr().As16()
	v4 := func(third int) netip.Prefix {
		a := b4
		a[2] = byte(third)
		return netip.PrefixFrom(netip.AddrFrom4(a), 24)
	}
	v6 := func(sub int) netip.Prefix {
		a := b6
		a[6], a[7] = byte(sub>>8), byte(sub)
		return netip.PrefixFrom(netip.AddrFrom16(a), 64)
	}
	return subnetPair{Inner4: v4(2 * k), Outer4: v4(2*k + 1), Inner6: v6(2 * k), Outer6: v6(2*k + 1)}
}

// freePair returns the first pair that overlaps nothing the current
// namespace routes to or has as an address. Default routes (/0) overlap
// everything and are not counted.
func freePair() (subnetPair, error) {
	nh, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return subnetPair{}, fmt.Errorf("subnets: netlink: %w", err)
	}
	defer nh.Close()
	var used []netip.Prefix
	routes, err := nh.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return subnetPair{}, fmt.Errorf("subnets: routes: %w", err)
	}
	for _, r := range routes {
		if r.Dst == nil {
			continue
		}
		a, ok := netip.AddrFromSlice(r.Dst.IP)
		ones, _ := r.Dst.Mask.Size()
		if ok && ones > 0 {
			used = append(used, netip.PrefixFrom(a.Unmap(), ones))
		}
	}
	addrs, err := nh.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return subnetPair{}, fmt.Errorf("subnets: addresses: %w", err)
	}
	for _, ad := range addrs {
		if a, ok := netip.AddrFromSlice(ad.IP); ok {
			ones, _ := ad.Mask.Size()
			used = append(used, netip.PrefixFrom(a.Unmap(), ones))
		}
	}
next:
	for k := range maxPairs {
		p := pairAt(k)
		for _, u := range used {
			for _, mine := range []netip.Prefix{p.Inner4, p.Outer4, p.Inner6, p.Outer6} {
				if u.Overlaps(mine) {
					continue next
				}
			}
		}
		return p, nil
	}
	return subnetPair{}, fmt.Errorf("subnets: every pair of %s is in use here", shellRange4)
}
