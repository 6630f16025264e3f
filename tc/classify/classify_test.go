package classify

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// v4 builds an IPv4 packet with a 4-byte transport header carrying ports.
func v4(src, dst string, proto uint8, sport, dport uint16, dscp uint8) []byte {
	b := make([]byte, 28)
	b[0] = 0x45
	b[1] = dscp << 2
	b[9] = proto
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(b[12:], s[:])
	copy(b[16:], d[:])
	binary.BigEndian.PutUint16(b[20:], sport)
	binary.BigEndian.PutUint16(b[22:], dport)
	return b
}

// v6 builds an IPv6 packet, optionally behind a hop-by-hop header.
func v6(src, dst string, proto uint8, sport, dport uint16, dscp uint8, hopByHop bool) []byte {
	b := make([]byte, 40, 56)
	b[0] = 0x60 | dscp>>2
	b[1] = dscp << 6
	b[6] = proto
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	copy(b[8:], s[:])
	copy(b[24:], d[:])
	if hopByHop {
		b[6] = 0
		b = append(b, proto, 0, 0, 0, 0, 0, 0, 0)
	}
	p := make([]byte, 8)
	binary.BigEndian.PutUint16(p, sport)
	binary.BigEndian.PutUint16(p[2:], dport)
	return append(b, p...)
}

func mustMatch(t *testing.T, s string) Match {
	t.Helper()
	m, err := ParseMatch(strings.Fields(s))
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return m
}

func TestClassify(t *testing.T) {
	c := &Classifier{Default: 9, Rules: []Rule{
		{mustMatch(t, "dst 10.0.2.0/24"), 1},
		{mustMatch(t, "match ip dst 10.0.3.0/24 match ip dport 5201 0xffff"), 2},
		{mustMatch(t, "protocol udp dport 5000-5010"), 3},
		{mustMatch(t, "dscp ef"), 4},
		{mustMatch(t, "dst fd00:2::/64 protocol tcp sport 80"), 5},
		{mustMatch(t, "src 10.0.9.9"), 6},
		{mustMatch(t, "match ip tos 0x28 0xfc"), 7},
	}}
	for _, tc := range []struct {
		name string
		pkt  []byte
		want int
	}{
		{"dst prefix", v4("10.0.1.1", "10.0.2.7", 6, 1, 2, 0), 1},
		{"first match wins", v4("10.0.9.9", "10.0.2.7", 6, 1, 2, 46), 1},
		{"u32 dst and dport", v4("10.0.1.1", "10.0.3.7", 6, 40000, 5201, 0), 2},
		{"u32 dport differs", v4("10.0.1.1", "10.0.3.7", 6, 40000, 5202, 0), 9},
		{"udp port range", v4("10.0.1.1", "10.0.4.1", 17, 1, 5005, 0), 3},
		{"tcp not udp", v4("10.0.1.1", "10.0.4.1", 6, 1, 5005, 0), 9},
		{"dscp", v4("10.0.1.1", "10.0.4.1", 1, 0, 0, 46), 4},
		{"v6 prefix proto port", v6("fd00:1::1", "fd00:2::5", 6, 80, 40000, 0, false), 5},
		{"v6 behind hop-by-hop", v6("fd00:1::1", "fd00:2::5", 6, 80, 40000, 0, true), 5},
		{"v6 dscp", v6("fd00:1::1", "fd00:3::5", 17, 1, 1, 46, false), 4},
		{"v6 not in v4 prefix", v6("::ffff:10.0.2.7", "::ffff:10.0.2.7", 6, 1, 1, 0, false), 9},
		{"src host", v4("10.0.9.9", "10.0.4.1", 6, 1, 2, 0), 6},
		{"u32 tos", v4("10.0.1.1", "10.0.4.1", 6, 1, 2, 10), 7},
		{"garbage", []byte{0x45, 1, 2}, 9},
		{"empty", nil, 9},
	} {
		if got := c.Classify(tc.pkt); got != tc.want {
			t.Errorf("%s: class %d, want %d", tc.name, got, tc.want)
		}
	}
	// A later IPv4 fragment has no ports: port rules do not match it.
	frag := v4("10.0.1.1", "10.0.4.1", 17, 1, 5005, 0)
	binary.BigEndian.PutUint16(frag[6:], 100)
	if got := c.Classify(frag); got != 9 {
		t.Errorf("fragment: class %d, want default", got)
	}
	if n := testing.AllocsPerRun(100, func() { c.Classify(v6Pkt) }); n != 0 {
		t.Errorf("Classify allocates %v times", n)
	}
}

