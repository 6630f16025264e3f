package analyzer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/wanlab/wanlab/analyzer/decode"
	"github.com/wanlab/wanlab/analyzer/internal/synth"
	"github.com/wanlab/wanlab/analyzer/pcapfile"
)

// fieldFrame is one frame of a generated field capture: the IP packet
// (as captured: cut at the snap length) and its length on the wire.
type fieldFrame struct {
	ip   []byte
	wire int // of the IP packet
	ts   time.Time
	// dup: the frame is a copy the analyzer must drop as a capture
	// duplicate (Wireshark analyzes it).
	dup bool
	// outside: written without the encapsulation (the overlay's copy of
	// a tunnelled packet).
	outside bool
}

// knownTransfer is the transfer every field capture carries: handshake,
// data, two retransmissions with the duplicate ACKs before them, FIN.
func knownTransfer(t testing.TB) []fieldFrame {
	t.Helper()
	var buf bytes.Buffer
	if _, err := synth.Write(&buf, synth.Config{Bytes: 120_000, Drop: map[int]bool{15: true, 50: true}, OneWay: 5 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	r, err := pcapfile.NewReader(&buf, "synth")
	if err != nil {
		t.Fatal(err)
	}
	var out []fieldFrame
	for {
		f, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ip := append([]byte(nil), f.Data[14:]...)
		// Every packet its own IPv4 ID, as a sender gives it.
		binary.BigEndian.PutUint16(ip[4:], uint16(len(out)+1))
		if binary.BigEndian.Uint16(ip[20:]) == 40000 {
			// One window in every ACK of the client, so that the ACKs
			// repeating one sequence number are duplicate ACKs.
			binary.BigEndian.PutUint16(ip[34:], 8192)
		}
		out = append(out, fieldFrame{ip: ip, wire: f.WireLen - 14, ts: f.Timestamp})
	}
	// The close: the server's FIN, the client's FIN, the last ACK.
	var srv, cli []byte
	var srvEnd uint32
	for _, f := range out {
		if binary.BigEndian.Uint16(f.ip[20:]) == 80 {
			srv = f.ip
			end := binary.BigEndian.Uint32(f.ip[24:]) + uint32(f.wire-20-int(f.ip[32]>>4)*4)
			if int32(end-srvEnd) > 0 || srvEnd == 0 {
				srvEnd = end
			}
		} else {
			cli = f.ip
		}
	}
	last := out[len(out)-1].ts
	seg := func(tmpl []byte, seq, ack uint32, flags byte, at time.Duration) fieldFrame {
		hl := 20 + int(tmpl[32]>>4)*4
		ip := append([]byte(nil), tmpl[:hl]...)
		binary.BigEndian.PutUint16(ip[2:], uint16(hl))
		binary.BigEndian.PutUint16(ip[4:], uint16(len(out)+1))
		binary.BigEndian.PutUint32(ip[24:], seq)
		binary.BigEndian.PutUint32(ip[28:], ack)
		ip[33] = flags
		return fieldFrame{ip: ip, wire: hl, ts: last.Add(at)}
	}
	cliSeq, cliAck := binary.BigEndian.Uint32(cli[24:]), binary.BigEndian.Uint32(cli[28:])
	out = append(out, seg(srv, srvEnd, cliAck, 0x11, time.Millisecond))
	out = append(out, seg(cli, cliSeq, srvEnd+1, 0x11, 6*time.Millisecond))
	out = append(out, seg(srv, srvEnd+1, cliSeq+1, 0x10, 11*time.Millisecond))
	return out
}

// encapCase wraps each IP packet of the known transfer in a link layer
// and encapsulation.
type encapCase struct {
	name string
	link layers.LinkType
	// wrap returns the headers before the IP packet ip (of wire length
	// wire) and how many bytes they add on the wire beyond their own
	// length (0 here: trailers are not generated).
	wrap func(ip []byte, wire int) []byte
	// want is the connection's Encapsulation.
	want []string
	// tshark's extra arguments (decode-as), and ours.
	tsharkArgs []string
	decodeAs   []string
	// inner6 converts the transfer to IPv6 before wrapping.
	inner6 bool
	// whole captures every byte (no snap length): NFLOG's payload
	// attribute holds what was copied, so its length is the frame's.
	whole bool
}

func ether(et uint16) []byte {
	b := []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1}
	return binary.BigEndian.AppendUint16(b, et)
}

func vlanTag(tpid, vid uint16) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, tpid), vid)
}

