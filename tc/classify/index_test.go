package classify

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestBuildGivesTheLinearAnswer: with the index, every packet gets the
// class the in-order scan gives, over rules of every kind mixed (prefixes
// of several lengths that overlap, duplicates, ports, protocols, DSCP).
func TestBuildGivesTheLinearAnswer(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	addr := func() string { return fmt.Sprintf("10.%d.%d.%d", r.IntN(3), r.IntN(4), r.IntN(256)) }
	for round := range 50 {
		var rules []Rule
		for i := range 200 {
			var m Match
			switch r.IntN(6) {
			case 0, 1:
				m.Dst = netip.MustParsePrefix(addr() + fmt.Sprintf("/%d", []int{8, 16, 24, 32}[r.IntN(4)])).Masked()
			case 2:
				m.Src = netip.MustParsePrefix(addr() + fmt.Sprintf("/%d", []int{16, 24}[r.IntN(2)])).Masked()
			case 3:
				m.Dst = netip.MustParsePrefix(addr() + "/24").Masked()
				m.Protocol, m.HasProtocol = 6, true
			case 4:
				m.DstPort = PortRange{Lo: uint16(r.IntN(4)), Hi: uint16(r.IntN(4) + 4), Set: true}
			case 5:
				m.DSCP, m.HasDSCP = uint8(r.IntN(3)), true
			}
			rules = append(rules, Rule{Match: m, Class: i + 1})
		}
		linear := &Classifier{Rules: rules, Default: -1}
		indexed := &Classifier{Rules: rules, Default: -1}
		indexed.Build()
		for range 300 {
			p := v4(addr(), addr(), []uint8{6, 17}[r.IntN(2)], uint16(r.IntN(10)), uint16(r.IntN(10)), uint8(r.IntN(3)))
			if a, b := linear.Classify(p), indexed.Classify(p); a != b {
				t.Fatalf("round %d: packet %x: indexed class %d, in-order scan %d", round, p, b, a)
			}
		}
		if a, b := linear.Classify(v6Pkt), indexed.Classify(v6Pkt); a != b {
			t.Fatalf("IPv6 packet: indexed class %d, in-order scan %d", b, a)
		}
	}
}

func BenchmarkClassifyManyPrefixes(b *testing.B) {
	c := &Classifier{Default: -1}
	for i := range 10000 {
		c.Rules = append(c.Rules, Rule{Match{Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i / 250), byte(i % 250), 0}), 24)}, i})
	}
	c.Build()
	p := v4("10.0.1.1", "10.39.249.9", 6, 1, 2, 0) // the last rule
	b.ResetTimer()
	b.ReportAllocs()
	b.SetBytes(int64(len(p)))
	for i := 0; i < b.N; i++ {
		c.Classify(p)
	}
}
