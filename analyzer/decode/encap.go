package decode

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/wanlab/wanlab/internal/header"
)

// EncapKind names one encapsulation layer a packet was carried in.
type EncapKind uint8

// Encapsulations the decoder walks through to the TCP segment inside.
const (
	EncapVLAN   EncapKind = iota + 1 // 802.1Q tag (ID: VLAN ID)
	EncapQinQ                        // 802.1ad or 0x9100 service tag (ID: VLAN ID)
	EncapMPLS                        // one MPLS label (ID: label)
	EncapPPPoE                       // PPPoE session (ID: session ID)
	EncapGRE                         // GRE without a key
	EncapGREKey                      // GRE with a key (ID: key)
	EncapERSPAN                      // ERSPAN type I, II or III (ID: session ID)
	EncapIPIP                        // IPv4 or IPv6 inside IP (protocol 4)
	EncapIP6                         // IPv6 inside IP (protocol 41)
	EncapVXLAN                       // VXLAN (ID: VNI)
	EncapGENEVE                      // GENEVE (ID: VNI)
)

// Encap is one layer of encapsulation: its kind and identifier.
type Encap struct {
	Kind EncapKind
	ID   uint32
}

// String is the layer as JSON shows it: "vlan 10", "vxlan vni 42".
func (e Encap) String() string {
	if int(e.Kind) >= len(encapNames) || encapNames[e.Kind].name == "" {
		return "unknown"
	}
	n := encapNames[e.Kind]
	if !n.withID {
		return n.name
	}
	return n.name + " " + strconv.Itoa(int(e.ID))
}

// encapNames names each kind of layer and says whether its ID follows.
var encapNames = [...]struct {
	name   string
	withID bool
}{
	EncapVLAN:   {"vlan", true},
	EncapQinQ:   {"qinq", true},
	EncapMPLS:   {"mpls label", true},
	EncapPPPoE:  {"pppoe session", true},
	EncapGRE:    {"gre", false},
	EncapGREKey: {"gre key", true},
	EncapERSPAN: {"erspan session", true},
	EncapIPIP:   {"ip-in-ip", false},
	EncapIP6:    {"ipv6-in-ip", false},
	EncapVXLAN:  {"vxlan vni", true},
	EncapGENEVE: {"geneve vni", true},
}

// MaxEncap is how many layers a Packet records; deeper stacks are
// decoded, their innermost layers not recorded.
const MaxEncap = 6

// maxLayers bounds the walk through nested headers: a frame with more
// is not decoded further (ErrNotTCP).
const maxLayers = 16

// Config says which UDP ports carry tunnels, beyond the IANA ports (VXLAN
// 4789 and Linux's 8472, GENEVE 6081). The zero value (and nil) decodes
// the defaults.
type Config struct {
	vxlan, geneve []uint16
}

// Default ports of the UDP tunnels.
const (
	PortVXLAN      = 4789
	PortVXLANLinux = 8472
	PortGENEVE     = 6081
)

// ParseDecodeAs adds one Wireshark-style decode-as rule,
// "udp.port=PORT,vxlan" (or "udp.port==PORT,geneve"), to c.
func (c *Config) ParseDecodeAs(rule string) error {
	sel, proto, ok := strings.Cut(rule, ",")
	if !ok {
		return fmt.Errorf("decode-as %q: want udp.port=PORT,vxlan or udp.port=PORT,geneve", rule)
	}
	field, port, ok := strings.Cut(sel, "=")
	if !ok || field != "udp.port" {
		return fmt.Errorf("decode-as %q: the selector must be udp.port=PORT", rule)
	}
	port = strings.TrimPrefix(port, "=")
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return fmt.Errorf("decode-as %q: port %q is not a UDP port (1-65535)", rule, port)
	}
	switch proto {
	case "vxlan":
		c.vxlan = append(c.vxlan, uint16(n))
	case "geneve":
		c.geneve = append(c.geneve, uint16(n))
	default:
		return fmt.Errorf("decode-as %q: protocol %q: only vxlan and geneve can be decoded as", rule, proto)
	}
	return nil
}

