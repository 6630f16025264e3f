package decode

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/internal/header"
)

// tcpSegment builds a TCP header with MSS, SACK-permitted, timestamps,
// window scale and one SACK block.
func tcpSegment() []byte {
	opts := []byte{
		2, 4, 0x05, 0xb4, // MSS 1460
		4, 2, // SACK permitted
		8, 10, 0, 0, 0, 7, 0, 0, 0, 9, // TS 7/9
		1, 3, 3, 7, // NOP, wscale 7
		1, 1, 5, 10, 0, 0, 0, 100, 0, 0, 0, 200, // SACK 100-200
	}
	h := make([]byte, 20, 20+len(opts))
	binary.BigEndian.PutUint16(h[0:], 40000)
	binary.BigEndian.PutUint16(h[2:], 80)
	binary.BigEndian.PutUint32(h[4:], 1000)
	binary.BigEndian.PutUint32(h[8:], 2000)
	h[12] = byte((20+len(opts))/4) << 4
	h[13] = FlagACK | FlagPSH
	binary.BigEndian.PutUint16(h[14:], 512)
	return append(h, opts...)
}

func ipv4(tcp []byte, payload int) []byte {
	h := make([]byte, 20)
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(tcp)+payload))
	h[8], h[9] = 64, 6
	copy(h[12:], []byte{10, 0, 0, 2})
	copy(h[16:], []byte{10, 0, 0, 1})
	return append(h, tcp...)
}

func ipv6(tcp []byte, payload int, ext bool) []byte {
	h := make([]byte, 40)
	h[0] = 0x60
	next := byte(6)
	var e []byte
	if ext {
		e = []byte{6, 0, 0, 0, 0, 0, 0, 0} // hop-by-hop, 8 bytes, then TCP
		next = 0
	}
	binary.BigEndian.PutUint16(h[4:], uint16(len(e)+len(tcp)+payload))
	h[6], h[7] = next, 64
	h[8], h[23] = 0xfd, 2
	h[24], h[39] = 0xfd, 1
	return append(append(h, e...), tcp...)
}

func check(t *testing.T, name string, link LinkType, frame []byte, v uint8) {
	t.Helper()
	var p Packet
	if err := Decode(link, frame, len(frame)+1000, &p); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if p.IPVersion != v || p.SrcPort != 40000 || p.DstPort != 80 || p.Seq != 1000 || p.Ack != 2000 || p.Window != 512 {
		t.Errorf("%s: header %+v", name, p)
	}
	if p.PayloadLen != 1000 || p.CapturedPayload != 0 {
		t.Errorf("%s: payload %d captured %d, want 1000 from the IP length, 0 captured", name, p.PayloadLen, p.CapturedPayload)
	}
	if p.MSS != 1460 || p.WScale != 7 || !p.SACKPermitted || !p.HasTimestamp || p.TSVal != 7 || p.TSEcr != 9 {
		t.Errorf("%s: options %+v", name, p)
	}
	if p.NSACK != 1 || p.SACK[0] != (SACKBlock{100, 200}) {
		t.Errorf("%s: SACK %v %v", name, p.NSACK, p.SACK)
	}
	if v == 4 && (p.Src[0] != 10 || p.Src[3] != 2 || p.Src[4] != 0) {
		t.Errorf("%s: src %v", name, p.Src)
	}
	if v == 6 && (p.Src[0] != 0xfd || p.Src[15] != 2 || p.Dst[15] != 1) {
		t.Errorf("%s: src %v dst %v", name, p.Src, p.Dst)
	}
}

