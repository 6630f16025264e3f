// Package decode reads the link, IP and TCP headers of one captured frame
// into a caller-owned Packet without allocating, through the
// encapsulations between them (VLAN tags, MPLS, PPPoE, GRE, ERSPAN,
// IP-in-IP, VXLAN, GENEVE; see encap.go). It uses the IP length fields,
// not the captured length, for payload sizes, so snaplen-truncated frames
// decode fully, but trusts them only as far as the frame's length on the
// wire.
package decode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// LinkType is a pcap LINKTYPE_ value (https://www.tcpdump.org/linktypes.html).
type LinkType uint16

// Link types the decoder understands.
const (
	LinkNull       LinkType = 0   // BSD loopback, host byte order family
	LinkEthernet   LinkType = 1   // Ethernet II, with any number of 802.1Q/802.1ad tags
	LinkRaw        LinkType = 101 // raw IPv4 or IPv6 (TUN captures)
	LinkLoop       LinkType = 108 // OpenBSD loopback, network byte order family
	LinkSLL        LinkType = 113 // Linux cooked v1
	LinkIPv4       LinkType = 228
	LinkIPv6       LinkType = 229
	LinkSLL2       LinkType = 276 // Linux cooked v2, what `tcpdump -i any` writes
	LinkPPP        LinkType = 9   // PPP, with or without HDLC-like framing
	LinkPPPHDLC    LinkType = 50  // PPP in HDLC-like framing, or Cisco HDLC
	LinkCHDLC      LinkType = 104 // Cisco HDLC
	LinkPPPWithDir LinkType = 204 // PPP with a direction byte
	LinkNFLOG      LinkType = 239 // Linux NFLOG
	linkRawAlt1    LinkType = 12  // DLT_RAW on some BSDs, seen in old files
	linkRawAlt2    LinkType = 14
)

// Supported reports whether the decoder knows link type t.
func Supported(t LinkType) bool {
	switch t {
	case LinkNull, LinkEthernet, LinkRaw, LinkLoop, LinkSLL, LinkIPv4, LinkIPv6, LinkSLL2, linkRawAlt1, linkRawAlt2,
		LinkPPP, LinkPPPHDLC, LinkCHDLC, LinkPPPWithDir, LinkNFLOG:
		return true
	}
	return false
}

// TCP flag bits as they sit in byte 13 of the header.
const (
	FlagFIN uint8 = 0x01
	FlagSYN uint8 = 0x02
	FlagRST uint8 = 0x04
	FlagPSH uint8 = 0x08
	FlagACK uint8 = 0x10
	FlagURG uint8 = 0x20
	FlagECE uint8 = 0x40
	FlagCWR uint8 = 0x80
)

// Errors Decode returns. They are values, not wrapped, so that the per-packet
// path never allocates; callers count them by kind.
var (
	// ErrNotTCP: a well-formed frame that carries something other than a
	// first TCP fragment (ARP, UDP, ICMP, a later IP fragment).
	ErrNotTCP = errors.New("not a TCP segment")
	// ErrTruncated: the capture ends before the fixed IP or TCP header does.
	ErrTruncated = errors.New("headers truncated by the capture")
	// ErrCorrupt: header fields contradict each other (bad IP version,
	// header length shorter than the minimum, TCP data offset beyond the IP
	// payload).
	ErrCorrupt = errors.New("corrupt header")
	// ErrLinkType: a link type this decoder does not know.
	ErrLinkType = errors.New("unsupported link type")
)

// SACKBlock is one selective-acknowledgement range [Left, Right).
type SACKBlock struct{ Left, Right uint32 }