// udpTunnel says what a UDP port carries: 0 nothing, 1 VXLAN, 2 GENEVE.
func (c *Config) udpTunnel(port uint16) int {
	switch port {
	case PortVXLAN, PortVXLANLinux:
		return 1
	case PortGENEVE:
		return 2
	}
	if c != nil {
		if slices.Contains(c.vxlan, port) {
			return 1
		}
		if slices.Contains(c.geneve, port) {
			return 2
		}
	}
	return 0
}

// push records an encapsulation layer of p.
func (p *Packet) push(k EncapKind, id uint32) {
	if int(p.NEncap) < len(p.Encaps) {
		p.Encaps[p.NEncap] = Encap{k, id}
		p.NEncap++
	}
}

// Encapsulation is the stack of layers that carried the packet, outermost
// first.
func (p *Packet) Encapsulation() []Encap { return p.Encaps[:p.NEncap] }

const (
	etherTypeMPLS      = 0x8847
	etherTypeMPLSMcast = 0x8848
	etherTypePPPoE     = 0x8864
	etherTypeTEB       = 0x6558 // transparent Ethernet bridging
	etherTypeERSPAN    = 0x88BE // ERSPAN type I and II
	etherTypeERSPAN3   = 0x22EB
	etherTypePPP       = 0x880B // PPP in GRE (PPTP)
	// etherTypeGuessIP is no EtherType: the decoder reads the IP version
	// from the first nibble (raw IP, MPLS after the bottom label).
	etherTypeGuessIP = 0xFFFF
)

// pppEtherType maps a PPP protocol number to the EtherType of the same
// payload (0: none the decoder follows).
func pppEtherType(proto uint16) uint16 {
	switch proto {
	case 0x0021:
		return etherTypeIPv4
	case 0x0057:
		return etherTypeIPv6
	case 0x0281:
		return etherTypeMPLS
	case 0x0283:
		return etherTypeMPLSMcast
	}
	return 0
}

// ppp reads a PPP header at b[off:] (address and control 0xff 0x03
// optional, the protocol field one byte when compressed) and returns the
// EtherType of its payload and where it starts.
func ppp(b []byte, off int) (uint16, int, error) {
	if len(b) >= off+2 && b[off] == 0xff && b[off+1] == 0x03 {
		off += 2
	}
	if len(b) < off+1 {
		return 0, 0, ErrTruncated
	}
	var proto uint16
	if b[off]&1 == 1 { // protocol field compression: one odd byte
		proto, off = uint16(b[off]), off+1
	} else {
		if len(b) < off+2 {
			return 0, 0, ErrTruncated
		}
		proto, off = binary.BigEndian.Uint16(b[off:]), off+2
	}
	et := pppEtherType(proto)
	if et == 0 {
		return 0, 0, ErrNotTCP
	}
	return et, off, nil
}

// payload walks the headers from b[off:], where a payload of EtherType et
// starts, to the TCP segment. end is where the enclosing packet ends on
// the wire (the frame's original length, or an outer IP packet's end).
func (c *Config) payload(b []byte, off int, et uint16, end int, p *Packet) error {
	for range maxLayers {
		switch et {
		case etherTypeIPv4:
			return c.ip(b, off, 4, end, p)
		case etherTypeIPv6:
			return c.ip(b, off, 6, end, p)
		case etherTypeGuessIP:
			if len(b) <= off {
				return ErrTruncated
			}
			switch b[off] >> 4 {
			case 4:
				et = etherTypeIPv4
			case 6:
				et = etherTypeIPv6
			default:
				return ErrNotTCP
			}
		case etherTypeVLAN, etherTypeQinQ, etherType9100:
			if len(b) < off+4 {
				return ErrTruncated
			}
			k := EncapVLAN
			if et != etherTypeVLAN {
				k = EncapQinQ
			}
			p.push(k, uint32(binary.BigEndian.Uint16(b[off:])&0x0fff))
			et, off = binary.BigEndian.Uint16(b[off+2:]), off+4
		case etherTypeMPLS, etherTypeMPLSMcast:
			for {
				if len(b) < off+4 {
					return ErrTruncated
				}
				v := binary.BigEndian.Uint32(b[off:])
				p.push(EncapMPLS, v>>12)
				off += 4
				if v&0x100 != 0 { // bottom of the stack
					break
				}
			}
			et = etherTypeGuessIP
		case etherTypePPPoE:
			if len(b) < off+6 {
				return ErrTruncated
			}
			if b[off] != 0x11 || b[off+1] != 0 { // version 1, type 1, session data
				return ErrNotTCP
			}
			p.push(EncapPPPoE, uint32(binary.BigEndian.Uint16(b[off+2:])))
			var err error
			if et, off, err = ppp(b, off+6); err != nil {
				return err
			}
		case etherTypePPP:
			var err error
			if et, off, err = ppp(b, off); err != nil {
				return err
			}
		case etherTypeTEB:
			if len(b) < off+14 {
				return ErrTruncated
			}
			et, off = binary.BigEndian.Uint16(b[off+12:]), off+14
		default:
			return ErrNotTCP
		}
	}
	return ErrNotTCP
}

