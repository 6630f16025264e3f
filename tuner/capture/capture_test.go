package capture

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/wanlab/wanlab/tuner"
	"github.com/wanlab/wanlab/units"
)

// writeWindowLimited writes what a tap next to the receiver records of a
// download whose receiver never offers more than window bytes: seed 001's
// situation. Each round trip the server sends one window at the
// bottleneck rate, and the client ACKs every second segment at once.
func writeWindowLimited(t *testing.T, rtt time.Duration, window, rounds int) string {
	t.Helper()
	const mss, wscale, snaplen = 1460, 7, 96
	ser := time.Duration(float64(mss) / 125e6 * float64(time.Second)) // 1 Gbit/s bottleneck
	path := filepath.Join(t.TempDir(), "seed001.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(snaplen, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	client, server := net.IP{10, 0, 0, 2}, net.IP{10, 0, 0, 1}
	payload := make([]byte, mss)
	buf := gopacket.NewSerializeBuffer()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const cISN, sISN = 1000, 5000
	emit := func(at time.Duration, fromServer bool, tcp layers.TCP, n int) {
		ip := layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: client, DstIP: server}
		tcp.SrcPort, tcp.DstPort = 40000, 80
		if fromServer {
			ip.SrcIP, ip.DstIP = server, client
			tcp.SrcPort, tcp.DstPort = 80, 40000
		}
		tcp.SetNetworkLayerForChecksum(&ip)
		eth := layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			&eth, &ip, &tcp, gopacket.Payload(payload[:n])); err != nil {
			t.Fatal(err)
		}
		data := buf.Bytes()
		ci := gopacket.CaptureInfo{Timestamp: t0.Add(at), Length: len(data), CaptureLength: min(len(data), snaplen)}
		if err := w.WritePacket(ci, data[:ci.CaptureLength]); err != nil {
			t.Fatal(err)
		}
	}
	synOpts := []layers.TCPOption{
		{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{mss >> 8, mss & 0xff}},
		{OptionType: layers.TCPOptionKindSACKPermitted, OptionLength: 2},
		{OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{wscale}},
	}
	emit(0, false, layers.TCP{Seq: cISN, SYN: true, Window: 65535, Options: synOpts}, 0)
	emit(rtt, true, layers.TCP{Seq: sISN, Ack: cISN + 1, SYN: true, ACK: true, Window: 65535, Options: synOpts}, 0)
	emit(rtt+10*time.Microsecond, false, layers.TCP{Seq: cISN + 1, Ack: sISN + 1, ACK: true, Window: uint16(window >> wscale)}, 0)
	perRound := window / mss
	seq := uint32(sISN + 1)
	for r := 0; r < rounds; r++ {
		base := 2*rtt + time.Duration(r)*rtt
		for i := 0; i < perRound; i++ {
			at := base + time.Duration(i)*ser
			emit(at, true, layers.TCP{Seq: seq, Ack: cISN + 1, ACK: true, PSH: i == perRound-1, Window: 512}, mss)
			seq += mss
			if i%2 == 1 || i == perRound-1 {
				emit(at+5*time.Microsecond, false, layers.TCP{Seq: cISN + 1, Ack: seq, ACK: true, Window: uint16(window >> wscale)}, 0)
			}
		}
	}
	return path
}

func TestEvidenceFromWindowLimitedCapture(t *testing.T) {
	const rtt = 35 * time.Millisecond
	path := writeWindowLimited(t, rtt, 1536<<10, 30)
	ev, err := Evidence(path)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Limit != tuner.LimitReceiveWindow {
		t.Fatalf("limit = %q, want receive-window; evidence %+v", ev.Limit, ev)
	}
	if d := ev.RTT - rtt; d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("RTT = %v, want about %v", ev.RTT, rtt)
	}
	if ev.MaxWindow != 1536<<10 {
		t.Errorf("max window = %d, want %d", ev.MaxWindow, 1536<<10)
	}
	// window / RTT = 1.5 MiB / 35 ms = 44.9 MB/s.
	if mbps := ev.Throughput.BytesPerSecond() / 1e6; mbps < 40 || mbps > 47 {
		t.Errorf("throughput %.1f MB/s, want about 45", mbps)
	}
	if ev.MSS != 1460 || ev.Predicted <= ev.Throughput {
		t.Errorf("mss %d, predicted %v (throughput %v)", ev.MSS, ev.Predicted, ev.Throughput)
	}

	// Planned against seed 001's receiver, the evidence leads to a bigger
	// tcp_rmem, and the note explains the 1.5 MiB window.
	s, err := tuner.ReadSnapshot(tuner.ProcSys{Root: "../testdata/seed001-client"}, "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := tuner.MakePlan(s, tuner.ModelFor(s), tuner.PlanInput{RTT: ev.RTT, Rate: 800 * units.Mbit, Streams: 1, MSS: ev.MSS, Evidence: ev})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Changes) == 0 || p.Changes[0].Key != "net.ipv4.tcp_rmem" {
		t.Fatalf("changes = %+v, want tcp_rmem first", p.Changes)
	}
	notes := strings.Join(p.Notes, "\n")
	if !strings.Contains(notes, "receive-window limit") || !strings.Contains(notes, "1.5 MiB") {
		t.Errorf("notes do not explain the window limit:\n%s", notes)
	}
}

func TestNoTransfer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.pcap")
	f, _ := os.Create(path)
	pcapgo.NewWriter(f).WriteFileHeader(96, layers.LinkTypeEthernet)
	f.Close()
	if _, err := Evidence(path); err == nil || !strings.Contains(err.Error(), "no TCP data transfer") {
		t.Errorf("Evidence(empty) = %v", err)
	}
}

// TestWriteSeed001Capture leaves the synthetic capture where a README
// walk-through can use it:
// WANLAB_KEEP_CAPTURE=/tmp go test ./tuner/capture -run WriteSeed001
func TestWriteSeed001Capture(t *testing.T) {
	dir := os.Getenv("WANLAB_KEEP_CAPTURE")
	if dir == "" {
		t.Skip("set WANLAB_KEEP_CAPTURE=DIR to write seed001.pcap there")
	}
	b, err := os.ReadFile(writeWindowLimited(t, 35*time.Millisecond, 1536<<10, 30))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "seed001.pcap"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
