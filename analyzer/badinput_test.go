package analyzer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
