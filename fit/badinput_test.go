package fit

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// writeCapture writes TCP packets (client 10.0.0.1:40000, server
// 10.0.0.2:80) to a pcap: each is a direction (0: client to server),
// flags, sequence, ack and payload length.
type pkt struct {
	dir           int
	syn, ack, fin bool
	seq, acknum   uint32
	payload       int
	at            time.Duration
	cport         uint16 // the client's port (0: 40000)
}

func writeCapture(t testing.TB, pkts []pkt) string {
	t.Helper()
	var buf bytes.Buffer
	w := pcapgo.NewWriterNanos(&buf)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, p := range pkts {
		eth := &layers.Ethernet{SrcMAC: []byte{2, 0, 0, 0, 0, 1}, DstMAC: []byte{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: []byte{10, 0, 0, 1}, DstIP: []byte{10, 0, 0, 2}}
		tcp := &layers.TCP{SrcPort: 40000, DstPort: 80, Seq: p.seq, Ack: p.acknum, SYN: p.syn, ACK: p.ack, FIN: p.fin, Window: 65535}
		if p.cport != 0 {
			tcp.SrcPort = layers.TCPPort(p.cport)
		}
		if p.dir == 1 {
			ip.SrcIP, ip.DstIP = ip.DstIP, ip.SrcIP
			tcp.SrcPort, tcp.DstPort = 80, tcp.SrcPort
		}
		_ = tcp.SetNetworkLayerForChecksum(ip)
		sb := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(sb, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			eth, ip, tcp, gopacket.Payload(make([]byte, p.payload))); err != nil {
			t.Fatal(err)
		}
		b := sb.Bytes()
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: start.Add(p.at), CaptureLength: len(b), Length: len(b)}, b); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "c.pcap")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBadInput: a capture with one packet, or only ACKs, has nothing to
// fit and says so in one line; a file that is no capture is refused.
func TestBadInput(t *testing.T) {
	one := writeCapture(t, []pkt{{dir: 0, syn: true, seq: 1}})
	acks := writeCapture(t, []pkt{
		{dir: 0, ack: true, seq: 100, acknum: 5000},
		{dir: 1, ack: true, seq: 5000, acknum: 100, at: time.Millisecond},
		{dir: 0, ack: true, seq: 100, acknum: 5000, at: 2 * time.Millisecond},
	})
	junk := filepath.Join(t.TempDir(), "junk.pcap")
	os.WriteFile(junk, []byte("not a capture at all"), 0o600)
	for name, path := range map[string]string{"one packet": one, "only ACKs": acks} {
		_, err := File(path, Options{})
		if !errors.Is(err, ErrNoConnection) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line saying there is no connection with data", name, err)
		}
	}
	if _, err := File(junk, Options{}); err == nil {
		t.Error("a file that is no capture was fitted")
	}
	if _, err := File(acks, Options{Flow: "x:y"}); err == nil {
		t.Error("a bad --flow was accepted")
	}
}

