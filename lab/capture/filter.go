package capture

import "encoding/binary"

// EtherTypes and IP protocol numbers the filter looks at.
const (
	etherIPv4  = 0x0800
	etherIPv6  = 0x86dd
	etherVLAN  = 0x8100
	etherQinQ  = 0x88a8
	protoTCP   = 6
	ipv6HopOpt = 0
	ipv6Route  = 43
	ipv6Frag   = 44
	ipv6Dest   = 60
)

// IsTCP reports whether an Ethernet frame (possibly truncated to the
// snaplen) carries TCP over IPv4 or IPv6, looking through up to two VLAN
// tags and the common IPv6 extension headers. It never reads past frame.
func IsTCP(frame []byte) bool {
	if len(frame) < 14 {
		return false
	}
	et := binary.BigEndian.Uint16(frame[12:14])
	p := frame[14:]
	for range 2 {
		if et != etherVLAN && et != etherQinQ {
			break
		}
		if len(p) < 4 {
			return false
		}
		et = binary.BigEndian.Uint16(p[2:4])
		p = p[4:]
	}
	switch et {
	case etherIPv4:
		return len(p) >= 20 && p[0]>>4 == 4 && p[9] == protoTCP
	case etherIPv6:
		if len(p) < 40 || p[0]>>4 != 6 {
			return false
		}
		next := p[6]
		p = p[40:]
		for range 8 { // a packet with more extension headers is not worth the walk
			switch next {
			case protoTCP:
				return true
			case ipv6HopOpt, ipv6Route, ipv6Dest:
				if len(p) < 2 {
					return false
				}
				n := (int(p[1]) + 1) * 8
				if len(p) < n {
					return false
				}
				next, p = p[0], p[n:]
			case ipv6Frag:
				if len(p) < 8 {
					return false
				}
				next, p = p[0], p[8:]
			default:
				return false
			}
		}
	}
	return false
}