// etherVLAN is an Ethernet header with tags, each a TPID and a VLAN ID,
// ending in EtherType et.
func etherVLAN(et uint16, tags ...[2]uint16) []byte {
	b := []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1}
	for _, tg := range tags {
		b = append(b, vlanTag(tg[0], tg[1])...)
	}
	return binary.BigEndian.AppendUint16(b, et)
}

// outerIPv4 is an IPv4 header carrying protocol proto with payload bytes
// on the wire.
func outerIPv4(proto byte, payload int) []byte {
	h := make([]byte, 20)
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], uint16(20+payload))
	h[6] = 0x40
	h[8], h[9] = 64, proto
	copy(h[12:], []byte{192, 168, 7, 1})
	copy(h[16:], []byte{192, 168, 7, 2})
	return h
}

func udpHdr(dport uint16, payload int) []byte {
	h := make([]byte, 8)
	binary.BigEndian.PutUint16(h[0:], 51000)
	binary.BigEndian.PutUint16(h[2:], dport)
	binary.BigEndian.PutUint16(h[4:], uint16(8+payload))
	return h
}

func mplsLabel(label uint32, bos bool) []byte {
	v := label<<12 | 64
	if bos {
		v |= 0x100
	}
	return binary.BigEndian.AppendUint32(nil, v)
}

func ipEther(ip []byte) uint16 {
	if ip[0]>>4 == 6 {
		return 0x86dd
	}
	return 0x0800
}

// inEthernetOverIP wraps an inner Ethernet frame (headers inner + the IP
// packet) in Ethernet, IPv4 and the tunnel header tun of protocol proto.
func overIPv4(proto byte, tun []byte, innerLen int) []byte {
	b := ether(0x0800)
	b = append(b, outerIPv4(proto, len(tun)+innerLen)...)
	return append(b, tun...)
}

func vxlanHdr(vni uint32) []byte {
	return []byte{0x08, 0, 0, 0, byte(vni >> 16), byte(vni >> 8), byte(vni), 0}
}

func vxlanOver(port uint16, vni uint32, wire int, ip []byte, outerTags ...[2]uint16) []byte {
	inner := ether(ipEther(ip))
	tun := append(udpHdr(port, 8+len(inner)+wire), vxlanHdr(vni)...)
	b := etherVLAN(0x0800, outerTags...)
	b = append(b, outerIPv4(17, len(tun)+len(inner)+wire)...)
	return append(append(b, tun...), inner...)
}

