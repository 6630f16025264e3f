package capture

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// frame builds an Ethernet frame with gopacket's serializers, so the
// filter is checked against an independent encoder.
func frame(t testing.TB, vlan bool, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: []byte{2, 0, 0, 0, 0, 1}, DstMAC: []byte{2, 0, 0, 0, 0, 2}}
	all := []gopacket.SerializableLayer{eth}
	switch ls[0].(type) {
	case *layers.IPv4:
		eth.EthernetType = layers.EthernetTypeIPv4
	case *layers.IPv6:
		eth.EthernetType = layers.EthernetTypeIPv6
	case *layers.ARP:
		eth.EthernetType = layers.EthernetTypeARP
	}
	if vlan {
		all = append(all, &layers.Dot1Q{VLANIdentifier: 7, Type: eth.EthernetType})
		eth.EthernetType = layers.EthernetTypeDot1Q
	}
	all = append(all, ls...)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, all...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func ip4(p layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: p, SrcIP: []byte{10, 0, 0, 1}, DstIP: []byte{10, 0, 0, 2}}
}

func ip6(p layers.IPProtocol) *layers.IPv6 {
	return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: p,
		SrcIP: []byte{0xfd, 0, 15: 1}, DstIP: []byte{0xfd, 0, 15: 2}}
}

func tcp(testing.TB, gopacket.NetworkLayer) *layers.TCP {
	return &layers.TCP{SrcPort: 80, DstPort: 40000, Seq: 1, ACK: true, Window: 100}
}

func TestIsTCP(t *testing.T) {
	v4 := ip4(layers.IPProtocolTCP)
	v6 := ip6(layers.IPProtocolTCP)
	v6hop := ip6(layers.IPProtocolIPv6HopByHop)
	hop := &layers.IPv6HopByHop{}
	hop.NextHeader = layers.IPProtocolTCP
	hop.Options = []*layers.IPv6HopByHopOption{{OptionType: 1, OptionLength: 4, OptionData: []byte{0, 0, 0, 0}}}
	cases := []struct {
		name string
		b    []byte
		want bool
	}{
		{"ipv4 tcp", frame(t, false, v4, tcp(t, v4), gopacket.Payload("hi")), true},
		{"ipv4 tcp vlan", frame(t, true, v4, tcp(t, v4)), true},
		{"ipv6 tcp", frame(t, false, v6, tcp(t, v6)), true},
		{"ipv6 hop-by-hop tcp", frame(t, false, v6hop, hop, tcp(t, v6hop)), true},
		{"ipv4 udp", frame(t, false, ip4(layers.IPProtocolUDP), &layers.UDP{SrcPort: 1, DstPort: 2}), false},
		{"ipv6 icmp", frame(t, false, ip6(layers.IPProtocolICMPv6), &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(135, 0)}), false},
		{"arp", frame(t, false, &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
			HwAddressSize: 6, ProtAddressSize: 4, SourceHwAddress: make([]byte, 6), SourceProtAddress: make([]byte, 4),
			DstHwAddress: make([]byte, 6), DstProtAddress: make([]byte, 4)}), false},
		{"short", []byte{1, 2, 3}, false},
		// A later fragment carries no TCP header, whatever its protocol
		// field says (the analyzer could not read one); the first does.
		{"ipv4 tcp later fragment", frame(t, false, &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolTCP,
			FragOffset: 185, SrcIP: []byte{10, 0, 0, 1}, DstIP: []byte{10, 0, 0, 2}}, gopacket.Payload(make([]byte, 40))), false},
		{"ipv4 tcp first fragment", frame(t, false, &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolTCP,
			Flags: layers.IPv4MoreFragments, SrcIP: []byte{10, 0, 0, 1}, DstIP: []byte{10, 0, 0, 2}}, tcp(t, v4)), true},
		{"ipv6 tcp later fragment", frame(t, false, ip6(layers.IPProtocolIPv6Fragment),
			gopacket.Payload([]byte{byte(layers.IPProtocolTCP), 0, 0x05, 0xc8, 0, 0, 0, 1}), gopacket.Payload(make([]byte, 40))), false},
	}
	for _, c := range cases {
		if got := IsTCP(c.b); got != c.want {
			t.Errorf("%s: IsTCP = %v, want %v", c.name, got, c.want)
		}
		// Truncating must never panic, and an IPv4 frame cut inside its
		// header is not TCP.
		for n := range len(c.b) {
			_ = IsTCP(c.b[:n])
		}
	}
	if IsTCP(frame(t, false, v4, tcp(t, v4))[:14+19]) {
		t.Error("IPv4 frame cut inside its header classed as TCP")
	}
}

