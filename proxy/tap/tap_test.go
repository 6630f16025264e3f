package tap

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/units"
)

// udpPacket returns an IPv4 (or IPv6) UDP packet carrying payload.
func udpPacket(t testing.TB, v6 bool, payload []byte) []byte {
	t.Helper()
	udp := &layers.UDP{SrcPort: 4000, DstPort: 5000}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	var err error
	if v6 {
		ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP,
			SrcIP: net.ParseIP("fd00::1"), DstIP: net.ParseIP("fd00::2")}
		_ = udp.SetNetworkLayerForChecksum(ip)
		err = gopacket.SerializeLayers(buf, opts, ip, udp, gopacket.Payload(payload))
	} else {
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP,
			SrcIP: net.IPv4(10, 0, 0, 1), DstIP: net.IPv4(10, 0, 1, 1)}
		_ = udp.SetNetworkLayerForChecksum(ip)
		err = gopacket.SerializeLayers(buf, opts, ip, udp, gopacket.Payload(payload))
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type readRecord struct {
	iface    int
	ts       time.Time
	capLen   int
	origLen  int
	dir      pcapgo.NgEpbFlag
	comments []string
	data     []byte
}

func readAll(t *testing.T, file []byte) (*pcapgo.NgReader, []readRecord) {
	t.Helper()
	r, err := pcapgo.NewNgReader(bytes.NewReader(file), pcapgo.NgReaderOptions{})
	if err != nil {
		t.Fatalf("NgReader: %v", err)
	}
	var out []readRecord
	for {
		data, ci, opts, err := r.ReadPacketDataWithOptions()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading record %d: %v", len(out), err)
		}
		rec := readRecord{iface: ci.InterfaceIndex, ts: ci.Timestamp, capLen: ci.CaptureLength,
			origLen: ci.Length, comments: opts.Comments, data: data}
		if opts.Flags != nil {
			rec.dir = opts.Flags.Direction
		}
		out = append(out, rec)
	}
	return r, out
}

