package device

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/testenv"
)

// Benchmarks of the TUN batch path: per iteration one batch
// (BatchSize() packets) is written into a TUN and read back out of a
// second one after the kernel has forwarded it, so an op is one batch
// written and read; SetBytes counts the IP bytes of the batch, and the
// pkts/s metric makes the backends comparable although their batches
// differ (offload: wireguard-go's 128, water: 1). Everything happens in a
// fresh network namespace; the packets' addresses exist only there.
//
//	sudo go test -run '^$' -bench . -benchtime 2s ./proxy/device/

// Addresses inside the benchmark's namespace: packets enter tunA as if
// from benchSrc and are routed to benchDst via tunB.
var (
	benchSrc = [4]byte{10, 77, 1, 2}
	benchDst = [4]byte{10, 78, 0, 2}
)

const (
	benchMTU    = 1500
	benchOffset = 64 // headroom in front of each packet, as the proxy uses
	udpPort     = 7400
	tcpSrcPort  = 7401
	tcpDstPort  = 7402
)

// benchPair is two TUN devices in a fresh namespace with forwarding on
// and benchDst's /16 routed into b.
type benchPair struct {
	a, b Device
	nl   *netlink.Handle // into their namespace
}

func openBenchPair(tb testing.TB, backend string) benchPair {
	tb.Helper()
	testenv.RequireRoot(tb)
	n := testenv.NewNode(tb)
	// No IPv6: the kernel would otherwise send router solicitations and
	// MLD reports into the TUNs while the benchmark reads them.
	n.Sysctl(tb, "net/ipv6/conf/all/disable_ipv6", "1")
	n.Sysctl(tb, "net/ipv6/conf/default/disable_ipv6", "1")
	n.Sysctl(tb, "net/ipv4/ip_forward", "1")
	n.Sysctl(tb, "net/ipv4/conf/all/rp_filter", "0")
	n.Sysctl(tb, "net/ipv4/conf/default/rp_filter", "0")
	p := benchPair{nl: n.NL}
	for i, name := range []string{"wlbenchA", "wlbenchB"} {
		d, err := OpenIn(n.NS, backend, name, benchMTU)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { d.Close() })
		if i == 0 {
			p.a = d
		} else {
			p.b = d
		}
	}
	n.Addr(tb, p.a.Name(), "10.77.1.1/24")
	n.Addr(tb, p.b.Name(), "10.77.2.1/24")
	n.Up(tb, p.a.Name())
	n.Up(tb, p.b.Name())
	lb, err := n.NL.LinkByName(p.b.Name())
	if err != nil {
		tb.Fatal(err)
	}
	dst := &net.IPNet{IP: net.IP(benchDst[:]).Mask(net.CIDRMask(16, 32)), Mask: net.CIDRMask(16, 32)}
	if err := n.NL.RouteAdd(&netlink.Route{LinkIndex: lb.Attrs().Index, Dst: dst}); err != nil {
		tb.Fatalf("route %v dev %s: %v", dst, p.b.Name(), err)
	}
	return p
}

// benchBufs returns count buffers of offset+size bytes.
func benchBufs(count, size int) [][]byte {
	bufs := make([][]byte, count)
	for i := range bufs {
		bufs[i] = make([]byte, size)
	}
	return bufs
}

// fillUDP writes an IPv4/UDP packet from benchSrc to benchDst with
// payload bytes of payload into p (which must hold it) and returns its
// length. Both checksums are valid.
func fillUDP(p []byte, payload int, id uint16) int {
	n := 28 + payload
	ipHeader(p, n, unix.IPPROTO_UDP, id)
	u := p[20:n]
	binary.BigEndian.PutUint16(u[0:], udpPort)
	binary.BigEndian.PutUint16(u[2:], udpPort)
	binary.BigEndian.PutUint16(u[4:], uint16(len(u)))
	for i := range payload {
		u[8+i] = byte(i)
	}
	binary.BigEndian.PutUint16(u[6:], 0)
	c := l4Checksum(p[:n], unix.IPPROTO_UDP)
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(u[6:], c)
	return n
}

