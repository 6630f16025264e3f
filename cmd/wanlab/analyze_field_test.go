package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAnalyzeUnsupportedLinkType: a capture of a link type the decoder
// does not know exits 2 with one line naming it and the list's place.
func TestAnalyzeUnsupportedLinkType(t *testing.T) {
	hdr := []byte{0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0}
	hdr = binary.LittleEndian.AppendUint32(hdr, 178) // JUNIPER_ETHER
	hdr = append(hdr, 1, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 1, 2, 3, 4)
	path := filepath.Join(t.TempDir(), "juniper.pcap")
	if err := os.WriteFile(path, hdr, 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := runWanlab(t, "analyze", path)
	if code != exitUsage || strings.Count(strings.TrimSpace(out), "\n") != 0 ||
		!strings.Contains(out, "link type JUNIPER_ETHER (178) is not one the analyzer decodes") || !strings.Contains(out, "docs/analyzer.md") {
		t.Errorf("exit %d: %q", code, out)
	}
	out, code = runWanlab(t, "analyze", "--decode-as", "udp.port=4790,vxlan-gpe", analyzeCapture)
	if code != exitUsage || !strings.Contains(out, "vxlan-gpe") {
		t.Errorf("a bad --decode-as: exit %d: %q", code, out)
	}
	out, code = runWanlab(t, "analyze", "--decode-as", "udp.port==9999,vxlan", analyzeCapture)
	if code != exitOK {
		t.Errorf("--decode-as udp.port==9999,vxlan: exit %d: %q", code, out)
	}
}