func TestRoundTrip(t *testing.T) {
	var file bytes.Buffer
	closeTime := time.Unix(1700000100, 0)
	tp, err := New(&file, 0, []string{"eth0", "eth1"}, WithSnapLen(128), withClock(func() time.Time { return closeTime }))
	if err != nil {
		t.Fatal(err)
	}
	small := udpPacket(t, false, []byte("hello"))
	big := udpPacket(t, true, bytes.Repeat([]byte{0xab}, 300))
	t0 := time.Unix(1700000000, 123456789)
	tp.Entered(0, t0, small)
	tp.Left(0, t0.Add(50*time.Millisecond+7), small)
	tp.Entered(1, t0.Add(time.Microsecond), big)
	tp.Dropped(1, t0.Add(2*time.Microsecond), big, "loss")
	tp.Dropped(0, t0.Add(3*time.Microsecond), small, "queue")
	tp.Entered(2, t0, small)  // no such direction: ignored
	tp.Entered(-1, t0, small) // likewise
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	tp.Entered(0, t0, small) // after Close: ignored
	st := tp.Stats()
	if st.Records != 5 || st.RingFull != 0 || st.OverLimit != 0 {
		t.Errorf("stats %+v, want 5 records and nothing lost", st)
	}
	if st.Bytes != uint64(file.Len()) {
		t.Errorf("Stats.Bytes = %d, file has %d bytes", st.Bytes, file.Len())
	}

	r, recs := readAll(t, file.Bytes())
	if r.NInterfaces() != 2 {
		t.Fatalf("%d interfaces, want 2", r.NInterfaces())
	}
	for i, name := range []string{"eth0", "eth1"} {
		intf, _ := r.Interface(i)
		if intf.Name != name || intf.LinkType != layers.LinkTypeRaw || intf.TimestampResolution != 9 || intf.SnapLength != 128 {
			t.Errorf("interface %d = %+v, want %s, raw IP, ns resolution, snaplen 128", i, intf, name)
		}
		if intf.Statistics.PacketsReceived != [2]uint64{3, 2}[i] || intf.Statistics.PacketsDropped != 0 {
			t.Errorf("interface %d statistics %+v", i, intf.Statistics)
		}
	}
	want := []readRecord{
		{0, t0, len(small), len(small), pcapgo.NgEpbFlagDirectionInbound, nil, small},
		{0, t0.Add(50*time.Millisecond + 7), len(small), len(small), pcapgo.NgEpbFlagDirectionOutbound, nil, small},
		{1, t0.Add(time.Microsecond), 128, len(big), pcapgo.NgEpbFlagDirectionInbound, nil, big[:128]},
		{1, t0.Add(2 * time.Microsecond), 128, len(big), pcapgo.NgEpbFlagDirectionInbound, []string{"dropped: loss"}, big[:128]},
		{0, t0.Add(3 * time.Microsecond), len(small), len(small), pcapgo.NgEpbFlagDirectionInbound, []string{"dropped: queue"}, small},
	}
	if len(recs) != len(want) {
		t.Fatalf("read %d records, want %d", len(recs), len(want))
	}
	for i, w := range want {
		g := recs[i]
		if g.iface != w.iface || !g.ts.Equal(w.ts) || g.capLen != w.capLen || g.origLen != w.origLen ||
			g.dir != w.dir || fmt.Sprint(g.comments) != fmt.Sprint(w.comments) || !bytes.Equal(g.data, w.data) {
			t.Errorf("record %d = {iface %d ts %v cap %d len %d dir %d comments %q}, want {iface %d ts %v cap %d len %d dir %d comments %q}",
				i, g.iface, g.ts, g.capLen, g.origLen, g.dir, g.comments, w.iface, w.ts, w.capLen, w.origLen, w.dir, w.comments)
		}
	}
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestParkedWriterWakes checks the writer's idle path: after idlePolls empty
// polls it parks, and the next record wakes it without Close.
func TestParkedWriterWakes(t *testing.T) {
	var file syncBuffer
	tp, err := New(&file, 0, []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	waitFor(t, "the writer to park", tp.sleeping.Load)
	tp.Left(0, time.Unix(1, 0), []byte{0x45, 0, 0, 20})
	waitFor(t, "the record to be written", func() bool { return tp.Stats().Records == 1 })
	waitFor(t, "the record to reach the file", func() bool { return uint64(file.Len()) == tp.Stats().Bytes })
	waitFor(t, "the writer to park again", tp.sleeping.Load)
	tp.Left(0, time.Unix(2, 0), []byte{0x45, 0, 0, 20})
	waitFor(t, "the second record", func() bool { return tp.Stats().Records == 2 })
}

// syncBuffer is a bytes.Buffer safe to read while the writer appends.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

func TestNilTapIsANoOp(t *testing.T) {
	var tp *Tap
	tp.Entered(0, time.Now(), []byte{0x45})
	tp.Dropped(0, time.Now(), []byte{0x45}, "loss")
	if tp.Stats() != (Stats{}) || tp.Close() != nil {
		t.Fatal("nil tap must do nothing")
	}
}

func TestSizeLimit(t *testing.T) {
	pkt := udpPacket(t, false, make([]byte, 100)) // 128 bytes: EPB of 32+128+12 = 172 bytes
	var header bytes.Buffer
	if _, err := New(&header, 0, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	// A tap without records still writes its statistics on Close; so the
	// smallest limit is header + 2 ISBs, and each record needs 172 more.
	base := header.Len() + 2*isbLen
	if _, err := New(io.Discard, units.Size(base-1), []string{"a", "b"}); err == nil {
		t.Fatalf("limit below header+statistics (%d) accepted", base)
	}
	const fits = 7
	limit := base + fits*172 + 171
	var file bytes.Buffer
	tp, err := New(&file, units.Size(limit), []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1, 0)
	for i := 0; i < 20; i++ {
		tp.Entered(i%2, now, pkt)
	}
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	st := tp.Stats()
	if st.Records != fits || st.OverLimit != 20-fits || st.RingFull != 0 {
		t.Errorf("stats %+v, want %d records and %d over the limit", st, fits, 20-fits)
	}
	if file.Len() > limit || uint64(file.Len()) != st.Bytes {
		t.Errorf("file %d bytes, limit %d, Stats.Bytes %d", file.Len(), limit, st.Bytes)
	}
	r, recs := readAll(t, file.Bytes())
	if len(recs) != fits {
		t.Errorf("read %d records, want %d", len(recs), fits)
	}
	var dropped uint64
	for i := 0; i < 2; i++ {
		intf, _ := r.Interface(i)
		if intf.Statistics.PacketsReceived != 10 {
			t.Errorf("interface %d: isb_ifrecv %d, want 10", i, intf.Statistics.PacketsReceived)
		}
		dropped += intf.Statistics.PacketsDropped
	}
	if dropped != 20-fits {
		t.Errorf("isb_ifdrop sum %d, want %d", dropped, 20-fits)
	}
}

// gateWriter lets the header through, then blocks every write until opened,
// like a disk that stalls.
type gateWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	armed   bool
	blocked chan struct{} // closed when a write first blocks
	open    chan struct{}
	once    sync.Once
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	armed := g.armed
	g.mu.Unlock()
	if armed {
		g.once.Do(func() { close(g.blocked) })
		<-g.open
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(p)
}

func TestSlowDiskDropsRecordsNotPackets(t *testing.T) {
	g := &gateWriter{blocked: make(chan struct{}), open: make(chan struct{})}
	const slots = 8
	tp, err := New(g, 0, []string{"a"}, WithSlots(slots))
	if err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
	pkt := udpPacket(t, false, nil)
	now := time.Unix(1, 0)
	tp.Entered(0, now, pkt) // the writer takes it, flushes and blocks
	select {
	case <-g.blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("writer never flushed")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 100; i++ {
			tp.Left(0, now, pkt)
		}
	}()
	select {
	case <-done: // the producer never waits for the stalled writer
	case <-time.After(10 * time.Second):
		t.Fatal("producer blocked behind a stalled writer")
	}
	if st := tp.Stats(); st.RingFull != 100-slots {
		t.Errorf("ring full %d, want %d", st.RingFull, 100-slots)
	}
	close(g.open)
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	if st := tp.Stats(); st.Records != 1+slots {
		t.Errorf("records %d, want %d", st.Records, 1+slots)
	}
	_, recs := readAll(t, g.buf.Bytes())
	if len(recs) != 1+slots {
		t.Errorf("read %d records, want %d", len(recs), 1+slots)
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("disk full")
	}
	f.n--
	return len(p), nil
}

func TestWriteErrorStopsRecordingAndIsReturned(t *testing.T) {
	// pcapgo buffers the header and writes it in one call on New's Flush.
	tp, err := New(&failWriter{n: 1}, 0, []string{"a"}, WithSnapLen(4096))
	if err != nil {
		t.Fatal(err)
	}
	pkt := make([]byte, 4000) // larger than bufio's 4096 buffer after one more: forces writes
	for i := 0; i < 3; i++ {
		tp.Entered(0, time.Unix(1, 0), pkt)
	}
	err = tp.Close()
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Close = %v, want the write error", err)
	}
}

func TestConcurrentProducers(t *testing.T) {
	var file bytes.Buffer
	tp, err := New(&file, 0, []string{"a", "b"}, WithSlots(1<<14))
	if err != nil {
		t.Fatal(err)
	}
	const perG = 2000
	var wg sync.WaitGroup
	for gi := 0; gi < 4; gi++ {
		wg.Add(1)
		go func(gi int) {
			defer wg.Done()
			pkt := []byte{0x45, byte(gi), 0, 20}
			for i := 0; i < perG; i++ {
				tp.Entered(gi%2, time.Unix(0, int64(i)), pkt)
			}
		}(gi)
	}
	wg.Wait()
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	st := tp.Stats()
	if st.Records+st.RingFull != 4*perG {
		t.Fatalf("records %d + ring full %d != %d", st.Records, st.RingFull, 4*perG)
	}
	_, recs := readAll(t, file.Bytes())
	perProducer := map[byte]int{}
	for _, r := range recs {
		if r.iface != int(r.data[1]%2) {
			t.Fatalf("record of producer %d on interface %d", r.data[1], r.iface)
		}
		perProducer[r.data[1]]++
	}
	if uint64(len(recs)) != st.Records {
		t.Errorf("read %d records, stats say %d", len(recs), st.Records)
	}
}

// TestTshark checks that Wireshark's own reader sees the interface names,
// directions and drop comments.
func TestTshark(t *testing.T) {
	tshark := testenv.RequireCommand(t, "tshark")
	path := filepath.Join(t.TempDir(), "tap.pcapng")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := New(f, 0, []string{"veth-a", "veth-b"})
	if err != nil {
		t.Fatal(err)
	}
	p4 := udpPacket(t, false, []byte("x"))
	p6 := udpPacket(t, true, []byte("y"))
	t0 := time.Unix(1700000000, 1)
	tp.Entered(0, t0, p4)
	tp.Left(0, t0.Add(time.Millisecond), p4)
	tp.Entered(1, t0.Add(2*time.Millisecond), p6)
	tp.Dropped(1, t0.Add(2*time.Millisecond), p6, "loss")
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tshark, "-r", path, "-T", "fields", "-E", "separator=|",
		"-e", "frame.interface_name", "-e", "frame.packet_flags_direction", "-e", "frame.comment",
		"-e", "ip.src", "-e", "ipv6.src", "-e", "frame.time_epoch")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir()) // no user profile
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	got := strings.TrimSpace(string(out))
	want := strings.Join([]string{
		"veth-a|0x00000001||10.0.0.1||1700000000.000000001",
		"veth-a|0x00000002||10.0.0.1||1700000000.001000001",
		"veth-b|0x00000001|||fd00::1|1700000000.002000001",
		"veth-b|0x00000001|dropped: loss||fd00::1|1700000000.002000001",
	}, "\n")
	if got != want {
		t.Errorf("tshark read\n%s\nwant\n%s", got, want)
	}
}