// ip reads the IP header of version v at b[off:] and the TCP segment or
// the tunnel behind it. The IP length is trusted only as far as end, the
// packet's end on the wire: a longer stated length is counted
// (MalformedLength) and the packet analyzed with the bytes that were
// there.
func (c *Config) ip(b []byte, off int, v uint8, end int, p *Packet) error {
	if off > len(b) {
		return ErrTruncated
	}
	ipb := b[off:]
	var l header.Layout
	if err := l.Locate(ipb); err != nil {
		if err == header.ErrTruncated {
			return ErrTruncated
		}
		return ErrCorrupt
	}
	switch {
	case l.Version != v:
		return ErrCorrupt
	case l.LaterFragment:
		return ErrNotTCP // a later fragment: no transport header here
	case !l.TransportOK:
		return ErrTruncated // extension headers cut off by the snap length
	}
	avail := end - off
	total := l.Length
	if total == 0 {
		total = avail
	} else if total > avail {
		p.MalformedLength = true
		total = avail
	}
	if total < l.HeaderLen {
		return ErrCorrupt
	}
	switch l.Proto {
	case header.ProtoTCP:
		p.IPVersion = v
		p.IPID = l.ID
		// The addresses are copied from the header Locate checked (at
		// least 20 bytes for IPv4, 40 for IPv6).
		if v == 4 {
			a := ipb[12:20]
			p.Src = [16]byte{a[0], a[1], a[2], a[3]}
			p.Dst = [16]byte{a[4], a[5], a[6], a[7]}
		} else {
			p.Src, p.Dst = [16]byte(ipb[8:24]), [16]byte(ipb[24:40])
		}
		return decodeTCP(ipb[l.HeaderLen:], total-l.HeaderLen, p)
	case header.ProtoUDP:
		return c.udp(b, off+l.HeaderLen, off+total, p)
	case protoGRE:
		return c.gre(b, off+l.HeaderLen, off+total, p)
	case protoIPIP:
		p.push(EncapIPIP, 0)
		return c.payload(b, off+l.HeaderLen, etherTypeGuessIP, off+total, p)
	case protoIPv6:
		p.push(EncapIP6, 0)
		return c.payload(b, off+l.HeaderLen, etherTypeIPv6, off+total, p)
	}
	return ErrNotTCP
}

const (
	protoIPIP = 4
	protoIPv6 = 41
	protoGRE  = 47
)

// udp reads the UDP header at b[off:] and a VXLAN or GENEVE tunnel behind
// it (by destination port, then source port, as Wireshark tries them).
func (c *Config) udp(b []byte, off, end int, p *Packet) error {
	if len(b) < off+8 {
		return ErrNotTCP
	}
	tun := c.udpTunnel(binary.BigEndian.Uint16(b[off+2:]))
	if tun == 0 {
		tun = c.udpTunnel(binary.BigEndian.Uint16(b[off:]))
	}
	off += 8
	switch tun {
	case 1: // VXLAN: flags, 3 reserved, VNI, 1 reserved; then Ethernet
		if len(b) < off+8+14 {
			return ErrTruncated
		}
		p.push(EncapVXLAN, binary.BigEndian.Uint32(b[off+4:])>>8)
		off += 8
		return c.payload(b, off+14, binary.BigEndian.Uint16(b[off+12:]), end, p)
	case 2: // GENEVE: version and option length, flags, protocol, VNI
		if len(b) < off+8 {
			return ErrTruncated
		}
		if b[off]>>6 != 0 {
			return ErrNotTCP
		}
		optLen := int(b[off]&0x3f) * 4
		et := binary.BigEndian.Uint16(b[off+2:])
		p.push(EncapGENEVE, binary.BigEndian.Uint32(b[off+4:])>>8)
		return c.payload(b, off+8+optLen, et, end, p)
	}
	return ErrNotTCP
}

