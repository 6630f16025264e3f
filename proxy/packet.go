package proxy

import "encoding/binary"

// ipLength checks that p starts with a well-formed IPv4 or IPv6 header and
// returns the packet's length as its header states it (bytes after that
// are padding to be trimmed). ok is false for anything truncated or
// malformed: such packets are counted and dropped, never forwarded.
func ipLength(p []byte) (n int, ok bool) {
	if len(p) < 1 {
		return 0, false
	}
	switch p[0] >> 4 {
	case 4:
		if len(p) < 20 {
			return 0, false
		}
		ihl := int(p[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(p[2:4]))
		if ihl < 20 || total < ihl || total > len(p) {
			return 0, false
		}
		return total, true
	case 6:
		if len(p) < 40 {
			return 0, false
		}
		total := 40 + int(binary.BigEndian.Uint16(p[4:6]))
		// Payload length 0 with more data is a jumbogram, which no TUN of
		// ours produces (MTU < 64 KiB).
		if total > len(p) || (total == 40 && len(p) > 40 && p[6] == 0) {
			return 0, false
		}
		return total, true
	}
	return 0, false
}
