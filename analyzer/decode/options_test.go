package decode

import (
	"encoding/binary"
	"testing"
)

// parseOptionsRef is the option walk alone, without parseOptions' fast
// paths for Linux's layouts: the reference it must agree with.
func parseOptionsRef(o []byte, p *Packet) {
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

// FuzzParseOptions: parseOptions reads every option list as the walk
// alone does, truncated and malformed lists included.
func FuzzParseOptions(f *testing.F) {
	f.Add(tcpSegment()[20:])
	f.Add([]byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2})
	f.Add([]byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 1, 1, 5, 10, 0, 0, 0, 1, 0, 0, 0, 2})
	f.Add([]byte{2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 20})
	f.Add([]byte{2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 20, 8, 10, 0, 0, 0, 2, 0, 0, 0, 3})
	f.Add([]byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 8, 10, 0, 0})
	f.Add([]byte{1, 1, 5, 34, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 7, 0, 0, 0, 8})
	f.Add([]byte{2, 4, 5})
	f.Add([]byte{3, 1, 9})
	f.Add([]byte{8})
	f.Fuzz(func(t *testing.T, o []byte) {
		var got, want Packet
		for _, p := range []*Packet{&got, &want} {
			p.WScale = -1
		}
		parseOptions(o, &got)
		parseOptionsRef(o, &want)
		if got != want {
			t.Fatalf("% x: %+v, reference %+v", o, got, want)
		}
	})
}
