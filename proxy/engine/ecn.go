package engine

// setCE mirrors the kernel's INET_ECN_set_ce() on an IP packet: an
// ECN-capable packet (ECT(0) or ECT(1)) gets CE and true; a packet already
// marked CE returns true unchanged; a not-ECT packet (or one too short to
// carry an IP header) returns false, and netem then drops it. IPv4's header
// checksum is updated incrementally (RFC 1624) as IP_ECN_set_ce does.
func setCE(b []byte) bool {
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