var encapCases = []encapCase{
	{name: "ethernet", link: layers.LinkTypeEthernet, wrap: func(ip []byte, w int) []byte { return ether(0x0800) }, want: []string{}},
	{name: "vlan", link: layers.LinkTypeEthernet, wrap: func(ip []byte, w int) []byte { return etherVLAN(0x0800, [2]uint16{0x8100, 10}) }, want: []string{"vlan 10"}},
	{name: "qinq-88a8", link: layers.LinkTypeEthernet, wrap: func(ip []byte, w int) []byte {
		return etherVLAN(0x0800, [2]uint16{0x88a8, 100}, [2]uint16{0x8100, 10})
	}, want: []string{"qinq 100", "vlan 10"}},
	{name: "qinq-9100", link: layers.LinkTypeEthernet, wrap: func(ip []byte, w int) []byte {
		return etherVLAN(0x0800, [2]uint16{0x9100, 200}, [2]uint16{0x8100, 20})
	}, want: []string{"qinq 200", "vlan 20"}},
	{name: "mpls", link: layers.LinkTypeEthernet, wrap: func(ip []byte, w int) []byte {
		return append(append(ether(0x8847), mplsLabel(100, false)...), mplsLabel(200, true)...)
	}, want: []string{"mpls label 100", "mpls label 200"}},
	{name: "mpls-multicast", link: layers.LinkTypeEthernet, wrap: func(ip []byte, w int) []byte {
		return append(ether(0x8848), mplsLabel(300, true)...)
	}, want: []string{"mpls label 300"}},
	{name: "mpls-ipv6", link: layers.LinkTypeEthernet, inner6: true, wrap: func(ip []byte, w int) []byte {
		return append(ether(0x8847), mplsLabel(16, true)...)
	}, want: []string{"mpls label 16"}},
	{name: "pppoe", link: layers.LinkTypeEthernet, wrap: func(ip []byte, w int) []byte {
		h := append(ether(0x8864), 0x11, 0, 0x12, 0x34)
		h = binary.BigEndian.AppendUint16(h, uint16(2+w))
		return append(h, 0, 0x21)
	}, want: []string{"pppoe session 4660"}},
	{name: "ppp-9", link: 9, wrap: func(ip []byte, w int) []byte { return []byte{0xff, 0x03, 0, 0x21} }, want: []string{}},
	{name: "ppp-9-mpls", link: 9, wrap: func(ip []byte, w int) []byte { return append([]byte{0xff, 0x03, 0x02, 0x81}, mplsLabel(42, true)...) }, want: []string{"mpls label 42"}},
	{name: "ppp-50", link: 50, wrap: func(ip []byte, w int) []byte { return []byte{0xff, 0x03, 0, 0x21} }, want: []string{}},
	{name: "ppp-50-chdlc", link: 50, wrap: func(ip []byte, w int) []byte { return []byte{0x0f, 0, 0x08, 0} }, want: []string{}},
	{name: "ppp-204", link: 204, wrap: func(ip []byte, w int) []byte { return []byte{1, 0xff, 0x03, 0, 0x21} }, want: []string{}},
	{name: "chdlc-104", link: 104, wrap: func(ip []byte, w int) []byte { return []byte{0x0f, 0, 0x08, 0} }, want: []string{}},
	{name: "gre", link: layers.LinkTypeEthernet, wrap: func(ip []byte, w int) []byte {
		return overIPv4(47, []byte{0, 0, 0x08, 0}, w)
	}, want: []string{"gre"}},
	{name: "gre-key-seq-csum", link: layers.LinkTypeEthernet, wrap: func(ip []byte, w int) []byte {
		return overIPv4(47, []byte{0xb0, 0, 0x08, 0, 0, 0, 0, 0, 0, 0, 0, 42, 0, 0, 0, 1}, w)
	}, want: []string{"gre key 42"}},
	{name: "gre-teb", link: layers.LinkTypeEthernet, wrap: func(ip []byte, w int) []byte {
		inner := ether(0x0800)
		return append(overIPv4(47, []byte{0x20, 0, 0x65, 0x58, 0, 0, 0, 7}, len(inner)+w), inner...)
	}, want: []string{"gre key 7"}},
	{name: "erspan-2", link: layers.LinkTypeEthernet, wrap: func(ip []byte, w int) []byte {
		inner := etherVLAN(0x0800, [2]uint16{0x8100, 30})
		tun := []byte{0x10, 0, 0x88, 0xbe, 0, 0, 0, 9, 0x10, 0x1e, 0x00, 0x07, 0, 0, 0, 0}
		return append(overIPv4(47, tun, len(inner)+w), inner...)
	}, want: []string{"gre", "erspan session 7", "vlan 30"}},
	{name: "erspan-3", link: layers.LinkTypeEthernet, wrap: func(ip []byte, w int) []byte {
		inner := ether(0x0800)
		tun := []byte{0x10, 0, 0x22, 0xeb, 0, 0, 0, 9, 0x20, 0, 0x00, 0x05, 0, 0, 0, 1, 0, 0, 0, 0}
		return append(overIPv4(47, tun, len(inner)+w), inner...)
	}, want: []string{"gre", "erspan session 5"}},
	{name: "ipip", link: layers.LinkTypeEthernet, wrap: func(ip []byte, w int) []byte {
		return append(ether(0x0800), outerIPv4(4, w)...)
	}, want: []string{"ip-in-ip"}},
	{name: "ipv6-in-ipv4", link: layers.LinkTypeEthernet, inner6: true, wrap: func(ip []byte, w int) []byte {
		return append(ether(0x0800), outerIPv4(41, w)...)
	}, want: []string{"ipv6-in-ip"}},
	{name: "vxlan", link: layers.LinkTypeEthernet, wrap: func(ip []byte, w int) []byte {
		return vxlanOver(4789, 42, w, ip, [2]uint16{0x8100, 10})
	}, want: []string{"vlan 10", "vxlan vni 42"}},
	{name: "vxlan-8472", link: layers.LinkTypeEthernet, wrap: func(ip []byte, w int) []byte {
		return vxlanOver(8472, 1, w, ip)
	}, want: []string{"vxlan vni 1"}, tsharkArgs: []string{"-d", "udp.port==8472,vxlan"}},
	{name: "vxlan-decode-as", link: layers.LinkTypeEthernet, wrap: func(ip []byte, w int) []byte {
		return vxlanOver(9999, 77, w, ip)
	}, want: []string{"vxlan vni 77"}, tsharkArgs: []string{"-d", "udp.port==9999,vxlan"}, decodeAs: []string{"udp.port=9999,vxlan"}},
	{name: "geneve", link: layers.LinkTypeEthernet, wrap: func(ip []byte, w int) []byte {
		inner := ether(0x0800)
		gen := []byte{0x02, 0, 0x65, 0x58, 0, 0, 5, 0, 0x01, 0x02, 0x03, 0x01, 0xaa, 0xbb, 0xcc, 0xdd}
		tun := append(udpHdr(6081, len(gen)+len(inner)+w), gen...)
		return append(overIPv4(17, tun, len(inner)+w), inner...)
	}, want: []string{"geneve vni 5"}},
	{name: "nflog", link: 239, wrap: func(ip []byte, w int) []byte {
		h := []byte{2, 0, 0, 0}
		h = append(h, 8, 0, 1, 0, 0x08, 0, 0, 0) // NFULA_PACKET_HDR-sized TLV (type 1)
		return append(h, byte((4+w)&0xff), byte((4+w)>>8), 9, 0)
	}, want: []string{}, whole: true},
	{name: "sll", link: layers.LinkTypeLinuxSLL, wrap: func(ip []byte, w int) []byte {
		return append(make([]byte, 14), 0x08, 0)
	}, want: []string{}},
	{name: "sll2", link: 276, wrap: func(ip []byte, w int) []byte {
		return []byte{0x08, 0, 0, 0, 0, 0, 0, 3, 0, 1, 0, 6, 2, 0, 0, 0, 0, 2, 0, 0}
	}, want: []string{}},
	{name: "null", link: layers.LinkTypeNull, wrap: func(ip []byte, w int) []byte { return []byte{2, 0, 0, 0} }, want: []string{}},
	{name: "raw", link: layers.LinkTypeRaw, wrap: func(ip []byte, w int) []byte { return nil }, want: []string{}},
}