func TestLinkTypes(t *testing.T) {
	seg := tcpSegment()
	v4, v6 := ipv4(seg, 1000), ipv6(seg, 1000, false)
	eth := func(tags [][2]byte, et uint16, ip []byte) []byte {
		b := make([]byte, 12)
		for _, tg := range tags {
			b = append(b, tg[0], tg[1], 0, 5)
		}
		b = binary.BigEndian.AppendUint16(b, et)
		return append(b, ip...)
	}
	check(t, "ethernet", LinkEthernet, eth(nil, 0x0800, v4), 4)
	check(t, "vlan", LinkEthernet, eth([][2]byte{{0x81, 0x00}}, 0x86dd, v6), 6)
	check(t, "qinq", LinkEthernet, eth([][2]byte{{0x88, 0xa8}, {0x81, 0x00}}, 0x0800, v4), 4)
	sll := append(make([]byte, 14), 0x08, 0x00)
	check(t, "sll", LinkSLL, append(sll, v4...), 4)
	sll2 := append([]byte{0x86, 0xdd}, make([]byte, 18)...)
	check(t, "sll2", LinkSLL2, append(sll2, v6...), 6)
	check(t, "raw4", LinkRaw, v4, 4)
	check(t, "raw6", LinkRaw, v6, 6)
	check(t, "ipv4", LinkIPv4, v4, 4)
	check(t, "ipv6-ext", LinkIPv6, ipv6(seg, 1000, true), 6)
	check(t, "null-le", LinkNull, append([]byte{2, 0, 0, 0}, v4...), 4)
	check(t, "loop-be", LinkLoop, append([]byte{0, 0, 0, 24}, v6...), 6)
}