// BenchmarkRecord measures what the forwarding path pays per record when
// the ring has room: the timer stops while the writer drains each ringful.
func BenchmarkRecord(b *testing.B) {
	pkt := make([]byte, 1500)
	pkt[0] = 0x45
	tp, err := New(io.Discard, 0, []string{"a", "b"})
	if err != nil {
		b.Fatal(err)
	}
	slots := uint64(len(tp.ring.slots))
	now := time.Unix(1, 0)
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if uint64(i)%slots == 0 {
			b.StopTimer()
			waitDrained(tp)
			b.StartTimer()
		}
		tp.Entered(i&1, now, pkt)
	}
	b.StopTimer()
	if err := tp.Close(); err != nil {
		b.Fatal(err)
	}
	if st := tp.Stats(); st.RingFull != 0 {
		b.Fatalf("ring full %d", st.RingFull)
	}
}

// waitDrained waits until the writer has written every record offered
// (benchmarks only).
func waitDrained(tp *Tap) {
	for tp.ring.enq.Load() != tp.records.Load() {
		runtime.Gosched()
	}
}

// BenchmarkRecordRingFull measures the cost when the writer is behind and
// the record is dropped (counted) instead.
func BenchmarkRecordRingFull(b *testing.B) {
	g := &gateWriter{blocked: make(chan struct{}), open: make(chan struct{})}
	tp, err := New(g, 0, []string{"a"}, WithSlots(2))
	if err != nil {
		b.Fatal(err)
	}
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
	pkt := make([]byte, 1500)
	now := time.Unix(1, 0)
	tp.Entered(0, now, pkt)
	<-g.blocked
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tp.Entered(0, now, pkt)
	}
	b.StopTimer()
	close(g.open)
	if err := tp.Close(); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkRecordParallel(b *testing.B) {
	pkt := make([]byte, 1500)
	tp, err := New(io.Discard, 0, []string{"a", "b"})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Unix(1, 0)
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tp.Left(1, now, pkt)
		}
	})
	b.StopTimer()
	if err := tp.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWriter measures the writer goroutine's cost per record: encoding
// a 1500-byte dropped packet (flags and comment) and writing it out in 1 MiB
// chunks to io.Discard. It runs on a closed tap, whose writer goroutine has
// exited, so the benchmark loop owns the writer state.
func BenchmarkWriter(b *testing.B) {
	tp, err := New(io.Discard, 0, []string{"a"})
	if err != nil {
		b.Fatal(err)
	}
	if err := tp.Close(); err != nil {
		b.Fatal(err)
	}
	rec := record{ts: 1, origLen: 1500, capLen: 1500, kind: kindDropped, reason: "loss", data: make([]byte, 1500)}
	b.SetBytes(int64(rec.capLen))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tp.encode(&rec)
	}
	tp.writeOut()
	if tp.err != nil || tp.records.Load() != uint64(b.N) {
		b.Fatalf("err %v, %d records", tp.err, tp.records.Load())
	}
}
