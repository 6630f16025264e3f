package proxy

import "github.com/wanlab/wanlab/internal/header"

// ipLength checks that p starts with a well-formed IPv4 or IPv6 header
// (header.StatedLength, ParseIP's checks) and returns the packet's length as its header states it
// (bytes after that are padding to be trimmed). ok is false for anything
// truncated or malformed, and for a header that states no length (an IPv4
// total length of 0, an IPv6 jumbogram): no TUN of ours hands over such
// super-packets (the offload backend splits GSO, the MTU is below 64 KiB),
// so they are counted and dropped, never forwarded. The capture analyzer,
// which sees them at a TSO sender, reads the same header the same way and
// takes the frame's length instead.
func ipLength(p []byte) (n int, ok bool) {
	n, err := header.StatedLength(p)
	if err != nil || n == 0 || n > len(p) {
		return 0, false
	}
	return n, true
}
