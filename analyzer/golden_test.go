package analyzer

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer/internal/synth"
)

var update = flag.Bool("update", false, "rewrite testdata captures and golden files")

// goldenCaptures are small synthetic captures committed under testdata;
// -update regenerates them (deterministically) with their golden text.
var goldenCaptures = []struct {
	name string
	cfg  synth.Config
}{
	{"loss", synth.Config{Bytes: 512 << 10, Drop: map[int]bool{40: true, 200: true}, Reno: true}},
	{"rwnd", synth.Config{Bytes: 2 << 20, Window: 64 << 10, OneWay: 10 * time.Millisecond, NoTimestamps: true}},
	{"delack", synth.Config{Bytes: 3 * 1448, DelayedAck: true, OneWay: time.Millisecond}},
	{"zerowindow", synth.Config{Bytes: 128 << 10, Window: 32 << 10, ReadRate: 2e5, Backwards: true}},
}

func TestGoldenText(t *testing.T) {
	for _, g := range goldenCaptures {
		t.Run(g.name, func(t *testing.T) {
			pcap := filepath.Join("testdata", g.name+".pcap")
			if *update {
				var buf bytes.Buffer
				if _, err := synth.Write(&buf, g.cfg); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(pcap, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			res, err := AnalyzeFile(pcap, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := WriteText(&out, res, res.Connections); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", g.name+".golden")
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./analyzer -run TestGoldenText -update)", err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Errorf("text output differs from %s (go test ./analyzer -run TestGoldenText -update to accept):\n%s", golden, out.String())
			}
		})
	}
}