// toIPv6 rewrites an IPv4 packet (20-byte header) as IPv6.
func toIPv6(ip []byte, wire int) ([]byte, int) {
	h := make([]byte, 40)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(wire-20))
	h[6], h[7] = 6, 64
	h[0+8], h[15+8] = 0xfd, ip[15]
	h[0+24], h[15+24] = 0xfd, ip[19]
	return append(h, ip[20:]...), wire + 20
}

// writeField writes frames, each wrapped by wrap (outside ones bare, in
// the case's link layer without tunnel), as a pcap of link type link.
func writeField(t testing.TB, link layers.LinkType, frames []fieldFrame, wrap func(ip []byte, wire int) []byte, bare func([]byte, int) []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "field.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriterNanos(f)
	if err := w.WriteFileHeader(65535, link); err != nil {
		t.Fatal(err)
	}
	for _, fr := range frames {
		wr := wrap
		if fr.outside {
			wr = bare
		}
		h := wr(fr.ip, fr.wire)
		data := append(append([]byte(nil), h...), fr.ip...)
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: fr.ts, CaptureLength: len(data), Length: len(h) + fr.wire}, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// allTsharkFlags are every tcp.analysis expert flag the analyzer sets.
var allTsharkFlags = append(append([]struct {
	field string
	flag  PacketFlags
}{}, tsharkFlags...), []struct {
	field string
	flag  PacketFlags
}{
	{"tcp.analysis.keep_alive_ack", KeepAliveAck},
	{"tcp.analysis.zero_window_probe_ack", ZeroWindowProbeAck},
	{"tcp.analysis.reused_ports", ReusedPorts},
}...)

// tsharkFrames runs tshark once on path and returns its verdict for each
// TCP frame: every expert flag and the ACK RTT.
func tsharkFrames(t *testing.T, path string, extra ...string) map[int]packetVerdict {
	t.Helper()
	return tsharkVerdicts(t, path, allTsharkFlags, extra...)
}

// everyFlag is every flag compared frame by frame with tshark.
const everyFlag = comparedFlags | KeepAliveAck | ZeroWindowProbeAck | ReusedPorts

// Differences from tshark on purpose, by frame number.
const (
	// exceptDup: a capture duplicate, which the analyzer drops.
	exceptDup = 1
)

// sameAsTshark analyzes path and requires tshark's verdict on every TCP
// frame, every flag and ACK RTT, except as except says.
func sameAsTshark(t *testing.T, path string, opts Options, except map[int]int, tsharkArgs ...string) *Result {
	t.Helper()
	theirs := tsharkFrames(t, path, tsharkArgs...)
	ours := map[int]packetVerdict{}
	opts.OnPacket = func(p *PacketInfo) {
		v := packetVerdict{flags: p.Flags, ackRTT: -1}
		if p.AckRTT != 0 && p.AckRTT != -1 { // tshark omits an ack_rtt of exactly zero; -1 is none; a negative one (timestamps that stepped back) it prints
			v.ackRTT = p.AckRTT
		}
		ours[p.Frame] = v
	}
	res, err := AnalyzeFile(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(theirs) == 0 {
		t.Fatalf("tshark saw no TCP frames in %s", path)
	}
	var frames []int
	for n := range theirs {
		frames = append(frames, n)
	}
	sort.Ints(frames)
	bad := 0
	for _, n := range frames {
		tv := theirs[n]
		ov, ok := ours[n]
		if except[n] == exceptDup {
			if ok {
				t.Errorf("frame %d: a capture duplicate, analyzed", n)
			}
			continue
		}
		rttOK := ov.ackRTT == tv.ackRTT || ov.ackRTT >= 0 && tv.ackRTT >= 0 && absDur(ov.ackRTT-tv.ackRTT) <= time.Microsecond
		if !ok || ov.flags&everyFlag != tv.flags&everyFlag || !rttOK {
			bad++
			if bad <= 10 {
				t.Errorf("frame %d: ours (seen %v) flags %v rtt %v, tshark flags %v rtt %v", n, ok, ov.flags&everyFlag, ov.ackRTT, tv.flags&everyFlag, tv.ackRTT)
			}
		}
	}
	for n := range ours {
		if _, ok := theirs[n]; !ok {
			t.Errorf("frame %d: analyzed as TCP, tshark sees no TCP", n)
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d frames differ from tshark", bad, len(theirs))
	}
	return res
}

// TestEncapsulationsAgreeWithTshark writes the known transfer in every
// link type and encapsulation the decoder knows and compares the
// analysis with tshark's frame by frame.
func TestEncapsulationsAgreeWithTshark(t *testing.T) {
	base := knownTransfer(t)
	for _, ec := range encapCases {
		t.Run(ec.name, func(t *testing.T) {
			frames := base
			if ec.inner6 {
				frames = make([]fieldFrame, len(base))
				for i, f := range base {
					f.ip, f.wire = toIPv6(f.ip, f.wire)
					frames[i] = f
				}
			}
			if ec.whole {
				whole := make([]fieldFrame, len(frames))
				for i, f := range frames {
					f.ip = append(f.ip, make([]byte, f.wire-len(f.ip))...)
					whole[i] = f
				}
				frames = whole
			}
			path := writeField(t, ec.link, frames, ec.wrap, nil)
			var opts Options
			if ec.decodeAs != nil {
				opts.Decode = new(decode.Config)
				for _, r := range ec.decodeAs {
					if err := opts.Decode.ParseDecodeAs(r); err != nil {
						t.Fatal(err)
					}
				}
			}
			res := sameAsTshark(t, path, opts, nil, ec.tsharkArgs...)
			if len(res.Connections) != 1 || res.TCPPackets != len(frames) {
				t.Fatalf("%d connections, %d TCP packets of %d frames", len(res.Connections), res.TCPPackets, len(frames))
			}
			c := res.Connections[0]
			if fmt.Sprint(c.Encapsulation) != fmt.Sprint(ec.want) || c.Encapsulation == nil {
				t.Errorf("encapsulation %q, want %q", c.Encapsulation, ec.want)
			}
			if d := c.Directions[1]; d.UniqueBytes != 120_000 || d.RetransmittedPackets != 2 || c.Directions[0].DupAcks == 0 || c.State != "closed" || !c.HandshakeSeen {
				t.Errorf("server's direction: %d unique bytes, %d retransmissions, %d dup ACKs, state %s, handshake %v", d.UniqueBytes, d.RetransmittedPackets, c.Directions[0].DupAcks, c.State, c.HandshakeSeen)
			}
		})
	}
}

// ipTCP returns the fields of a field frame's TCP segment.
func ipTCP(f fieldFrame) (sport uint16, seq, ack uint32, flags byte, payload int) {
	ip := f.ip
	hl := int(ip[32]>>4) * 4
	return binary.BigEndian.Uint16(ip[20:]), binary.BigEndian.Uint32(ip[24:]), binary.BigEndian.Uint32(ip[28:]), ip[33], f.wire - 20 - hl
}

func cloneFrames(in []fieldFrame) []fieldFrame {
	out := make([]fieldFrame, len(in))
	for i, f := range in {
		f.ip = append([]byte(nil), f.ip...)
		out[i] = f
	}
	return out
}

// insertFrame puts f into frames in time order (after frames of the same
// time) and returns its frame number (1-based).
func insertFrame(frames *[]fieldFrame, f fieldFrame) int {
	i := sort.Search(len(*frames), func(i int) bool { return (*frames)[i].ts.After(f.ts) })
	*frames = append((*frames)[:i], append([]fieldFrame{f}, (*frames)[i:]...)...)
	return i + 1
}

// TestFieldEdgeCasesAgreeWithTshark: the known transfer with what other
// people's captures hold (a phantom IP length, a segment one byte before
// the next expected, a keep-alive, a long silence, a clock going back,
// copies of a segment, a port reused), each compared with tshark frame
// by frame.
func TestFieldEdgeCasesAgreeWithTshark(t *testing.T) {
	base := knownTransfer(t)
	// Frame indexes (0-based) of the client's pure ACKs and the server's
	// data segments.
	var acks, data []int
	for i, f := range base {
		sport, _, _, flags, n := ipTCP(f)
		switch {
		case sport == 40000 && n == 0 && flags == 0x10:
			acks = append(acks, i)
		case sport == 80 && n > 0:
			data = append(data, i)
		}
	}
	type edge struct {
		name  string
		edit  func(fr []fieldFrame) ([]fieldFrame, map[int]int)
		check func(t *testing.T, res *Result)
	}
	edges := []edge{
		{"phantom-ip-length", func(fr []fieldFrame) ([]fieldFrame, map[int]int) {
			// An ACK whose IPv4 total length says 768 bytes more than the
			// frame held: the frame simply ends (no snap length cut).
			for _, i := range acks[len(acks)/2 : len(acks)/2+3] {
				f := &fr[i]
				binary.BigEndian.PutUint16(f.ip[2:], uint16(f.wire+768))
			}
			return fr, nil
		}, func(t *testing.T, res *Result) {
			if res.MalformedLength != 3 {
				t.Errorf("malformed_length %d, want 3", res.MalformedLength)
			}
			if d := res.Connections[0].Directions[0]; d.DataBytes != 0 {
				t.Errorf("the client sent %d phantom bytes", d.DataBytes)
			}
		}},
		{"one-byte-before", func(fr []fieldFrame) ([]fieldFrame, map[int]int) {
			// A data segment that starts one byte before the next expected
			// sequence number and carries one byte more.
			f := &fr[data[5]]
			binary.BigEndian.PutUint32(f.ip[24:], binary.BigEndian.Uint32(f.ip[24:])-1)
			binary.BigEndian.PutUint16(f.ip[2:], binary.BigEndian.Uint16(f.ip[2:])+1)
			f.wire++
			return fr, nil
		}, func(t *testing.T, res *Result) {
			if d := res.Connections[0].Directions[1]; d.OutOfOrderPackets != 0 || d.RetransmittedPackets != 2 {
				t.Errorf("%d out of order, %d retransmissions, want 0 and 2", d.OutOfOrderPackets, d.RetransmittedPackets)
			}
		}},
		{"keep-alive", func(fr []fieldFrame) ([]fieldFrame, map[int]int) {
			// A keep-alive of the client (one before its next sequence
			// number) 1 s after the transfer ended, with the server's ACK.
			last := fr[len(fr)-4]
			ka := fieldFrame{ip: append([]byte(nil), fr[acks[len(acks)-1]].ip...), wire: fr[acks[len(acks)-1]].wire, ts: last.ts.Add(500 * time.Microsecond)}
			binary.BigEndian.PutUint32(ka.ip[24:], binary.BigEndian.Uint32(ka.ip[24:])-1)
			binary.BigEndian.PutUint16(ka.ip[4:], 9000)
			insertFrame(&fr, ka)
			return fr, nil
		}, func(t *testing.T, res *Result) {
			if d := res.Connections[0].Directions[0]; d.KeepAlives != 1 {
				t.Errorf("%d keep-alives, want 1", d.KeepAlives)
			}
		}},
		{"six-minutes-silence", func(fr []fieldFrame) ([]fieldFrame, map[int]int) {
			// The capture stops seeing the connection for 6 minutes
			// (dropped segments included): one stream, as Wireshark's.
			cut := data[len(data)/2]
			for i := cut; i < len(fr); i++ {
				fr[i].ts = fr[i].ts.Add(6 * time.Minute)
			}
			fr = append(fr[:cut], fr[cut+2:]...)
			return fr, nil
		}, func(t *testing.T, res *Result) {
			if len(res.Connections) != 1 {
				t.Errorf("%d connections, want 1 stream", len(res.Connections))
			}
		}},
		{"clock-backwards", func(fr []fieldFrame) ([]fieldFrame, map[int]int) {
			// The ACK of it is timed from its own time, as tshark
			// times it: 2 s more.
			fr[data[10]].ts = fr[data[10]].ts.Add(-2 * time.Second)
			return fr, nil
		}, func(t *testing.T, res *Result) {
			if len(res.Connections) != 1 || res.TimeBackwards != 1 {
				t.Errorf("%d connections, %d backwards, want 1 and 1", len(res.Connections), res.TimeBackwards)
			}
		}},
		{"timestamps-step-back", func(fr []fieldFrame) ([]fieldFrame, map[int]int) {
			// Two CPUs' packets written out of order: ACKs, and later data
			// segments, each stamped 3 us before the frame written ahead
			// of it. Wireshark times the ACK RTTs by the frames' own
			// times; so must we.
			for _, i := range append(append([]int(nil), acks[4:10]...), data[len(data)-12:len(data)-6]...) {
				fr[i].ts = fr[i-1].ts.Add(-3 * time.Microsecond)
			}
			return fr, nil
		}, func(t *testing.T, res *Result) {
			if res.TimeBackwards != 12 {
				t.Errorf("%d frames backwards, want 12", res.TimeBackwards)
			}
		}},
		{"copies", func(fr []fieldFrame) ([]fieldFrame, map[int]int) {
			// A segment sent again 60 ms later, byte for byte: a
			// retransmission. Another seen twice within 10 µs on the same
			// interface (a mirror port): a capture duplicate.
			late := fr[data[20]]
			late.ts = late.ts.Add(60 * time.Millisecond)
			late.ip = append([]byte(nil), late.ip...)
			insertFrame(&fr, late)
			twin := fr[data[30]+1]
			twin.ts = twin.ts.Add(10 * time.Microsecond)
			n := insertFrame(&fr, twin)
			return fr, map[int]int{n: exceptDup}
		}, func(t *testing.T, res *Result) {
			if res.DuplicateFrames != 1 {
				t.Errorf("%d duplicate frames, want 1", res.DuplicateFrames)
			}
			c := res.Connections[0]
			if d := c.Directions[1]; d.RetransmittedPackets != 3 || c.Directions[0].CaptureDuplicates+d.CaptureDuplicates != 1 {
				t.Errorf("%d retransmissions, %d+%d capture duplicates, want 3 (the copy 60 ms later one) and 1", d.RetransmittedPackets, c.Directions[0].CaptureDuplicates, d.CaptureDuplicates)
			}
		}},
		{"port-reuse", func(fr []fieldFrame) ([]fieldFrame, map[int]int) {
			// The same 4-tuple again 2 s after the close, with a new SYN
			// (another initial sequence number).
			n := len(fr)
			for _, f := range fr[:n] {
				g := f
				g.ip = append([]byte(nil), f.ip...)
				g.ts = f.ts.Add(fr[n-1].ts.Sub(fr[0].ts) + 2*time.Second)
				sport := binary.BigEndian.Uint16(g.ip[20:])
				if sport == 40000 {
					binary.BigEndian.PutUint32(g.ip[24:], binary.BigEndian.Uint32(g.ip[24:])+7_000_000)
				} else {
					binary.BigEndian.PutUint32(g.ip[28:], binary.BigEndian.Uint32(g.ip[28:])+7_000_000)
				}
				binary.BigEndian.PutUint16(g.ip[4:], binary.BigEndian.Uint16(g.ip[4:])+1000)
				fr = append(fr, g)
			}
			return fr, nil
		}, func(t *testing.T, res *Result) {
			if len(res.Connections) != 2 {
				t.Errorf("%d connections, want 2", len(res.Connections))
			}
		}},
	}
	for _, e := range edges {
		t.Run(e.name, func(t *testing.T) {
			fr, dups := e.edit(cloneFrames(base))
			path := writeField(t, layers.LinkTypeEthernet, fr, encapCases[0].wrap, nil)
			res := sameAsTshark(t, path, Options{}, dups)
			e.check(t, res)
		})
	}
}

// TestTunnelInsideAndOutside: a capture of a VXLAN tunnel's underlay and
// overlay together holds each inner packet twice, once encapsulated and
// once bare, microseconds apart: one connection, each packet analyzed
// once.
func TestTunnelInsideAndOutside(t *testing.T) {
	base := knownTransfer(t)
	var fr []fieldFrame
	for _, f := range base {
		fr = append(fr, f)
		g := f
		g.outside, g.ts = true, f.ts.Add(3*time.Microsecond)
		fr = append(fr, g)
	}
	vx := func(ip []byte, w int) []byte { return vxlanOver(4789, 42, w, ip) }
	path := writeField(t, layers.LinkTypeEthernet, fr, vx, func([]byte, int) []byte { return ether(0x0800) })
	res, err := AnalyzeFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Connections) != 1 || res.DuplicateFrames != len(base) {
		t.Fatalf("%d connections, %d duplicates, want 1 and %d", len(res.Connections), res.DuplicateFrames, len(base))
	}
	if c := res.Connections[0]; fmt.Sprint(c.Encapsulation) != "[vxlan vni 42]" || c.Directions[1].RetransmittedPackets != 2 ||
		c.Directions[0].CaptureDuplicates+c.Directions[1].CaptureDuplicates != len(base) {
		t.Errorf("encapsulation %q, %d retransmissions, %d+%d capture duplicates (want every packet's copy)",
			c.Encapsulation, c.Directions[1].RetransmittedPackets, c.Directions[0].CaptureDuplicates, c.Directions[1].CaptureDuplicates)
	}
}

// patchRecords rewrites the classic pcap at path: edit gets each record's
// header (16 bytes, little endian) and data, and returns the bytes to
// write in its place.
func patchRecords(t *testing.T, path string, edit func(i int, hdr, data []byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := append([]byte(nil), b[:24]...)
	for i, off := 0, 24; off < len(b); i++ {
		n := int(binary.LittleEndian.Uint32(b[off+8:]))
		out = append(out, edit(i, append([]byte(nil), b[off:off+16]...), b[off+16:off+16+n])...)
		off += 16 + n
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBrokenRecordsAgreeWithTshark: records whose captured length exceeds
// their original length are read, as tshark reads them, and reported; a
// record of an absurd length is reported and reading goes on at the next
// record (where tshark stops).
func TestBrokenRecordsAgreeWithTshark(t *testing.T) {
	base := knownTransfer(t)
	path := writeField(t, layers.LinkTypeEthernet, base, encapCases[0].wrap, nil)
	patchRecords(t, path, func(i int, hdr, data []byte) []byte {
		if i == 1 || i == 9 {
			binary.LittleEndian.PutUint32(hdr[12:], binary.LittleEndian.Uint32(hdr[8:])-1)
		}
		return append(hdr, data...)
	})
	res := sameAsTshark(t, path, Options{}, nil)
	if res.Frames != len(base) || len(res.BadRecords) != 2 || res.BadRecords[0].Frame != 2 || res.BadRecords[1].Frame != 10 {
		t.Errorf("%d of %d frames, bad records %+v", res.Frames, len(base), res.BadRecords)
	}
	if w := strings.Join(res.Warnings, "\n"); !strings.Contains(w, "broken record at offset 114 (frame 2): capture length 74 exceeds the original length 73 (taken as 74); read as tshark reads it") ||
		!strings.Contains(w, fmt.Sprintf("%d frames read in all", len(base))) {
		t.Errorf("warnings:\n%s", w)
	}

	absurd := writeField(t, layers.LinkTypeEthernet, base, encapCases[0].wrap, nil)
	var at int64 = 24
	patchRecords(t, absurd, func(i int, hdr, data []byte) []byte {
		rec := append(hdr, data...)
		if i == 20 {
			bad := binary.LittleEndian.AppendUint32(append([]byte(nil), hdr[:8]...), 0x7fff0000)
			bad = binary.LittleEndian.AppendUint32(bad, 0x7fff0000)
			rec = append(append(bad, 0xde, 0xad, 0xbe, 0xef), rec...)
		}
		if i < 20 {
			at += int64(len(rec))
		}
		return rec
	})
	res, err := AnalyzeFile(absurd, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Frames != len(base) || len(res.BadRecords) != 1 || res.BadRecords[0].Offset != at || res.BadRecords[0].Resumed != at+20 || len(res.Connections) != 1 {
		t.Errorf("%d of %d frames, %d connections, bad records %+v (want one at %d resumed at %d)", res.Frames, len(base), len(res.Connections), res.BadRecords, at, at+20)
	}
}