// Packet is the decoded view of one frame. Decode overwrites every field, so
// one Packet is reused for a whole capture. It holds no references into the
// frame: addresses are copied into fixed arrays.
type Packet struct {
	IPVersion uint8    // 4 or 6
	Src, Dst  [16]byte // IPv4 addresses occupy the first 4 bytes, the rest is zero
	IPID      uint16   // IPv4 identification (0 for IPv6)
	SrcPort   uint16
	DstPort   uint16
	Seq, Ack  uint32
	Flags     uint8
	Window    uint16 // raw header value, unscaled
	// PayloadLen is the TCP payload length from the IP length fields, which
	// stays right when the capture was cut at a snaplen.
	PayloadLen int
	// CapturedPayload is how much of the payload is in the frame.
	CapturedPayload int

	// Options. Absent options keep their zero/negative sentinels.
	MSS           uint16 // 0: absent
	WScale        int8   // -1: absent
	SACKPermitted bool
	HasTimestamp  bool
	TSVal, TSEcr  uint32
	NSACK         int
	SACK          [4]SACKBlock
	// OptionsTruncated is set when the capture cut the option list short.
	OptionsTruncated bool
	// MalformedLength: an IP header stated more bytes than the frame
	// held on the wire (not a snap length cut); the packet was decoded
	// with the bytes that were there.
	MalformedLength bool
	// UnknownLink is the link type of a frame Decode refused with
	// ErrLinkType (set only then).
	UnknownLink LinkType
	// Iface is the interface a Linux cooked v2 header names (its
	// ifindex; 0 for other link types): copies of one packet on two
	// interfaces of a `tcpdump -i any` capture are told apart by it.
	Iface int32
	// NEncap layers of encapsulation carried the segment, Encaps[0]
	// outermost (up to MaxEncap recorded).
	NEncap uint8
	Encaps [MaxEncap]Encap
}

// Has reports whether all bits of f are set.
func (p *Packet) Has(f uint8) bool { return p.Flags&f == f }

// SrcAddrPort is the sender's address and port.
func (p *Packet) SrcAddrPort() netip.AddrPort { return addrPort(p.IPVersion, p.Src, p.SrcPort) }

// DstAddrPort is the receiver's address and port.
func (p *Packet) DstAddrPort() netip.AddrPort { return addrPort(p.IPVersion, p.Dst, p.DstPort) }

func addrPort(v uint8, ip [16]byte, port uint16) netip.AddrPort {
	if v == 4 {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[:4])), port)
	}
	return netip.AddrPortFrom(netip.AddrFrom16(ip), port)
}

const (
	etherTypeIPv4 = 0x0800
	etherTypeIPv6 = 0x86DD
	etherTypeVLAN = 0x8100
	etherTypeQinQ = 0x88A8
	etherType9100 = 0x9100
)

// Decode parses frame, captured on a link of type link, into p, with the
// default tunnel ports. wireLen is the frame's original length on the
// wire (pcap's orig_len): IP lengths are trusted only as far as it, and
// it stands in for the IPv4 total length when a segmentation-offload
// capture left that zero.
func Decode(link LinkType, frame []byte, wireLen int, p *Packet) error {
	return (*Config)(nil).Decode(link, frame, wireLen, p)
}