func TestDecodeErrors(t *testing.T) {
	seg := tcpSegment()
	v4 := ipv4(seg, 0)
	var p Packet
	cases := []struct {
		name  string
		link  LinkType
		frame []byte
		want  error
	}{
		{"unknown link", 147, v4, ErrLinkType},
		{"short ethernet", LinkEthernet, []byte{1, 2, 3}, ErrTruncated},
		{"arp", LinkEthernet, append(make([]byte, 12), 0x08, 0x06, 0), ErrNotTCP},
		{"ip cut", LinkRaw, v4[:10], ErrTruncated},
		{"tcp cut", LinkRaw, v4[:30], ErrTruncated},
		{"bad version", LinkIPv4, append([]byte{0x75}, v4[1:]...), ErrCorrupt},
		{"udp", LinkRaw, func() []byte { b := append([]byte(nil), v4...); b[9] = 17; return b }(), ErrNotTCP},
		{"fragment", LinkRaw, func() []byte { b := append([]byte(nil), v4...); b[7] = 8; return b }(), ErrNotTCP},
		{"ihl too small", LinkRaw, func() []byte { b := append([]byte(nil), v4...); b[0] = 0x44; return b }(), ErrCorrupt},
		{"data offset beyond IP", LinkRaw, func() []byte { b := append([]byte(nil), v4...); b[2], b[3] = 0, 30; return b }(), ErrCorrupt},
	}
	for _, c := range cases {
		if err := Decode(c.link, c.frame, len(c.frame), &p); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// TestSharedHeaderRules pins the cases where the analyzer once read IP
// headers differently from the proxy and the capture filter; all three now
// read them through internal/header.
func TestSharedHeaderRules(t *testing.T) {
	seg := tcpSegment()
	var p Packet
	// A TSO super-packet captured at the sender states no length (IPv4
	// total length 0): the wire length stands in (the proxy, which never
	// reads such packets from its TUNs, drops them).
	tso := ipv4(seg, 0)
	tso[2], tso[3] = 0, 0
	if err := Decode(LinkRaw, tso, len(tso)+5000, &p); err != nil || p.PayloadLen != 5000 {
		t.Errorf("IPv4 total length 0: %v, payload %d, want 5000 from the wire length", err, p.PayloadLen)
	}
	// The same for IPv6 (payload length 0 with data behind: BIG TCP).
	big := ipv6(seg, 0, false)
	big[4], big[5] = 0, 0
	if err := Decode(LinkRaw, big, len(big)+7000, &p); err != nil || p.PayloadLen != 7000 {
		t.Errorf("IPv6 payload length 0: %v, payload %d, want 7000 from the wire length", err, p.PayloadLen)
	}
	// A later IPv6 fragment carries no TCP header, whatever its bytes say.
	frag := ipv6(seg, 0, false)
	frag[6] = 44
	frag = append(frag[:40:40], append([]byte{6, 0, 0, 8, 0, 0, 0, 1}, frag[40:]...)...)
	binary.BigEndian.PutUint16(frag[4:], uint16(len(frag)-40))
	if err := Decode(LinkRaw, frag, len(frag), &p); !errors.Is(err, ErrNotTCP) {
		t.Errorf("later IPv6 fragment: %v, want %v", err, ErrNotTCP)
	}
	// A first fragment (offset 0) holds the TCP header.
	frag[43] = 1 // offset 0, more fragments
	if err := Decode(LinkRaw, frag, len(frag), &p); err != nil {
		t.Errorf("first IPv6 fragment: %v", err)
	}
	// An IPv6 header behind an IPv4 EtherType is corrupt.
	eth := append(append(make([]byte, 12), 0x08, 0x00), ipv6(seg, 0, false)...)
	if err := Decode(LinkEthernet, eth, len(eth), &p); !errors.Is(err, ErrCorrupt) {
		t.Errorf("IPv6 behind EtherType IPv4: %v, want %v", err, ErrCorrupt)
	}
	// Extension headers cut off by the snap length: truncated.
	cut := ipv6(seg, 0, true)[:44]
	if err := Decode(LinkRaw, cut, 1000, &p); !errors.Is(err, ErrTruncated) {
		t.Errorf("cut extension header: %v, want %v", err, ErrTruncated)
	}
}

func TestSnaplenCutsOptions(t *testing.T) {
	v4 := ipv4(tcpSegment(), 1448)
	var p Packet
	// 54 bytes of a 96-byte snaplen capture minus Ethernet: options cut.
	if err := Decode(LinkRaw, v4[:44], len(v4)+1448, &p); err != nil {
		t.Fatal(err)
	}
	if !p.OptionsTruncated || p.PayloadLen != 1448 || p.MSS != 1460 {
		t.Errorf("truncated options: %+v", p)
	}
}

func TestDecodeAllocs(t *testing.T) {
	frame := ipv4(tcpSegment(), 1000)
	var p Packet
	if n := testing.AllocsPerRun(100, func() { Decode(LinkRaw, frame, len(frame), &p) }); n != 0 {
		t.Errorf("%v allocations per decode", n)
	}
}

func FuzzDecode(f *testing.F) {
	seg := tcpSegment()
	f.Add(uint16(LinkRaw), ipv4(seg, 10))
	f.Add(uint16(LinkRaw), ipv6(seg, 10, true))
	f.Add(uint16(LinkEthernet), append(append(make([]byte, 12), 0x81, 0, 0, 1, 0x08, 0), ipv4(seg, 0)...))
	f.Add(uint16(LinkSLL2), append(append([]byte{0x08, 0}, make([]byte, 18)...), ipv4(seg, 0)...))
	f.Add(uint16(LinkNull), append([]byte{2, 0, 0, 0}, ipv4(seg, 0)...))
	for _, e := range encapSeeds() {
		f.Add(uint16(e.link), e.frame)
	}
	f.Fuzz(func(t *testing.T, link uint16, frame []byte) {
		var p Packet
		cfg := new(Config)
		cfg.ParseDecodeAs("udp.port=9999,vxlan")
		cfg.ParseDecodeAs("udp.port=9998,geneve")
		err := cfg.Decode(LinkType(link), frame, len(frame), &p)
		if int(p.NEncap) > len(p.Encaps) {
			t.Fatalf("%d layers recorded", p.NEncap)
		}
		if LinkType(link) == LinkRaw && len(frame) > 0 && p.NEncap == 0 {
			// Decode takes a raw frame as TCP only when the shared
			// header reader finds a TCP header at the same place.
			ip, herr := header.ParseIP(frame)
			if err == nil && (herr != nil || ip.Proto != header.ProtoTCP || !ip.TransportOK) {
				t.Fatalf("decoded as TCP, header.ParseIP says %+v, %v", ip, herr)
			}
		}
		if err != nil {
			return
		}
		if p.PayloadLen < 0 || p.CapturedPayload < 0 || p.CapturedPayload > p.PayloadLen {
			t.Fatalf("payload %d captured %d", p.PayloadLen, p.CapturedPayload)
		}
		if p.NSACK > len(p.SACK) || p.WScale > 14 {
			t.Fatalf("options %+v", p)
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	frame := append(append(make([]byte, 12), 0x08, 0x00), ipv4(tcpSegment(), 1448)...)
	var p Packet
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Decode(LinkEthernet, frame, len(frame)+1448, &p); err != nil {
			b.Fatal(err)
		}
	}
}

type encapSeed struct {
	name  string
	link  LinkType
	frame []byte
	want  []string
}

// encapSeeds are frames of every encapsulation the decoder walks, each
// holding the test TCP segment.
func encapSeeds() []encapSeed {
	seg := tcpSegment()
	v4 := ipv4(seg, 0)
	v6 := ipv6(seg, 0, false)
	eth := func(et uint16) []byte { return binary.BigEndian.AppendUint16(make([]byte, 12), et) }
	cat := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	outer := func(proto byte, payload []byte) []byte {
		h := make([]byte, 20)
		h[0] = 0x45
		binary.BigEndian.PutUint16(h[2:], uint16(20+len(payload)))
		h[8], h[9] = 64, proto
		return append(h, payload...)
	}
	udp := func(port uint16, payload []byte) []byte {
		h := make([]byte, 8)
		binary.BigEndian.PutUint16(h[0:], 50000)
		binary.BigEndian.PutUint16(h[2:], port)
		binary.BigEndian.PutUint16(h[4:], uint16(8+len(payload)))
		return append(h, payload...)
	}
	vx := []byte{8, 0, 0, 0, 0, 0, 42, 0}
	return []encapSeed{
		{"vlan", LinkEthernet, cat(eth(0x8100), []byte{0, 10, 8, 0}, v4), []string{"vlan 10"}},
		{"qinq", LinkEthernet, cat(eth(0x88a8), []byte{0, 100, 0x81, 0, 0, 10, 8, 0}, v4), []string{"qinq 100", "vlan 10"}},
		{"mpls", LinkEthernet, cat(eth(0x8847), []byte{0, 0x64, 0, 64, 0, 0xc8, 1, 64}, v4), []string{"mpls label 1600", "mpls label 3200"}},
		{"mpls6", LinkEthernet, cat(eth(0x8848), []byte{0, 0x10, 1, 64}, v6), []string{"mpls label 256"}},
		{"pppoe", LinkEthernet, cat(eth(0x8864), []byte{0x11, 0, 0, 7, 0, 0, 0, 0x21}, v4), []string{"pppoe session 7"}},
		{"ppp", LinkPPP, cat([]byte{0xff, 3, 0, 0x57}, v6), nil},
		{"ppp-compressed", LinkPPP, cat([]byte{0x21}, v4), nil},
		{"ppp-hdlc", LinkPPPHDLC, cat([]byte{0xff, 3, 0, 0x21}, v4), nil},
		{"ppp-dir", LinkPPPWithDir, cat([]byte{0, 0xff, 3, 0, 0x21}, v4), nil},
		{"chdlc", LinkCHDLC, cat([]byte{0x0f, 0, 8, 0}, v4), nil},
		{"chdlc-in-50", LinkPPPHDLC, cat([]byte{0x8f, 0, 0x86, 0xdd}, v6), nil},
		{"gre", LinkRaw, outer(47, cat([]byte{0xb0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 1}, v4)), []string{"gre key 5"}},
		{"gre-teb", LinkRaw, outer(47, cat([]byte{0, 0, 0x65, 0x58}, eth(0x0800), v4)), []string{"gre"}},
		{"pptp", LinkRaw, outer(47, cat([]byte{0x30, 0x81, 0x88, 0x0b, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0xff, 3, 0, 0x21}, v4)), []string{"gre key 1"}},
		{"erspan1", LinkRaw, outer(47, cat([]byte{0, 0, 0x88, 0xbe}, eth(0x0800), v4)), []string{"gre", "erspan session 0"}},
		{"erspan2", LinkRaw, outer(47, cat([]byte{0x10, 0, 0x88, 0xbe, 0, 0, 0, 1, 0x10, 0, 0, 3, 0, 0, 0, 0}, eth(0x0800), v4)), []string{"gre", "erspan session 3"}},
		{"erspan3", LinkRaw, outer(47, cat([]byte{0x10, 0, 0x22, 0xeb, 0, 0, 0, 1, 0x20, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}, eth(0x0800), v4)), []string{"gre", "erspan session 4"}},
		{"ipip", LinkRaw, outer(4, v4), []string{"ip-in-ip"}},
		{"6in4", LinkRaw, outer(41, v6), []string{"ipv6-in-ip"}},
		{"vxlan", LinkRaw, outer(17, udp(4789, cat(vx, eth(0x0800), v4))), []string{"vxlan vni 42"}},
		{"vxlan-linux", LinkRaw, outer(17, udp(8472, cat(vx, eth(0x86dd), v6))), []string{"vxlan vni 42"}},
		{"vxlan-decode-as", LinkRaw, outer(17, udp(9999, cat(vx, eth(0x0800), v4))), []string{"vxlan vni 42"}},
		{"geneve", LinkRaw, outer(17, udp(6081, cat([]byte{1, 0, 0x65, 0x58, 0, 0, 9, 0, 1, 2, 3, 0}, eth(0x0800), v4))), []string{"geneve vni 9"}},
		{"geneve-ip", LinkRaw, outer(17, udp(9998, cat([]byte{0, 0, 0x08, 0, 0, 0, 9, 0}, v4))), []string{"geneve vni 9"}},
		{"nflog", LinkNFLOG, cat([]byte{2, 0, 0, 0, 8, 0, 1, 0, 0, 0, 0, 0}, binary.LittleEndian.AppendUint16(nil, uint16(4+len(v4))), []byte{9, 0}, v4), nil},
		{"nflog-be", LinkNFLOG, cat([]byte{10, 0, 0, 0, 0, 8, 0, 1, 0, 0, 0, 0}, binary.BigEndian.AppendUint16(nil, uint16(4+len(v6))), []byte{0, 9}, v6), nil},
		{"sll-vlan", LinkSLL, cat(make([]byte, 14), []byte{0x81, 0, 0, 3, 8, 0}, v4), []string{"vlan 3"}},
	}
}

func TestEncapsulations(t *testing.T) {
	cfg := new(Config)
	for _, r := range []string{"udp.port=9999,vxlan", "udp.port==9998,geneve"} {
		if err := cfg.ParseDecodeAs(r); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range encapSeeds() {
		var p Packet
		if err := cfg.Decode(e.link, e.frame, len(e.frame), &p); err != nil {
			t.Errorf("%s: %v", e.name, err)
			continue
		}
		var got []string
		for _, l := range p.Encapsulation() {
			got = append(got, l.String())
		}
		if strings.Join(got, ",") != strings.Join(e.want, ",") || p.SrcPort != 40000 || p.DstPort != 80 || p.Seq != 1000 {
			t.Errorf("%s: layers %q ports %d/%d seq %d, want %q", e.name, got, p.SrcPort, p.DstPort, p.Seq, e.want)
		}
		if p.MalformedLength {
			t.Errorf("%s: malformed length", e.name)
		}
		if n := testing.AllocsPerRun(20, func() { cfg.Decode(e.link, e.frame, len(e.frame), &p) }); n != 0 {
			t.Errorf("%s: %v allocations per decode", e.name, n)
		}
	}
	// Without the decode-as rules, the other ports are plain UDP.
	for _, e := range encapSeeds() {
		if strings.HasSuffix(e.name, "decode-as") || e.name == "geneve-ip" {
			var p Packet
			if err := Decode(e.link, e.frame, len(e.frame), &p); err != ErrNotTCP {
				t.Errorf("%s without decode-as: %v, want %v", e.name, err, ErrNotTCP)
			}
		}
	}
}

func TestMalformedLength(t *testing.T) {
	frame := append(ipv4(tcpSegment(), 0), make([]byte, 100)...)
	binary.BigEndian.PutUint16(frame[2:], uint16(len(frame)+768))
	var p Packet
	// The frame ends on the wire (wire length = captured): 100 bytes of
	// payload, not 868.
	if err := Decode(LinkRaw, frame, len(frame), &p); err != nil || !p.MalformedLength || p.PayloadLen != 100 {
		t.Errorf("%v, malformed %v, payload %d; want payload 100 flagged", err, p.MalformedLength, p.PayloadLen)
	}
	// Cut by the snap length: the stated length holds.
	if err := Decode(LinkRaw, frame, len(frame)+768, &p); err != nil || p.MalformedLength || p.PayloadLen != 868 {
		t.Errorf("snap length cut: %v, malformed %v, payload %d; want 868", err, p.MalformedLength, p.PayloadLen)
	}
}

func TestParseDecodeAs(t *testing.T) {
	for _, bad := range []string{"", "udp.port=4789", "tcp.port=80,vxlan", "udp.port=0,vxlan", "udp.port=70000,vxlan", "udp.port=x,vxlan", "udp.port=4790,gpe"} {
		var c Config
		if err := c.ParseDecodeAs(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