var v6Pkt = v6("fd00:1::1", "fd00:2::5", 6, 80, 40000, 0, true)

func TestParseMatchErrors(t *testing.T) {
	for in, want := range map[string]struct {
		idx int
		msg string
	}{
		"dst 10.0.2.300/24":              {1, `dst "10.0.2.300/24": not an address or prefix`},
		"dport 90-80":                    {1, "range ends before it starts"},
		"dscp 64":                        {1, `dscp "64"`},
		"protocol foo":                   {1, `protocol "foo"`},
		"dst 10.0.0.0/8 dst 10.0.0.0/16": {2, "dst given twice"},
		"colour red":                     {0, `unknown match keyword "colour"`},
		"match ip dport 80 0xff00":       {4, "only the exact mask 0xffff"},
		"match ip dst fd00::/8":          {3, "not an IPv4 prefix"},
		"match arp dst 1":                {1, "only ip and ip6"},
		"sport":                          {0, `"sport" needs a value`},
	} {
		_, err := ParseMatch(strings.Fields(in))
		var te *TokenError
		if !errors.As(err, &te) || te.Index != want.idx || !strings.Contains(te.Msg, want.msg) {
			t.Errorf("%q: got %v (%+v), want token %d and %q", in, err, te, want.idx, want.msg)
		}
	}
}

func TestMatchStringRoundTrip(t *testing.T) {
	for _, s := range []string{"dst 10.0.2.0/24", "src fd00::/8 protocol tcp dport 80-90", "protocol udp sport 53", "dscp 46", "any"} {
		m := mustMatch(t, strings.ReplaceAll(s, "any", ""))
		if got := m.String(); got != s {
			t.Errorf("%q printed as %q", s, got)
		}
	}
}

func FuzzParseMatch(f *testing.F) {
	for _, s := range []string{"dst 10.0.2.0/24", "match ip dst 1.2.3.4/32 match ip dport 80 0xffff", "protocol tcp sport 1-2 dscp af41", "src_ip fd00::1 ip_proto udp"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMatch(strings.Fields(s))
		if err != nil {
			return
		}
		again, err := ParseMatch(strings.Fields(strings.ReplaceAll(m.String(), "any", "")))
		if err != nil {
			t.Fatalf("%q printed as %q which does not parse: %v", s, m.String(), err)
		}
		if again != m {
			t.Fatalf("%q: %+v printed as %q reads back as %+v", s, m, m.String(), again)
		}
	})
}

func FuzzClassify(f *testing.F) {
	f.Add(v6Pkt)
	f.Add(v4("10.0.1.1", "10.0.2.7", 6, 1, 2, 0))
	rules := []Rule{
		{Match{Dst: netip.MustParsePrefix("10.0.2.0/24")}, 1},
		{Match{DstPort: PortRange{Lo: 1, Hi: 9, Set: true}}, 2},
		{Match{Src: netip.MustParsePrefix("10.0.0.0/8")}, 3},
		{Match{Dst: netip.MustParsePrefix("fd00:2::/32")}, 4},
		{Match{Dst: netip.MustParsePrefix("10.0.0.0/16")}, 5},
	}
	linear := &Classifier{Rules: rules}
	indexed := &Classifier{Rules: rules}
	indexed.Build()
	f.Fuzz(func(t *testing.T, b []byte) {
		if a, c := linear.Classify(b), indexed.Classify(b); a != c {
			t.Fatalf("%x: indexed class %d, in-order scan %d", b, c, a)
		}
	})
}

func BenchmarkClassify(b *testing.B) {
	c := &Classifier{Default: 3, Rules: []Rule{
		{Match{Dst: netip.MustParsePrefix("10.0.2.0/24")}, 0},
		{Match{Dst: netip.MustParsePrefix("10.0.3.0/24")}, 1},
		{Match{Dst: netip.MustParsePrefix("10.0.4.0/24")}, 2},
	}}
	p := v4("10.0.1.1", "10.0.4.9", 6, 1, 2, 0)
	b.ReportAllocs()
	b.SetBytes(int64(len(p)))
	for i := 0; i < b.N; i++ {
		c.Classify(p)
	}
}
