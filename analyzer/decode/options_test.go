package decode

import (
	"testing"
)

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
		walkOptions(o, &want)
		if got != want {
			t.Fatalf("% x: %+v, reference %+v", o, got, want)
		}
	})
}
