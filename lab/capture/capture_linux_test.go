package capture_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/pcapgo"

	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/capture"
	"github.com/wanlab/wanlab/lab/labtest"
	"github.com/wanlab/wanlab/lab/traffic"
	"github.com/wanlab/wanlab/units"
)

func startServer(t testing.TB, l *lab.Lab) *traffic.Server {
	t.Helper()
	s, err := traffic.StartServer(context.Background(), l.Server.Handle,
		traffic.ServerConfig{Listen: netip.AddrPortFrom(l.Server.IPv4, 0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func download(t *testing.T, l *lab.Lab, srv *traffic.Server, size units.Size) traffic.DownloadResult {
	t.Helper()
	res, err := traffic.Download(context.Background(), l.Client.Handle, traffic.DownloadConfig{Server: srv.Addr(), Size: size})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// startCapture begins a capture that is stopped at the end of the test
// even when the test fails first.
func startCapture(t *testing.T, h *lab.Host, path string, cfg capture.Config) *capture.Capture {
	t.Helper()
	c, err := capture.StartFile(h.Handle, h.Link, path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.Stop() })
	return c
}

type packet struct {
	ts             time.Time
	capLen, length int
	src, dst       netip.Addr
	ipLen          int // IP total length from the header
	payload        int // TCP payload length by the IP header
	syn            bool
}

// readTCP parses a pcapng file with gopacket's reader, independently of
// the capture code, and decodes IPv4/TCP headers.
func readTCP(t *testing.T, path string) (pkts []packet, other int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	if r.LinkType() != 1 {
		t.Fatalf("link type %v, want Ethernet", r.LinkType())
	}
	for {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(data) < 14+20 || binary.BigEndian.Uint16(data[12:]) != 0x0800 || data[14+9] != 6 {
			other++
			continue
		}
		ip := data[14:]
		ihl := int(ip[0]&0xf) * 4
		tcp := ip[ihl:]
		p := packet{ts: ci.Timestamp, capLen: ci.CaptureLength, length: ci.Length,
			src: netip.AddrFrom4([4]byte(ip[12:16])), dst: netip.AddrFrom4([4]byte(ip[16:20])),
			ipLen: int(binary.BigEndian.Uint16(ip[2:4])), syn: tcp[13]&0x02 != 0}
		p.payload = p.ipLen - ihl - int(tcp[12]>>4)*4
		pkts = append(pkts, p)
	}
	return pkts, other
}

func TestCaptureDownloadBothEnds(t *testing.T) {
	l := labtest.Lab(t, context.Background(), lab.Config{})
	srv := startServer(t, l)
	dir := t.TempDir()
	cliPath, srvPath := filepath.Join(dir, "client.pcapng"), filepath.Join(dir, "server.pcapng")
	cc := startCapture(t, &l.Client, cliPath, capture.Config{Comment: l.Client.NS})
	sc := startCapture(t, &l.Server, srvPath, capture.Config{})
	const size = 8 * units.MiB
	res := download(t, l, srv, size)
	cst, err := cc.Stop()
	if err != nil {
		t.Fatal(err)
	}
	sst, err := sc.Stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("client %+v", cst)
	t.Logf("server %+v", sst)
	for _, side := range []struct {
		name string
		path string
		st   capture.Stats
	}{{"client", cliPath, cst}, {"server", srvPath, sst}} {
		pkts, other := readTCP(t, side.path)
		if other != 0 {
			t.Errorf("%s: %d non-TCP frames in a TCP capture", side.name, other)
		}
		if uint64(len(pkts)) != side.st.Packets || side.st.Packets == 0 {
			t.Fatalf("%s: file has %d packets, stats say %d", side.name, len(pkts), side.st.Packets)
		}
		if fi, _ := os.Stat(side.path); fi.Size() != int64(side.st.Bytes) {
			t.Errorf("%s: file is %d bytes, stats say %d", side.name, fi.Size(), side.st.Bytes)
		}
		if side.st.Incoming == 0 || side.st.Outgoing == 0 || side.st.Incoming+side.st.Outgoing != side.st.Packets {
			t.Errorf("%s: directions in %d out %d of %d", side.name, side.st.Incoming, side.st.Outgoing, side.st.Packets)
		}
		if side.st.KernelPackets < side.st.Packets {
			t.Errorf("%s: kernel counted %d packets, fewer than the %d written", side.name, side.st.KernelPackets, side.st.Packets)
		}
		if !pkts[0].syn || pkts[0].src != l.Client.IPv4 {
			t.Errorf("%s: first packet %+v, want the client's SYN", side.name, pkts[0])
		}
		var data, wire int
		for i, p := range pkts {
			if p.capLen > capture.DefaultSnaplen {
				t.Fatalf("%s: packet %d captured %d bytes, snaplen %d", side.name, i, p.capLen, capture.DefaultSnaplen)
			}
			// The original length is the whole frame: Ethernet + IP.
			if p.length != 14+p.ipLen {
				t.Fatalf("%s: packet %d length %d, IP says %d+14", side.name, i, p.length, p.ipLen)
			}
			// The kernel stamps a packet on the CPU that handles it and
			// then queues it to the shared ring, so two CPUs can put a
			// packet stamped microseconds earlier behind a later one (as
			// in tcpdump's captures). Allow that, not a real reordering.
			if i > 0 && pkts[i-1].ts.Sub(p.ts) > time.Millisecond {
				t.Fatalf("%s: packet %d stamped %v before packet %d", side.name, i, pkts[i-1].ts.Sub(p.ts), i-1)
			}
			if p.src == l.Server.IPv4 {
				data += p.payload
			}
			wire += p.length
		}
		if uint64(wire) != uint64(side.st.Wire) {
			t.Errorf("%s: wire bytes %d, stats say %d", side.name, wire, side.st.Wire)
		}
		// The body plus the HTTP header, each byte at least once.
		if data < int(res.Bytes) || data > int(res.Bytes)*11/10 {
			t.Errorf("%s: server sent %d payload bytes in the capture, download was %d", side.name, data, res.Bytes)
		}
	}
}

func TestCaptureMatchesTshark(t *testing.T) {
	tshark := testenv.RequireCommand(t, "tshark")
	l := labtest.Lab(t, context.Background(), lab.Config{})
	srv := startServer(t, l)
	path := filepath.Join(t.TempDir(), "c.pcapng")
	c := startCapture(t, &l.Client, path, capture.Config{})
	download(t, l, srv, 2*units.MiB)
	st, err := c.Stop()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tshark, "-n", "-r", path, "-T", "fields", "-e", "frame.len", "-e", "frame.cap_len", "-e", "tcp.srcport").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if uint64(len(lines)) != st.Packets {
		t.Fatalf("tshark reads %d packets, capture wrote %d", len(lines), st.Packets)
	}
	var wire uint64
	for _, ln := range lines {
		f := strings.Fields(ln)
		if len(f) != 3 {
			t.Fatalf("tshark line %q: not a TCP packet with lengths", ln)
		}
		n, _ := strconv.ParseUint(f[0], 10, 64)
		cl, _ := strconv.Atoi(f[1])
		if cl > capture.DefaultSnaplen {
			t.Fatalf("tshark: cap_len %d > snaplen", cl)
		}
		wire += n
	}
	if wire != uint64(st.Wire) {
		t.Errorf("tshark sums frame.len to %d, capture %d", wire, st.Wire)
	}
}

func TestCaptureBoundsAndFilters(t *testing.T) {
	l := labtest.Lab(t, context.Background(), lab.Config{})
	srv := startServer(t, l)
	dir := t.TempDir()
	bounded := startCapture(t, &l.Client, filepath.Join(dir, "b.pcapng"), capture.Config{MaxPackets: 10})
	var all bytes.Buffer
	everything, err := capture.Start(l.Client.Handle, l.Client.Link, &all, capture.Config{Filter: capture.FilterAll, Snaplen: 64})
	if err != nil {
		t.Fatal(err)
	}
	tcpOnly := startCapture(t, &l.Client, filepath.Join(dir, "t.pcapng"), capture.Config{MaxBytes: 8 * units.KiB})
	download(t, l, srv, 4*units.MiB)
	select {
	case <-bounded.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("capture bounded at 10 packets did not end by itself")
	}
	bst, err := bounded.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if bst.Packets != 10 || !bst.Bounded {
		t.Errorf("bounded capture: %+v, want 10 packets and Bounded", bst)
	}
	if pkts, _ := readTCP(t, filepath.Join(dir, "b.pcapng")); len(pkts) != 10 {
		t.Errorf("bounded file has %d packets", len(pkts))
	}
	ast, err := everything.Stop()
	if err != nil {
		t.Fatal(err)
	}
	tst, err := tcpOnly.Stop()
	if err != nil {
		t.Fatal(err)
	}
	// Bounded below 8 KiB, short of it by less than one packet's block.
	if !tst.Bounded || tst.Bytes > 8*units.KiB || tst.Bytes < 8*units.KiB-200 {
		t.Errorf("8 KiB-bounded capture: %+v", tst)
	}
	// A fresh lab resolves the router's MAC with ARP first: the "all"
	// capture has it, the TCP one filtered it out.
	if ast.Filtered != 0 || tst.Filtered == 0 {
		t.Errorf("filtered: all=%d tcp=%d, want 0 and >0", ast.Filtered, tst.Filtered)
	}
	r, err := pcapgo.NewNgReader(&all, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	var arp, n int
	for {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			break
		}
		n++
		if ci.CaptureLength > 64 {
			t.Fatalf("snaplen 64 capture kept %d bytes", ci.CaptureLength)
		}
		if binary.BigEndian.Uint16(data[12:]) == 0x0806 {
			arp++
		}
	}
	if uint64(n) != ast.Packets || arp == 0 {
		t.Errorf("all-frames capture: %d frames read (stats %d), %d ARP", n, ast.Packets, arp)
	}
}

func TestStartErrorsNameTheInterface(t *testing.T) {
	l := labtest.Lab(t, context.Background(), lab.Config{})
	_, err := capture.Start(l.Client.Handle, "nosuch0", io.Discard, capture.Config{})
	if err == nil || !strings.Contains(err.Error(), "nosuch0") {
		t.Errorf("Start on a missing interface = %v", err)
	}
	_, err = capture.Start(l.Client.Handle, l.Client.Link, io.Discard, capture.Config{Snaplen: 10})
	if err == nil || !strings.Contains(err.Error(), "snaplen 10") {
		t.Errorf("Start with snaplen 10 = %v", err)
	}
}

// BenchmarkCapturedDownload measures a kernel-routed download while both
// ends are captured, and reports the kernel's drops per run.
func BenchmarkCapturedDownload(b *testing.B) {
	l := labtest.Lab(b, context.Background(), lab.Config{})
	srv := startServer(b, l)
	const size = 256 * units.MiB
	b.SetBytes(int64(size))
	var drops, pkts uint64
	dir := b.TempDir()
	for b.Loop() {
		cc, err := capture.StartFile(l.Client.Handle, l.Client.Link, filepath.Join(dir, "c.pcapng"), capture.Config{})
		if err != nil {
			b.Fatal(err)
		}
		sc, err := capture.StartFile(l.Server.Handle, l.Server.Link, filepath.Join(dir, "s.pcapng"), capture.Config{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := traffic.Download(context.Background(), l.Client.Handle, traffic.DownloadConfig{Server: srv.Addr(), Size: size}); err != nil {
			b.Fatal(err)
		}
		for _, c := range []*capture.Capture{cc, sc} {
			st, err := c.Stop()
			if err != nil {
				b.Fatal(err)
			}
			drops += st.KernelDrops
			pkts += st.Packets
		}
	}
	b.ReportMetric(float64(drops)/float64(b.N), "drops/op")
	b.ReportMetric(float64(pkts)/float64(b.N), "packets/op")
}