// TestShortTransfer: a handful of segments fit what they can (the round
// trip from the handshake) and say the rest is unknown, without guessing.
func TestShortTransfer(t *testing.T) {
	ms := time.Millisecond
	path := writeCapture(t, []pkt{
		{dir: 0, syn: true, seq: 99, at: 0},
		{dir: 1, syn: true, ack: true, seq: 4999, acknum: 100, at: 30 * ms},
		{dir: 0, ack: true, seq: 100, acknum: 5000, at: 30*ms + 100*time.Microsecond},
		{dir: 1, ack: true, seq: 5000, acknum: 100, payload: 1000, at: 31 * ms},
		{dir: 1, ack: true, seq: 6000, acknum: 100, payload: 1000, at: 31*ms + 10*time.Microsecond},
		{dir: 0, ack: true, seq: 100, acknum: 7000, at: 61 * ms},
		{dir: 1, ack: true, fin: true, seq: 7000, acknum: 100, at: 62 * ms},
	})
	f, err := File(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var d Direction
	for _, x := range f.Directions {
		if x.Data {
			d = x
		}
	}
	if f.Transfer.Direction != "download" || f.Transfer.Bytes != 2000 {
		t.Errorf("transfer %+v", f.Transfer)
	}
	if rtt := d.Params["rtt_ms"]; !rtt.Known() || rtt.Value < 29 || rtt.Value > 31 {
		t.Errorf("rtt %+v, want 30 ms", rtt)
	}
	for _, name := range []string{"rate_bps", "buffer_bytes"} {
		if p := d.Params[name]; p.Known() {
			t.Errorf("%s %+v from two segments", name, p)
		}
	}
	if len(f.Notes) == 0 {
		t.Error("nothing said about what could not be inferred")
	}
	var text bytes.Buffer
	if err := WriteText(&text, f); err != nil || !strings.Contains(text.String(), "not inferred:") {
		t.Errorf("text: %v\n%s", err, text.String())
	}
}

// fuzzHeapCap is the heap a fuzzed fit may take from the system: the
// inputs are at most a few kilobytes, so more is a cost that follows
// something other than the packets (a capture's time span once did).
const fuzzHeapCap = 512 << 20

// FuzzFile: whatever the bytes (pcap, pcapng, gzip'd), a fit ends with a
// result or an error, never a panic or a hang, and within fuzzHeapCap
// (the heap the runtime obtained, which it keeps at its high-water mark).
func FuzzFile(f *testing.F) {
	ms := time.Millisecond
	seed := writeCapture(f, []pkt{
		{dir: 0, syn: true, seq: 99},
		{dir: 1, syn: true, ack: true, seq: 4999, acknum: 100, at: 30 * ms},
		{dir: 0, ack: true, seq: 100, acknum: 5000, at: 31 * ms},
		{dir: 1, ack: true, seq: 5000, acknum: 100, payload: 1000, at: 32 * ms},
		{dir: 0, ack: true, seq: 100, acknum: 6000, at: 62 * ms},
	})
	b, _ := os.ReadFile(seed)
	f.Add(b)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(b)
	zw.Close()
	f.Add(gz.Bytes())
	f.Add(gz.Bytes()[:gz.Len()/2])
	f.Add(pcapngOf(f, seed))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "f.pcap")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := File(path, Options{})
		if err == nil && r == nil {
			t.Fatal("no result and no error")
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapSys > fuzzHeapCap {
			t.Fatalf("the heap reached %d MiB fitting %d bytes", ms.HeapSys>>20, len(data))
		}
	})
}

// pcapngOf rewrites the pcap at path as a pcapng of one interface.
func pcapngOf(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriterInterface(&buf, pcapgo.NgInterface{LinkType: r.LinkType(), SnapLength: 65535}, pcapgo.NgWriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			break
		}
		ci.InterfaceIndex = 0
		if err := w.WritePacket(ci, data); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	return buf.Bytes()
}

// TestAbsurdPathRefused: a capture whose clock jumped hours between each
// segment and its ACK would need a round trip of 3 h, which no TCP
// transfer crosses (its retransmission timeout tops out at 120 s): the
// fit refuses it in one line instead of printing such a path.
func TestAbsurdPathRefused(t *testing.T) {
	h := time.Hour
	var pkts []pkt
	pkts = append(pkts,
		pkt{dir: 0, syn: true, seq: 99, at: 0},
		pkt{dir: 1, syn: true, ack: true, seq: 4999, acknum: 100, at: 3 * h},
		pkt{dir: 0, ack: true, seq: 100, acknum: 5000, at: 3*h + time.Millisecond},
	)
	at := 3*h + 2*time.Millisecond
	for i := range uint32(20) {
		pkts = append(pkts, pkt{dir: 1, ack: true, seq: 5000 + 1000*i, acknum: 100, payload: 1000, at: at})
		at += 3 * h
		pkts = append(pkts, pkt{dir: 0, ack: true, seq: 100, acknum: 6000 + 1000*i, at: at})
		at += time.Millisecond
	}
	_, err := File(writeCapture(t, pkts), Options{})
	if !errors.Is(err, ErrImplausiblePath) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "round trip of 3h") {
		t.Fatalf("%v: want one line refusing a round trip of 3h", err)
	}
}