// GRE flag bits.
const (
	greChecksum = 0x8000
	greRouting  = 0x4000
	greKey      = 0x2000
	greSeq      = 0x1000
	greAck      = 0x0080
)

// gre reads a GRE header at b[off:] (RFC 2784/2890, and version 1 as PPTP
// uses it) and what it carries.
func (c *Config) gre(b []byte, off, end int, p *Packet) error {
	if len(b) < off+4 {
		return ErrTruncated
	}
	flags := binary.BigEndian.Uint16(b[off:])
	et := binary.BigEndian.Uint16(b[off+2:])
	ver := flags & 7
	if ver > 1 || flags&greRouting != 0 {
		return ErrNotTCP
	}
	off += 4
	if flags&greChecksum != 0 {
		off += 4
	}
	kind, key := EncapGRE, uint32(0)
	if flags&greKey != 0 {
		if len(b) < off+4 {
			return ErrTruncated
		}
		kind, key = EncapGREKey, binary.BigEndian.Uint32(b[off:])
		off += 4
	}
	if flags&greSeq != 0 {
		off += 4
	}
	if ver == 1 && flags&greAck != 0 {
		off += 4
	}
	p.push(kind, key)
	switch et {
	case etherTypeERSPAN, etherTypeERSPAN3:
		if et == etherTypeERSPAN && flags&greSeq == 0 {
			// Type I: no ERSPAN header, the mirrored frame at once.
			p.push(EncapERSPAN, 0)
			return c.payload(b, off, etherTypeTEB, end, p)
		}
		if len(b) < off+8 {
			return ErrTruncated
		}
		session := uint32(binary.BigEndian.Uint16(b[off+2:]) & 0x3ff)
		switch b[off] >> 4 {
		case 1: // type II: 8 bytes
			off += 8
		case 2: // type III: 12 bytes and an optional 8-byte subheader
			if len(b) < off+12 {
				return ErrTruncated
			}
			if ft := b[off+11] >> 2 & 0x1f; ft != 0 {
				return ErrNotTCP // not an Ethernet frame
			}
			if b[off+11]&1 != 0 {
				off += 8
			}
			off += 12
		default:
			return ErrNotTCP
		}
		p.push(EncapERSPAN, session)
		return c.payload(b, off, etherTypeTEB, end, p)
	}
	return c.payload(b, off, et, end, p)
}

// nflog reads a Linux NFLOG record (LINKTYPE 239): a 4-byte header whose
// first byte is the address family, then TLVs in the capturing host's
// byte order; the packet is the payload TLV (type 9).
func nflog(b []byte) (uint16, int, int, error) {
	if len(b) < 4 {
		return 0, 0, 0, ErrTruncated
	}
	var et uint16
	switch b[0] {
	case 2:
		et = etherTypeIPv4
	case 10:
		et = etherTypeIPv6
	default:
		return 0, 0, 0, ErrNotTCP
	}
	// The byte order is the capturing host's: a TLV type is below 256,
	// so the order is whichever end of the first type holds it.
	order := binary.ByteOrder(binary.LittleEndian)
	if len(b) >= 8 && binary.LittleEndian.Uint16(b[6:])&0x3fff > 0xff {
		order = binary.BigEndian
	}
	off := 4
	for off+4 <= len(b) {
		l := int(order.Uint16(b[off:]))
		typ := order.Uint16(b[off+2:]) & 0x3fff // without the nested and byte-order flags
		if l < 4 {
			return 0, 0, 0, ErrCorrupt
		}
		if typ == 9 {
			// The payload TLV: what was logged, whole unless cut by
			// the snap length.
			return et, off + 4, off + l, nil
		}
		off += (l + 3) &^ 3
	}
	if off != len(b) {
		return 0, 0, 0, ErrTruncated
	}
	return 0, 0, 0, ErrNotTCP
}
