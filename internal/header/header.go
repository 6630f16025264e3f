// Package header reads IPv4, IPv6, TCP and UDP headers in place, without
// allocating, with every length check in one place: the proxy, its
// classifier and ECN marking, and the capture filter use it, so they agree
// on what a packet is. (gvisor's pkg/tcpip/header is the model: typed
// views over bytes.)
package header

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// IP protocol numbers this package knows.
const (
	ProtoTCP     = 6
	ProtoUDP     = 17
	ProtoSCTP    = 132
	ProtoUDPLite = 136

	ipv6HopOpt = 0
	ipv6Route  = 43
	ipv6Frag   = 44
	ipv6Dest   = 60
)

// Errors of ParseIP.
var (
	ErrTruncated = errors.New("truncated IP header")
	ErrVersion   = errors.New("not IPv4 or IPv6")
	ErrMalformed = errors.New("malformed IP header")
)

// maxExtHeaders bounds the walk over IPv6 extension headers: a packet with
// more is not worth it (its transport header stays unknown).
const maxExtHeaders = 8

// Layout is where a packet's IP header puts things: its version, lengths,
// transport protocol and IPv4 ID, with every length check of ParseIP. It is
// what a decoder that copies the addresses itself needs (the analyzer's),
// without the netip.Addr conversions of a whole IP.
type Layout struct {
	Version uint8
	// Proto is the transport protocol, after IPv6 extension headers.
	Proto uint8
	// ID is IPv4's identification field (IPv6 has none outside fragments).
	ID uint16
	// HeaderLen is the length of the IP header, IPv6 extension headers
	// included: where the transport header starts (when TransportOK).
	HeaderLen int
	// Length is the packet's length as the header states it (IPv4 total
	// length, IPv6 40 + payload length). 0 means the header states none:
	// an IPv4 total length of 0 or an IPv6 payload length of 0 with data
	// behind (a TSO, BIG TCP or jumbo super-packet, as captures at a
	// sender hold them). It may exceed the bytes at hand (a snap length).
	Length int
	// LaterFragment is set for a fragment other than the first: it
	// carries no transport header.
	LaterFragment bool
	// TransportOK says the transport header starts at HeaderLen: the
	// packet is not a later fragment and its extension headers were
	// walked to the end.
	TransportOK bool
}

// Locate reads the layout of the IP header at the start of b into l, which
// it overwrites whole (all zero on error). It fails as ParseIP does: only
// when the header itself is cut off or malformed.
//
// Every field is stored on its own rather than as one composite value: a
// Layout is too big for the compiler to keep in registers, and a struct
// copied in wide moves right after narrow field stores stalls the CPU's
// store forwarding, which cost per-packet callers more than the checks.
func (l *Layout) Locate(b []byte) error {
	if len(b) < 1 {
		*l = Layout{}
		return ErrTruncated
	}
	switch b[0] >> 4 {
	case 4:
		ihl, total, err := checkIPv4(b)
		if err != nil {
			*l = Layout{}
			return err
		}
		later := binary.BigEndian.Uint16(b[6:8])&0x1fff != 0
		l.Version, l.Proto, l.ID = 4, b[9], binary.BigEndian.Uint16(b[4:6])
		l.HeaderLen, l.Length = ihl, total
		l.LaterFragment, l.TransportOK = later, !later
		return nil
	case 6:
		total, err := checkIPv6(b)
		if err != nil {
			*l = Layout{}
			return err
		}
		l.Version, l.ID, l.Length = 6, 0, total
		l.Proto, l.HeaderLen, l.LaterFragment, l.TransportOK = walkIPv6(b)
		return nil
	}
	*l = Layout{}
	return ErrVersion
}

// IP is what a packet's IPv4 or IPv6 header says: its Layout and the
// fields a forwarder or classifier reads besides.
type IP struct {
	Layout
	DSCP     uint8 // differentiated services code point
	ECN      uint8 // the two ECN bits
	HopLimit uint8 // IPv4 TTL, IPv6 hop limit
	Src, Dst netip.Addr
}

// ParseIP reads the IP header at the start of b. It fails only when the
// header itself is cut off or malformed; a packet longer than b (a
// capture's snap length) is reported by Length.
func ParseIP(b []byte) (IP, error) {
	var ip IP
	err := ip.Parse(b)
	return ip, err
}

// Parse is ParseIP into ip, which it overwrites whole: the form for hot
// paths, which keep one IP and avoid copying it back per packet. The
// checks are Locate's.
func (ip *IP) Parse(b []byte) error {
	if err := ip.Layout.Locate(b); err != nil {
		*ip = IP{}
		return err
	}
	// Locate set the Layout; the rest of ip is set in full below.
	if ip.Version == 4 {
		ip.DSCP, ip.ECN = b[1]>>2, b[1]&3
		ip.HopLimit = b[8]
		ip.Src = netip.AddrFrom4([4]byte(b[12:16]))
		ip.Dst = netip.AddrFrom4([4]byte(b[16:20]))
		return nil
	}
	tc := b[0]<<4 | b[1]>>4
	ip.DSCP, ip.ECN = tc>>2, tc&3
	ip.HopLimit = b[7]
	ip.Src = netip.AddrFrom16([16]byte(b[8:24]))
	ip.Dst = netip.AddrFrom16([16]byte(b[24:40]))
	return nil
}

