package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAnalyzePlotsAndReport(t *testing.T) {
	dir := t.TempDir()
	plots := filepath.Join(dir, "graphs")
	html := filepath.Join(dir, "report.html")
	out, code := runWanlab(t, "analyze", "--plots", plots, "--report", html, analyzeCapture)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if !strings.Contains(out, "diagnosis server->client") || !strings.Contains(out, "wrote 10 graph files to "+plots) ||
		!strings.Contains(out, "wrote report "+html) {
		t.Errorf("output:\n%s", out)
	}
	// rwnd.pcap: the server sends, the client only ACKs.
	for _, g := range []string{"tcptrace", "stevens", "rtt", "window", "throughput"} {
		for _, ext := range []string{"svg", "png"} {
			if fi, err := os.Stat(filepath.Join(plots, "1-s2c-"+g+"."+ext)); err != nil || fi.Size() == 0 {
				t.Errorf("1-s2c-%s.%s: %v", g, ext, err)
			}
		}
	}
	b, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<title>wanlab analyze rwnd.pcap</title>", `id="s1-c1-s2c-tcptrace"`, "receive-window limited"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report lacks %q", want)
		}
	}

	out, code = runWanlab(t, "analyze", "--report", filepath.Join(dir, "missing", "r.html"), analyzeCapture)
	if code != exitFailure || !strings.Contains(out, filepath.Join(dir, "missing", "r.html")) {
		t.Errorf("report in a missing directory: exit %d:\n%s", code, out)
	}
}