// Decode is the package's Decode with the tunnel ports of c.
func (c *Config) Decode(link LinkType, frame []byte, wireLen int, p *Packet) error {
	p.NEncap, p.MalformedLength, p.Iface = 0, false, 0
	wireLen = max(wireLen, len(frame))
	var et uint16
	var off int
	switch link {
	case LinkEthernet:
		if len(frame) < 14 {
			return ErrTruncated
		}
		et, off = binary.BigEndian.Uint16(frame[12:14]), 14
		if et == etherTypeIPv4 {
			// The common case, without the walk through layers.
			return c.ip(frame, 14, 4, wireLen, p)
		}
	case LinkSLL:
		if len(frame) < 16 {
			return ErrTruncated
		}
		et, off = binary.BigEndian.Uint16(frame[14:16]), 16
	case LinkSLL2:
		if len(frame) < 20 {
			return ErrTruncated
		}
		et, off = binary.BigEndian.Uint16(frame[0:2]), 20
		p.Iface = int32(binary.BigEndian.Uint32(frame[4:8]))
	case LinkRaw, LinkIPv4, LinkIPv6, linkRawAlt1, linkRawAlt2:
		if len(frame) < 1 {
			return ErrTruncated
		}
		switch frame[0] >> 4 {
		case 4:
			et = etherTypeIPv4
		case 6:
			et = etherTypeIPv6
		default:
			return ErrCorrupt
		}
	case LinkNull, LinkLoop:
		if len(frame) < 4 {
			return ErrTruncated
		}
		// The family is in host byte order of the capturing machine for
		// NULL and in network order for LOOP; families are small, so the
		// order is whichever end holds the non-zero byte.
		fam := binary.LittleEndian.Uint32(frame[0:4])
		if fam > 0xFFFF {
			fam = binary.BigEndian.Uint32(frame[0:4])
		}
		switch fam {
		case 2:
			et = etherTypeIPv4
		case 10, 24, 28, 30: // Linux, NetBSD/OpenBSD, FreeBSD, Darwin AF_INET6
			et = etherTypeIPv6
		default:
			return ErrNotTCP
		}
		off = 4
	case LinkPPP, LinkPPPWithDir, LinkPPPHDLC:
		if link == LinkPPPWithDir {
			off = 1 // the direction byte
		}
		if link == LinkPPPHDLC && len(frame) > 0 && (frame[0] == 0x0f || frame[0] == 0x8f) {
			return c.chdlc(frame, wireLen, p)
		}
		var err error
		if et, off, err = ppp(frame, off); err != nil {
			return err
		}
	case LinkCHDLC:
		return c.chdlc(frame, wireLen, p)
	case LinkNFLOG:
		var err error
		var end int
		if et, off, end, err = nflog(frame); err != nil {
			return err
		}
		wireLen = min(wireLen, end)
	default:
		p.UnknownLink = link
		return ErrLinkType
	}
	return c.payload(frame, off, et, wireLen, p)
}

// chdlc reads a Cisco HDLC frame: address, control, EtherType.
func (c *Config) chdlc(frame []byte, wireLen int, p *Packet) error {
	if len(frame) < 4 {
		return ErrTruncated
	}
	return c.payload(frame, 4, binary.BigEndian.Uint16(frame[2:4]), wireLen, p)
}

// decodeTCP parses the TCP header at the start of b; segLen is the TCP
// header plus payload length according to the IP header.
func decodeTCP(b []byte, segLen int, p *Packet) error {
	if len(b) < 20 {
		return ErrTruncated
	}
	p.SrcPort = binary.BigEndian.Uint16(b[0:2])
	p.DstPort = binary.BigEndian.Uint16(b[2:4])
	p.Seq = binary.BigEndian.Uint32(b[4:8])
	p.Ack = binary.BigEndian.Uint32(b[8:12])
	hdr := int(b[12]>>4) * 4
	p.Flags = b[13]
	p.Window = binary.BigEndian.Uint16(b[14:16])
	if hdr < 20 || hdr > segLen {
		return ErrCorrupt
	}
	p.PayloadLen = segLen - hdr
	p.CapturedPayload = 0
	if len(b) > hdr {
		p.CapturedPayload = min(len(b)-hdr, p.PayloadLen)
	}
	p.MSS, p.WScale, p.SACKPermitted, p.HasTimestamp = 0, -1, false, false
	p.TSVal, p.TSEcr, p.NSACK, p.OptionsTruncated = 0, 0, 0, false
	opts := b[20:]
	if len(opts) > hdr-20 {
		opts = opts[:hdr-20]
	} else if len(opts) < hdr-20 {
		p.OptionsTruncated = true
	}
	parseOptions(opts, p)
	return nil
}

// parseOptions reads the TCP options o into p. Walking an option list is
// a chain of dependent loads (each option's length says where the next
// one starts), so the layouts Linux sends are recognised at once by their
// fixed bytes, and the walk goes on only after them, as it would have.
func parseOptions(o []byte, p *Packet) {
	switch {
	case len(o) >= 12 && o[0] == 1 && o[1] == 1 && o[2] == 8 && o[3] == 10:
		// NOP, NOP, timestamps: every segment after the handshake.
		p.HasTimestamp = true
		p.TSVal = binary.BigEndian.Uint32(o[4:8])
		p.TSEcr = binary.BigEndian.Uint32(o[8:12])
		o = o[12:]
	case len(o) >= 20 && o[0] == 2 && o[1] == 4 && o[4] == 4 && o[5] == 2 && o[6] == 8 && o[7] == 10 &&
		o[16] == 1 && o[17] == 3 && o[18] == 3:
		// MSS, SACK permitted, timestamps, NOP, window scale: a SYN.
		p.MSS = binary.BigEndian.Uint16(o[2:4])
		p.SACKPermitted = true
		p.HasTimestamp = true
		p.TSVal = binary.BigEndian.Uint32(o[8:12])
		p.TSEcr = binary.BigEndian.Uint32(o[12:16])
		p.WScale = int8(min(o[19], 14)) // RFC 7323 2.3: larger shifts are treated as 14
		o = o[20:]
	}
	if len(o) > 0 {
		walkOptions(o, p)
	}
}

