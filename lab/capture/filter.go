package capture

import (
	"encoding/binary"

	"github.com/wanlab/wanlab/internal/header"
)

// EtherTypes and IP protocol numbers the filter looks at.
const (
	etherIPv4 = 0x0800
	etherIPv6 = 0x86dd
	etherVLAN = 0x8100
	etherQinQ = 0x88a8
)

// IsTCP reports whether an Ethernet frame (possibly truncated to the
// snaplen) carries TCP over IPv4 or IPv6, looking through up to two VLAN
// tags and the common IPv6 extension headers (header.ParseIP). A later
// fragment carries no TCP header and is not TCP here. It never reads past
// frame.
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
	if et != etherIPv4 && et != etherIPv6 {
		return false
	}
	// The one header decoder: a later fragment has no TCP header (the
	// analyzer could not read one), and IPv6 extension headers are walked
	// as the proxy walks them.
	var ip header.IP
	return ip.Parse(p) == nil && (ip.Version == 4) == (et == etherIPv4) && ip.Proto == header.ProtoTCP && ip.TransportOK
}
