package analyzer

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/wanlab/wanlab/analyzer/internal/synth"
)

// TestConnectionJSONMatchesEncodingJSON checks the connection encoder
// byte for byte against encoding/json on every committed capture, the
// synthetic scenarios and a capture of many short connections, and on
// strings that need escaping.
func TestConnectionJSONMatchesEncodingJSON(t *testing.T) {
	var conns []*Connection
	paths, _ := filepath.Glob(filepath.Join("testdata", "*.pcap"))
	for _, sc := range agreementScenarios {
		p, _ := writeSynth(t, sc.cfg)
		paths = append(paths, p)
	}
	for _, p := range paths {
		res, err := AnalyzeFile(p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, res.Connections...)
	}
	var buf bytes.Buffer
	if _, err := synth.WriteMany(&buf, synth.ManyConfig{Conns: 50, Concurrent: 5}); err != nil {
		t.Fatal(err)
	}
	res, err := AnalyzeReader(mustReader(t, buf.Bytes()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	conns = append(conns, res.Connections...)
	odd := *conns[0]
	odd.State = "<a & b> \"q\" \\ \n\t\x01 \u2028 é \xff"
	odd.Diagnosis = &Diagnosis{Evidence: []string{}, RateBps: 1e-7, PredictedBps: 1e22}
	odd.Directions[0] = nil
	conns = append(conns, &odd)
	for _, c := range conns {
		want, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendConnectionJSON(nil, c)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("connection %d:\n got %s\nwant %s", c.Index, got, want)
		}
	}
}

func BenchmarkConnectionJSON(b *testing.B) {
	var buf bytes.Buffer
	if _, err := synth.WriteMany(&buf, synth.ManyConfig{Conns: 20, Concurrent: 5}); err != nil {
		b.Fatal(err)
	}
	r, err := AnalyzeStream(&buf, "many", Options{})
	if err != nil {
		b.Fatal(err)
	}
	c := r.Connections[0]
	out, _ := appendConnectionJSON(nil, c)
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	var e jsonState // as a JSONWriter keeps it
	for b.Loop() {
		out, _ = e.appendConnection(out[:0], c)
	}
}
