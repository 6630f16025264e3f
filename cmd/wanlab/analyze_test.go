package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const analyzeCapture = "../../analyzer/testdata/rwnd.pcap"

func TestAnalyzeFormats(t *testing.T) {
	out, code := runWanlab(t, "analyze", analyzeCapture)
	if code != exitOK || !strings.Contains(out, "diagnosis server->client: receive-window") || !strings.Contains(out, "net.ipv4.tcp_rmem") {
		t.Errorf("text (exit %d):\n%s", code, out)
	}
	out, code = runWanlab(t, "analyze", "--format", "json", analyzeCapture)
	if code != exitOK {
		t.Fatalf("json exit %d: %s", code, out)
	}
	var doc struct {
		Connections []struct {
			Client, Server string
			Directions     []map[string]any
			Diagnosis      struct {
				Limit    string
				Evidence []string
				Advice   []string
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	if len(doc.Connections) != 1 || doc.Connections[0].Diagnosis.Limit != "receive-window" || len(doc.Connections[0].Directions) != 2 {
		t.Fatalf("json document %+v", doc)
	}
	for _, k := range []string{"packets", "data_bytes", "unique_bytes", "retransmitted_packets", "retransmitted_bytes",
		"out_of_order_packets", "dup_acks", "zero_windows", "rtt_samples", "rtt_min_ms", "rtt_avg_ms", "rtt_max_ms",
		"max_window_bytes", "max_in_flight_bytes", "throughput_bps"} {
		if _, ok := doc.Connections[0].Directions[1][k]; !ok {
			t.Errorf("json direction lacks contract field %q", k)
		}
	}
	out, code = runWanlab(t, "analyze", "--format", "csv", "--flow", ":80", analyzeCapture)
	if code != exitOK || !strings.HasPrefix(out, "connection,direction,series,unit,t_s") || !strings.Contains(out, ",server->client,throughput,") {
		t.Errorf("csv (exit %d): %.300s", code, out)
	}
}

// TestAnalyzeTextWithoutTempDir checks that the text output, spooled
// through a temporary file, comes out the same when there is no writable
// temporary directory (written from memory then), and leaves no file.
func TestAnalyzeTextWithoutTempDir(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	want, code := runWanlab(t, "analyze", analyzeCapture)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, want)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the spool left %v in TMPDIR", left)
	}
	t.Setenv("TMPDIR", filepath.Join(tmp, "missing"))
	got, code := runWanlab(t, "analyze", analyzeCapture)
	if code != exitOK || got != want {
		t.Errorf("without a temporary directory (exit %d):\n%s\nwant:\n%s", code, got, want)
	}
}

func TestAnalyzeBadInput(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pcap")
	os.WriteFile(empty, nil, 0o644)
	garbage := filepath.Join(dir, "garbage.pcap")
	os.WriteFile(garbage, []byte("this is not a capture at all"), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"analyze"}, exitUsage, "exactly one"},
		{[]string{"analyze", "--format", "xml", analyzeCapture}, exitUsage, `"xml"`},
		{[]string{"analyze", "--flow", "10.0.0.300", analyzeCapture}, exitUsage, "10.0.0.300"},
		{[]string{"analyze", "--flow", "9", analyzeCapture}, exitUsage, "matches none"},
		{[]string{"analyze", filepath.Join(dir, "missing.pcap")}, exitUsage, "missing.pcap"},
		{[]string{"analyze", empty}, exitUsage, "empty file"},
		{[]string{"analyze", garbage}, exitUsage, "not a pcap"},
	} {
		out, code := runWanlab(t, c.args...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, output %q; want exit %d mentioning %q", c.args, code, out, c.code, c.want)
		}
	}
}