// fillTCP writes an IPv4/TCP ACK segment of one flow from benchSrc to
// benchDst carrying payload bytes at sequence number seq, with valid
// checksums; consecutive calls with seq advanced by payload make a
// stream the offload backend's GRO coalesces.
func fillTCP(p []byte, payload int, seq uint32, id uint16) int {
	n := 40 + payload
	ipHeader(p, n, unix.IPPROTO_TCP, id)
	tcp := p[20:n]
	binary.BigEndian.PutUint16(tcp[0:], tcpSrcPort)
	binary.BigEndian.PutUint16(tcp[2:], tcpDstPort)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	binary.BigEndian.PutUint32(tcp[8:], 1)
	tcp[12] = 5 << 4
	tcp[13] = 0x10 // ACK
	binary.BigEndian.PutUint16(tcp[14:], 65535)
	binary.BigEndian.PutUint16(tcp[16:], 0)
	binary.BigEndian.PutUint16(tcp[18:], 0)
	for i := range payload {
		tcp[20+i] = byte(seq + uint32(i))
	}
	binary.BigEndian.PutUint16(tcp[16:], l4Checksum(p[:n], unix.IPPROTO_TCP))
	return n
}

func ipHeader(p []byte, total int, proto uint8, id uint16) {
	p[0] = 0x45
	p[1] = 0
	binary.BigEndian.PutUint16(p[2:], uint16(total))
	binary.BigEndian.PutUint16(p[4:], id)
	binary.BigEndian.PutUint16(p[6:], 0x4000) // DF
	p[8] = 64
	p[9] = proto
	copy(p[12:16], benchSrc[:])
	copy(p[16:20], benchDst[:])
	ipChecksum(p)
}