// StatedLength is ParseIP's length check alone, for a hot path that needs
// nothing else (the proxy's reader): the packet's length as its IP header
// states it, 0 when it states none, or ParseIP's error.
func StatedLength(b []byte) (int, error) {
	if len(b) < 1 {
		return 0, ErrTruncated
	}
	switch b[0] >> 4 {
	case 4:
		_, total, err := checkIPv4(b)
		return total, err
	case 6:
		return checkIPv6(b)
	}
	return 0, ErrVersion
}

// checkIPv4 is every length check of an IPv4 header: it returns the
// header length and the stated total length (0: none).
func checkIPv4(b []byte) (ihl, total int, err error) {
	if len(b) < 20 {
		return 0, 0, ErrTruncated
	}
	ihl = int(b[0]&0x0f) * 4
	if ihl < 20 {
		return 0, 0, ErrMalformed
	}
	if len(b) < ihl {
		return 0, 0, ErrTruncated
	}
	total = int(binary.BigEndian.Uint16(b[2:4]))
	if total != 0 && total < ihl {
		return 0, 0, ErrMalformed
	}
	return ihl, total, nil
}

// checkIPv6 is the length check of an IPv6 header: the stated length, 40 +
// payload length, or 0 for a payload length of 0 with data behind (a
// jumbogram).
func checkIPv6(b []byte) (total int, err error) {
	if len(b) < 40 {
		return 0, ErrTruncated
	}
	if payload := int(binary.BigEndian.Uint16(b[4:6])); payload != 0 || len(b) == 40 {
		return 40 + payload, nil
	}
	return 0, nil
}

// walkIPv6 follows the extension headers (hop-by-hop, routing,
// destination options, fragment) to the transport header.
func walkIPv6(b []byte) (proto uint8, hdrLen int, later, transportOK bool) {
	next, off := b[6], 40
	for range maxExtHeaders {
		switch next {
		case ipv6HopOpt, ipv6Route, ipv6Dest:
			if len(b) < off+8 {
				return next, off, false, false
			}
			next, off = b[off], off+8*(int(b[off+1])+1)
		case ipv6Frag:
			if len(b) < off+8 {
				return next, off, false, false
			}
			offset := binary.BigEndian.Uint16(b[off+2:off+4]) &^ 7
			next, off = b[off], off+8
			if offset != 0 {
				return next, off, true, false
			}
		default:
			return next, off, false, off <= len(b)
		}
	}
	return next, off, false, false
}

// Transport returns the transport header and payload of b, cut at the
// stated Length, or nil when ip has none (TransportOK false).
func (ip *Layout) Transport(b []byte) []byte {
	if !ip.TransportOK || ip.HeaderLen > len(b) {
		return nil
	}
	end := len(b)
	if ip.Length != 0 && ip.Length < end {
		end = ip.Length
	}
	if end < ip.HeaderLen {
		return nil
	}
	return b[ip.HeaderLen:end]
}

// HasPorts reports whether the protocol starts with 16-bit source and
// destination ports (TCP, UDP, SCTP, UDP-Lite).
func HasPorts(proto uint8) bool {
	switch proto {
	case ProtoTCP, ProtoUDP, ProtoSCTP, ProtoUDPLite:
		return true
	}
	return false
}

// Ports reads the ports at the start of a transport header.
func Ports(l4 []byte) (src, dst uint16, ok bool) {
	if len(l4) < 4 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint16(l4[0:2]), binary.BigEndian.Uint16(l4[2:4]), true
}

// SetCE mirrors the kernel's INET_ECN_set_ce() on an IP packet: an
// ECN-capable packet (ECT(0) or ECT(1)) gets CE and true; a packet already
// marked CE returns true unchanged; a not-ECT packet (or one too short to
// carry an IP header) returns false. IPv4's header checksum is updated
// incrementally (RFC 1624) as IP_ECN_set_ce does.
func SetCE(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	switch b[0] >> 4 {
	case 4:
		if len(b) < 20 {
			return false
		}
		switch b[1] & 3 {
		case 0:
			return false
		case 3:
			return true
		}
		old := uint16(b[0])<<8 | uint16(b[1])
		b[1] |= 3
		neu := uint16(b[0])<<8 | uint16(b[1])
		hc := uint16(b[10])<<8 | uint16(b[11])
		// HC' = ~(~HC + ~m + m')
		sum := uint32(^hc) + uint32(^old) + uint32(neu)
		sum = (sum & 0xffff) + (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16)
		hc = ^uint16(sum)
		b[10], b[11] = byte(hc>>8), byte(hc)
		return true
	case 6:
		if len(b) < 40 {
			return false
		}
		// Traffic class spans b[0] low nibble and b[1] high nibble; ECN is
		// its two low bits, i.e. bits 4-5 of b[1].
		switch (b[1] >> 4) & 3 {
		case 0:
			return false
		case 3:
			return true
		}
		b[1] |= 0x30
		return true
	}
	return false
}