// walkOptions reads the options o into p one by one.
func walkOptions(o []byte, p *Packet) {
	for len(o) > 0 {
		kind := o[0]
		if kind == 0 { // end of list
			return
		}
		if kind == 1 { // NOP
			o = o[1:]
			continue
		}
		if len(o) < 2 {
			p.OptionsTruncated = true
			return
		}
		l := int(o[1])
		if l < 2 || l > len(o) {
			p.OptionsTruncated = true
			return
		}
		v := o[2:l]
		switch kind {
		case 2:
			if len(v) == 2 {
				p.MSS = binary.BigEndian.Uint16(v)
			}
		case 3:
			if len(v) == 1 {
				p.WScale = int8(min(v[0], 14)) // RFC 7323 2.3: larger shifts are treated as 14
			}
		case 4:
			p.SACKPermitted = true
		case 5:
			for i := 0; i+8 <= len(v) && p.NSACK < len(p.SACK); i += 8 {
				p.SACK[p.NSACK] = SACKBlock{binary.BigEndian.Uint32(v[i:]), binary.BigEndian.Uint32(v[i+4:])}
				p.NSACK++
			}
		case 8:
			if len(v) == 8 {
				p.HasTimestamp = true
				p.TSVal = binary.BigEndian.Uint32(v[0:4])
				p.TSEcr = binary.BigEndian.Uint32(v[4:8])
			}
		}
		o = o[l:]
	}
}

// String names a link type for error messages.
func (t LinkType) String() string {
	switch t {
	case LinkNull:
		return "NULL"
	case LinkEthernet:
		return "EN10MB"
	case LinkRaw, linkRawAlt1, linkRawAlt2:
		return "RAW"
	case LinkLoop:
		return "LOOP"
	case LinkSLL:
		return "LINUX_SLL"
	case LinkSLL2:
		return "LINUX_SLL2"
	case LinkIPv4:
		return "IPV4"
	case LinkIPv6:
		return "IPV6"
	case LinkPPP:
		return "PPP"
	case LinkPPPHDLC:
		return "PPP_HDLC"
	case LinkCHDLC:
		return "C_HDLC"
	case LinkPPPWithDir:
		return "PPP_WITH_DIR"
	case LinkNFLOG:
		return "NFLOG"
	}
	if n, ok := otherLinkNames[t]; ok {
		return n
	}
	return fmt.Sprintf("linktype %d", uint16(t))
}

// otherLinkNames names link types the decoder does not read, for messages.
var otherLinkNames = map[LinkType]string{
	6: "IEEE802_5", 7: "ARCNET_BSD", 105: "IEEE802_11", 119: "IEEE802_11_PRISM",
	127: "IEEE802_11_RADIOTAP", 129: "ARCNET_LINUX", 143: "DOCSIS", 178: "JUNIPER_ETHER",
	189: "USB_LINUX", 195: "IEEE802_15_4", 220: "USB_LINUX_MMAPPED", 242: "IPOIB",
	249: "USBPCAP", 253: "NETLINK",
}

// Describe names t with its number: "link type PPP (9)", "link type 147".
func (t LinkType) Describe() string {
	if s := t.String(); s != fmt.Sprintf("linktype %d", uint16(t)) {
		return fmt.Sprintf("link type %s (%d)", s, uint16(t))
	}
	return fmt.Sprintf("link type %d", uint16(t))
}