// l4Checksum is the UDP/TCP checksum of IPv4 packet p over the pseudo
// header and the segment, with the checksum field as it is in p.
func l4Checksum(p []byte, proto uint8) uint16 {
	seg := p[20:]
	var s uint32
	for i := 12; i < 20; i += 2 {
		s += uint32(binary.BigEndian.Uint16(p[i:]))
	}
	s += uint32(proto) + uint32(len(seg))
	for i := 0; i+1 < len(seg); i += 2 {
		s += uint32(binary.BigEndian.Uint16(seg[i:]))
	}
	if len(seg)%2 == 1 {
		s += uint32(seg[len(seg)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// payloadOf returns the L4 payload length of p if it is one of the
// benchmark's packets (IPv4 to benchDst with its protocol), else -1.
func payloadOf(p []byte, proto uint8) int {
	if len(p) < 40 || p[0] != 0x45 || p[9] != proto || [4]byte(p[16:20]) != benchDst {
		return -1
	}
	if proto == unix.IPPROTO_UDP {
		return len(p) - 28
	}
	return len(p) - 20 - int(p[32]>>4)*4
}

// watchdog closes the devices if an iteration makes no progress for
// stall, so a lost packet fails the benchmark instead of hanging it.
type watchdog struct {
	t     *time.Timer
	mu    sync.Mutex
	fired bool
}

func newWatchdog(tb testing.TB, stall time.Duration, devs ...Device) *watchdog {
	w := &watchdog{}
	w.t = time.AfterFunc(stall, func() {
		w.mu.Lock()
		w.fired = true
		w.mu.Unlock()
		for _, d := range devs {
			d.Close()
		}
	})
	tb.Cleanup(func() { w.t.Stop() })
	return w
}

func (w *watchdog) didFire() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fired
}

type benchTraffic struct {
	name    string
	proto   uint8
	payload int // L4 payload per packet
}

var benchTraffics = []benchTraffic{
	{"udp-64B", unix.IPPROTO_UDP, 64 - 28},
	{"udp-1500B", unix.IPPROTO_UDP, benchMTU - 28},
	// Full-MSS segments of one TCP flow: offload's write coalesces a
	// batch into 64 KiB super-packets (GRO), the kernel forwards them as
	// such, and the read splits them again (GSO).
	{"tcp-1500B", unix.IPPROTO_TCP, benchMTU - 40},
}

// BenchmarkTUNForward writes a batch into tunA and reads it back from
// tunB, for each backend and kind of traffic.
func BenchmarkTUNForward(b *testing.B) {
	for _, backend := range Backends {
		for _, tr := range benchTraffics {
			b.Run(backend+"/"+tr.name, func(b *testing.B) {
				p := openBenchPair(b, backend)
				benchForward(b, p, tr)
			})
		}
	}
}

func benchForward(b *testing.B, p benchPair, tr benchTraffic) {
	batch := p.a.BatchSize()
	wbufs := benchBufs(batch, benchOffset+benchMTU)
	out := make([][]byte, batch) // the packets, sliced to their ends
	rbufs := benchBufs(max(p.b.BatchSize(), 1), benchOffset+benchMTU)
	sizes := make([]int, len(rbufs))

	// The same batch goes out every iteration (Write leaves it as it is):
	// the kernel forwards without connection tracking, and GRO only needs
	// the segments of one batch to be consecutive.
	var seq uint32 = 1
	bytes, want := 0, 0
	for i, w := range wbufs {
		var n int
		if tr.proto == unix.IPPROTO_UDP {
			n = fillUDP(w[benchOffset:], tr.payload, uint16(i))
		} else {
			n = fillTCP(w[benchOffset:], tr.payload, seq, uint16(i))
			seq += uint32(tr.payload)
		}
		out[i] = w[:benchOffset+n]
		bytes += n
		want += tr.payload
	}
	b.SetBytes(int64(bytes))

	var rx0 uint64
	if l, err := p.nl.LinkByName(p.a.Name()); err == nil && l.Attrs().Statistics != nil {
		rx0 = l.Attrs().Statistics.RxPackets
	}
	wd := newWatchdog(b, 10*time.Second, p.a, p.b)
	b.ReportAllocs()
	packets := 0
	for b.Loop() {
		wd.t.Reset(10 * time.Second)
		if n, err := p.a.Write(out, benchOffset); err != nil || n != len(out) {
			b.Fatalf("write to %s: %d of %d packets: %v", p.a.Name(), n, len(out), err)
		}
		got := 0
		for got < want {
			n, err := p.b.Read(rbufs, sizes, benchOffset)
			if err != nil {
				if wd.didFire() {
					b.Fatalf("read from %s: %d of %d payload bytes after 10 s: %v", p.b.Name(), got, want, err)
				}
				b.Fatalf("read from %s: %v", p.b.Name(), err)
			}
			for i := range n {
				if l := payloadOf(rbufs[i][benchOffset:benchOffset+sizes[i]], tr.proto); l >= 0 {
					got += l
					packets++
				}
			}
		}
		if got != want {
			b.Fatalf("read %d payload bytes from %s, want %d", got, p.b.Name(), want)
		}
	}
	wd.t.Stop()
	b.ReportMetric(float64(packets)/b.Elapsed().Seconds(), "pkts/s")
	// How many packets the kernel took in per batch: fewer than the
	// batch when offload's GRO coalesced it into super-packets.
	if l, err := p.nl.LinkByName(p.a.Name()); err == nil && l.Attrs().Statistics != nil {
		b.ReportMetric(float64(l.Attrs().Statistics.RxPackets-rx0)/float64(b.N), "skbs/op")
	}
}

// BenchmarkFakeBatch is the same round trip through the in-memory Fake
// (no root needed): a batch injected and read, then written and taken
// from Written. It measures the Fake's own cost (it copies every packet),
// the floor under tests that use it.
func BenchmarkFakeBatch(b *testing.B) {
	for _, tr := range benchTraffics {
		b.Run(tr.name, func(b *testing.B) {
			const batch = 128
			f := NewFake("fake0", benchMTU, batch, batch)
			b.Cleanup(func() { f.Close() })
			pkts := benchBufs(batch, benchMTU)
			bytes := 0
			var seq uint32 = 1
			for i, p := range pkts {
				var n int
				if tr.proto == unix.IPPROTO_UDP {
					n = fillUDP(p, tr.payload, uint16(i))
				} else {
					n = fillTCP(p, tr.payload, seq, uint16(i))
					seq += uint32(tr.payload)
				}
				pkts[i] = p[:n]
				bytes += n
			}
			rbufs := benchBufs(batch, benchOffset+benchMTU)
			sizes := make([]int, batch)
			wslices := make([][]byte, batch)
			b.SetBytes(int64(bytes))
			b.ReportAllocs()
			packets := 0
			for b.Loop() {
				for _, p := range pkts {
					if !f.Inject(p) {
						b.Fatal("inject after close")
					}
				}
				got := 0
				for got < batch {
					n, err := f.Read(rbufs[got:], sizes[got:], benchOffset)
					if err != nil {
						b.Fatal(err)
					}
					got += n
				}
				for i := range got {
					wslices[i] = rbufs[i][:benchOffset+sizes[i]]
				}
				if n, err := f.Write(wslices, benchOffset); err != nil || n != batch {
					b.Fatalf("write: %d of %d: %v", n, batch, err)
				}
				for range batch {
					if p := <-f.Written(); len(p) != len(pkts[0]) {
						b.Fatalf("written packet of %d bytes, want %d", len(p), len(pkts[0]))
					}
				}
				packets += batch
			}
			b.ReportMetric(float64(packets)/b.Elapsed().Seconds(), "pkts/s")
		})
	}
}