func FuzzIsTCP(f *testing.F) {
	v4 := ip4(layers.IPProtocolTCP)
	v6 := ip6(layers.IPProtocolTCP)
	f.Add(frame(f, false, v4, tcp(f, v4)))
	f.Add(frame(f, true, v6, tcp(f, v6)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		got := IsTCP(b)
		// Cross-check with gopacket's decoder when it decodes a TCP layer
		// completely from an untagged or tagged frame.
		p := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
		// gopacket does not insist on the IP version nibble; IsTCP does.
		okVersion := false
		if ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok && ip.Version == 4 {
			okVersion = true
		}
		if ip, ok := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6); ok && ip.Version == 6 {
			okVersion = true
		}
		if okVersion && p.ErrorLayer() == nil && p.Layer(layers.LayerTypeTCP) != nil && p.Layer(layers.LayerTypeIPv6Fragment) == nil {
			if !got {
				t.Fatalf("gopacket decodes TCP, IsTCP says no: % x", b)
			}
		}
	})
}

func TestSinkWritesReadablePcapng(t *testing.T) {
	var buf bytes.Buffer
	s, err := newSink(&buf, "veth0", Config{Snaplen: 96, Filter: FilterTCP})
	if err != nil {
		t.Fatal(err)
	}
	v4 := ip4(layers.IPProtocolTCP)
	f := frame(t, false, v4, tcp(t, v4), gopacket.Payload(make([]byte, 200)))
	udp := frame(t, false, ip4(layers.IPProtocolUDP), &layers.UDP{SrcPort: 1, DstPort: 2})
	t0 := time.Unix(1700000000, 123456789)
	for i := range 5 {
		if _, err := s.add(t0.Add(time.Duration(i)*time.Millisecond), f, len(f)+1000, i%2 == 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.add(t0, udp, len(udp), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	if s.stats.Packets != 5 || s.stats.Filtered != 5 || s.stats.Outgoing != 3 || s.stats.Incoming != 2 {
		t.Errorf("stats %+v", s.stats)
	}
	if int(s.stats.Bytes) != buf.Len() {
		t.Errorf("stats bytes %d, buffer %d", s.stats.Bytes, buf.Len())
	}
	r, err := pcapgo.NewNgReader(&buf, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			if i != 5 {
				t.Fatalf("read %d packets, want 5", i)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ci.CaptureLength != 96 || ci.Length != len(f)+1000 || !bytes.Equal(data, f[:96]) {
			t.Errorf("packet %d: caplen %d len %d", i, ci.CaptureLength, ci.Length)
		}
		if want := t0.Add(time.Duration(i) * time.Millisecond); !ci.Timestamp.Equal(want) {
			t.Errorf("packet %d at %v, want %v", i, ci.Timestamp, want)
		}
	}
}

func BenchmarkSinkAdd(b *testing.B) {
	s, err := newSink(io.Discard, "veth0", Config{Snaplen: DefaultSnaplen})
	if err != nil {
		b.Fatal(err)
	}
	v4 := ip4(layers.IPProtocolTCP)
	f := frame(b, false, v4, tcp(b, v4), gopacket.Payload(make([]byte, 1448)))
	ts := time.Now()
	b.ReportAllocs()
	b.SetBytes(int64(len(f)))
	for b.Loop() {
		if _, err := s.add(ts, f[:DefaultSnaplen], len(f), false); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSinkAddDoesNotAllocate(t *testing.T) {
	s, err := newSink(io.Discard, "veth0", Config{Snaplen: DefaultSnaplen})
	if err != nil {
		t.Fatal(err)
	}
	v4 := ip4(layers.IPProtocolTCP)
	f := frame(t, false, v4, tcp(t, v4), gopacket.Payload(make([]byte, 1448)))
	ts := time.Now()
	if n := testing.AllocsPerRun(1000, func() { _, _ = s.add(ts, f[:DefaultSnaplen], len(f), false) }); n != 0 {
		t.Errorf("sink.add allocates %v times per packet", n)
	}
}

func TestParseFilter(t *testing.T) {
	for in, want := range map[string]Filter{"tcp": FilterTCP, "": FilterTCP, "all": FilterAll} {
		if got, err := ParseFilter(in); err != nil || got != want {
			t.Errorf("ParseFilter(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseFilter("udp"); err == nil {
		t.Error("ParseFilter(udp) accepted")
	}
}
