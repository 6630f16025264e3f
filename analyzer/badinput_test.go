package analyzer

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/wanlab/wanlab/analyzer/pcapfile"
)

func TestBadInput(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("testdata", "loss.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A file cut mid-record: the packets before the cut are analyzed and a
	// warning names the problem.
	res, err := AnalyzeFile(write("cut.pcap", good[:len(good)/2+7]), Options{})
	if err != nil {
		t.Fatalf("truncated file: %v", err)
	}
	if len(res.Warnings) == 0 || !strings.Contains(res.Warnings[0], "middle of a packet record") || res.TCPPackets == 0 {
		t.Errorf("truncated file: warnings %q, %d packets", res.Warnings, res.TCPPackets)
	}
	for name, b := range map[string][]byte{"empty": nil, "garbage": []byte("\x7fELF\x02\x01\x01 not a capture")} {
		if _, err := AnalyzeFile(write(name, b), Options{}); !errors.Is(err, pcapfile.ErrFormat) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Corrupt headers inside good records are counted, not fatal: flip
	// the IP version of every data frame.
	bad := append([]byte(nil), good...)
	n := 0
	for off := 24; off+16 <= len(bad); {
		capLen := int(uint32(bad[off+8]) | uint32(bad[off+9])<<8 | uint32(bad[off+10])<<16 | uint32(bad[off+11])<<24)
		frame := bad[off+16 : off+16+capLen]
		if len(frame) > 14 && n%3 == 0 {
			frame[14] = 0x75 // IP version 7
		}
		n++
		off += 16 + capLen
	}
	res, err = AnalyzeFile(write("corrupt.pcap", bad), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Corrupt != (n+2)/3 || res.Corrupt+res.TCPPackets != res.Frames {
		t.Errorf("corrupt %d of %d frames (want %d), tcp %d", res.Corrupt, res.Frames, (n+2)/3, res.TCPPackets)
	}
	if len(res.Warnings) == 0 {
		t.Error("no warning for corrupt frames")
	}
}

func TestPcapngUnknownInterfaceLinkType(t *testing.T) {
	// Frames of an interface with a link type we do not decode are
	// counted and reported; the other interface is analyzed.
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriterInterface(&buf, pcapgo.NgInterface{Name: "usb0", LinkType: layers.LinkTypeLinuxUSB, SnapLength: 96}, pcapgo.DefaultNgWriterOptions)
	if err != nil {
		t.Fatal(err)
	}
	eth, err := w.AddInterface(pcapgo.NgInterface{Name: "eth0", LinkType: layers.LinkTypeEthernet, SnapLength: 96})
	if err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(filepath.Join("testdata", "delack.pcap"))
	r, err := pcapfile.NewReader(bytes.NewReader(good), "delack")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		f, err := r.Next()
		if err != nil {
			break
		}
		w.WritePacket(gopacket.CaptureInfo{Timestamp: f.Timestamp, CaptureLength: len(f.Data), Length: f.WireLen, InterfaceIndex: eth}, f.Data)
		w.WritePacket(gopacket.CaptureInfo{Timestamp: f.Timestamp, CaptureLength: 4, Length: 4, InterfaceIndex: 0}, []byte{1, 2, 3, 4})
		n++
	}
	w.Flush()
	res, err := AnalyzeStream(&buf, "mixed.pcapng", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.UnknownLink != n || res.TCPPackets != n || len(res.Connections) != 1 || len(res.Warnings) == 0 {
		t.Errorf("unknown-link frames %d, TCP %d (want %d each), %d connections, warnings %q", res.UnknownLink, res.TCPPackets, n, len(res.Connections), res.Warnings)
	}
	want := []SkippedInterface{{Interface: 0, LinkType: int(layers.LinkTypeLinuxUSB), Name: "link type USB_LINUX_MMAPPED (220)", Frames: n}}
	if fmt.Sprint(res.SkippedInterfaces) != fmt.Sprint(want) || !strings.Contains(strings.Join(res.Warnings, "\n"), "interface 0: link type USB_LINUX_MMAPPED (220) is not one the analyzer decodes") {
		t.Errorf("skipped interfaces %+v, warnings %q; want %+v", res.SkippedInterfaces, res.Warnings, want)
	}
}
