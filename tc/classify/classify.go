// Package classify sorts IP packets into traffic classes by their
// headers: source and destination prefix (IPv4 and IPv6), protocol,
// source and destination port or range, and DSCP. Rules are tried in
// order and the first match wins, as tc filters of one priority are;
// unmatched packets go to the default class.
package classify

import (
	"fmt"
	"net/netip"
	"strings"

	iphdr "github.com/wanlab/wanlab/internal/header"
)

// PortRange is an inclusive range of ports; the zero value matches any.
type PortRange struct {
	Lo, Hi uint16
	Set    bool
}

func (r PortRange) match(p uint16) bool { return !r.Set || p >= r.Lo && p <= r.Hi }

// String returns "N" or "LO-HI".
func (r PortRange) String() string {
	if r.Lo == r.Hi {
		return fmt.Sprint(r.Lo)
	}
	return fmt.Sprintf("%d-%d", r.Lo, r.Hi)
}

// Match is a conjunction of header tests; unset fields match anything.
type Match struct {
	Src, Dst netip.Prefix // invalid (zero) prefix: any
	// Protocol is the IP protocol (IPv6: the upper-layer header after
	// extension headers); HasProtocol says it is set.
	Protocol    uint8
	HasProtocol bool
	SrcPort     PortRange
	DstPort     PortRange
	// DSCP is the 6-bit differentiated services code point; HasDSCP says
	// it is set.
	DSCP    uint8
	HasDSCP bool
}

// IsAny reports whether m matches every packet.
func (m Match) IsAny() bool {
	return !m.Src.IsValid() && !m.Dst.IsValid() && !m.HasProtocol && !m.SrcPort.Set && !m.DstPort.Set && !m.HasDSCP
}

var protoNames = map[string]uint8{"icmp": 1, "tcp": 6, "udp": 17, "ipv6-icmp": 58, "icmpv6": 58, "sctp": 132, "gre": 47, "esp": 50}

func protoName(p uint8) string {
	for n, v := range protoNames {
		if v == p && n != "icmpv6" {
			return n
		}
	}
	return fmt.Sprint(p)
}

// String returns the match in the form ParseMatch reads ("any" when
// empty).
func (m Match) String() string {
	var b []string
	if m.Src.IsValid() {
		b = append(b, "src", m.Src.String())
	}
	if m.Dst.IsValid() {
		b = append(b, "dst", m.Dst.String())
	}
	if m.HasProtocol {
		b = append(b, "protocol", protoName(m.Protocol))
	}
	if m.SrcPort.Set {
		b = append(b, "sport", m.SrcPort.String())
	}
	if m.DstPort.Set {
		b = append(b, "dport", m.DstPort.String())
	}
	if m.HasDSCP {
		b = append(b, "dscp", fmt.Sprint(m.DSCP))
	}
	if len(b) == 0 {
		return "any"
	}
	return strings.Join(b, " ")
}

// header is what a packet offers to matches, decoded once.
type header struct {
	src, dst   netip.Addr
	proto      uint8
	dscp       uint8
	sport      uint16
	dport      uint16
	hasPorts   bool
	ok         bool
	isV6, isV4 bool
}

// decode reads an IPv4 or IPv6 header (and the ports of TCP, UDP, SCTP or
// UDP-Lite) without allocating, through the one header decoder.
func decode(b []byte) (h header) {
	var ip iphdr.IP
	if ip.Parse(b) != nil {
		return h
	}
	h.dscp, h.proto, h.src, h.dst = ip.DSCP, ip.Proto, ip.Src, ip.Dst
	h.ok, h.isV4, h.isV6 = true, ip.Version == 4, ip.Version == 6
	if iphdr.HasPorts(ip.Proto) && ip.TransportOK && len(b) >= ip.HeaderLen {
		h.sport, h.dport, h.hasPorts = iphdr.Ports(b[ip.HeaderLen:])
	}
	return h
}

func (m *Match) match(h *header) bool {
	if !h.ok {
		return m.IsAny()
	}
	if m.Src.IsValid() && !m.Src.Contains(h.src) {
		return false
	}
	if m.Dst.IsValid() && !m.Dst.Contains(h.dst) {
		return false
	}
	if m.HasProtocol && m.Protocol != h.proto {
		return false
	}
	if (m.SrcPort.Set || m.DstPort.Set) && !h.hasPorts {
		return false
	}
	if !m.SrcPort.match(h.sport) || !m.DstPort.match(h.dport) {
		return false
	}
	if m.HasDSCP && m.DSCP != h.dscp {
		return false
	}
	return true
}

// Rule sends packets matching Match to class Class.
type Rule struct {
	Match Match
	Class int
}

// Classifier tries its rules in order; the first match gives the class,
// no match gives Default. It implements engine.Classifier and allocates
// nothing.
type Classifier struct {
	Rules   []Rule
	Default int
	index   *ruleIndex // Build's, nil: try every rule
}

// Classify returns the class of the IP packet b.
func (c *Classifier) Classify(b []byte) int {
	h := decode(b)
	if c.index != nil && h.ok {
		return c.classifyIndexed(&h)
	}
	for i := range c.Rules {
		if c.Rules[i].Match.match(&h) {
			return c.Rules[i].Class
		}
	}
	return c.Default
}
