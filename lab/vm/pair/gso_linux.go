package pair

import "github.com/vishvananda/netlink"

// setGSOMaxSegs sets the most segments the kernel builds one GSO packet of.
func setGSOMaxSegs(link netlink.Link, n int) error { return netlink.LinkSetGSOMaxSegs(link, n) }
