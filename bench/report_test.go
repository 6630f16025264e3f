package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/tc/spec"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// sampleReport has one of every kind of row.
func sampleReport() *Report {
	r := &Report{Bench: "accuracy", Date: time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC), Kernel: "6.18.0",
		Quick: true, Command: "wanlab bench accuracy --quick", Duration: 30 * time.Second}
	p50 := measured("delay 10ms", PathProxyOffload, "delay p50", "µs", 10000, 10012.5)
	loss := measured("loss 1%", PathProxyWater, "loss", "%", 1, 0.8).withInterval(0.55, 1.15)
	rate := measured("tbf rate 10mbit burst 4096b limit 29096b", PathKernel, "rate", "Mbit/s", 10, 9.9)
	rows := []Measurement{
		p50.withTarget("|err| ≤ 20µs", true),
		measured("delay 10ms", PathProxyOffload, "delay p99", "µs", 10000, 10250).withTarget("|err| ≤ 100µs", false),
		notAvailable("delay 10ms", PathKernel, "n/a: kernel has no netem"),
	}
	r.Tables = []Table{
		{Name: "delay", Title: "Delay", Model: "model", Rows: rows},
		{Name: "loss", Title: "Loss", Model: "stationary", Rows: []Measurement{loss.withTarget("in 99.9 % CI", true)}},
		{Name: "rate", Title: "Rate", Model: "tbf rate", Rows: []Measurement{rate}},
		{Name: "sweep", Title: "Sweep", Model: "Mathis", XLabel: "loss (%)", Rows: []Measurement{
			{Label: "loss 0%", Path: PathProxyOffload, Metric: "throughput", Unit: "Mbit/s", X: 0, Realized: 900},
			func() Measurement {
				m := measured("loss 1%", PathProxyOffload, "throughput", "Mbit/s", 70, 80)
				m.X = 1
				return m
			}(),
		}},
	}
	r.Notes = []string{"a note"}
	return r
}

func TestWriteTextGolden(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().WriteText(&b); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "report.txt")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("text output differs from %s (run go test -update):\n%s", golden, b.String())
	}
}

func TestJSONRoundTrip(t *testing.T) {
	var b bytes.Buffer
	r := sampleReport()
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Tables) != len(r.Tables) || back.Tables[0].Rows[0].Realized != 10012.5 || *back.Tables[0].Rows[1].Pass {
		t.Errorf("JSON lost data: %s", b.String())
	}
	for _, field := range []string{`"bench"`, `"configured"`, `"realized"`, `"error"`, `"has_interval"`, `"na"`} {
		if !strings.Contains(b.String(), field) {
			t.Errorf("JSON without %s", field)
		}
	}
}

func TestHTMLHasPlots(t *testing.T) {
	var b bytes.Buffer
	if err := sampleReport().WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	h := b.String()
	// One plot per metric that has a figure: delay p50, delay p99, loss,
	// rate, throughput (the n/a row draws nothing).
	if n := strings.Count(h, "<svg"); n != 5 {
		t.Errorf("%d inline SVG plots, want 5", n)
	}
	for _, want := range []string{"<!DOCTYPE html>", "n/a: kernel has no netem", "class=\"miss\"", "</html>"} {
		if !strings.Contains(h, want) {
			t.Errorf("HTML without %q", want)
		}
	}
	if strings.Contains(h, "<?xml") || strings.Contains(h, "http://") && strings.Contains(h, "<script src") {
		t.Error("HTML not self-contained")
	}
}

func TestFiniteCatchesNaN(t *testing.T) {
	r := sampleReport()
	if err := r.Finite(); err != nil {
		t.Fatal(err)
	}
	r.Tables[1].Rows[0].High = math.NaN()
	if err := r.Finite(); err == nil || !strings.Contains(err.Error(), "loss 1%") {
		t.Errorf("Finite() = %v, want an error naming the row", err)
	}
}

func TestReadSpecs(t *testing.T) {
	got, err := ReadSpecs(strings.NewReader("# grid\n\ndelay 10ms\nnone\ntbf rate 1mbit burst 4kb limit 16kb\n"), "f.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != "delay 10ms" || got[1] != "" {
		t.Errorf("got %q", got)
	}
	_, err = ReadSpecs(strings.NewReader("delay 10ms\ndelay 10xs\n"), "f.txt")
	var pe *spec.ParseError
	if err == nil || !strings.HasPrefix(err.Error(), "f.txt:2: ") || !errors.As(err, &pe) {
		t.Errorf("bad spec: error %v, want one naming f.txt:2 and wrapping the parser's", err)
	}
	if _, err := ReadSpecs(strings.NewReader("# nothing\n"), "e.txt"); err == nil {
		t.Error("a file without specs was accepted")
	}
}

func FuzzReadSpecs(f *testing.F) {
	for _, s := range append(QuickAccuracyGrid(), "# c\nnone\n", "delay 1ms\n\nloss 1%", "tbf rate") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		specs, err := ReadSpecs(strings.NewReader(text), "fuzz")
		if err != nil {
			return
		}
		for _, s := range specs {
			if _, err := spec.Parse(s); err != nil {
				t.Fatalf("ReadSpecs returned %q, which does not parse: %v", s, err)
			}
			if _, err := newCase(s, true); err != nil {
				t.Fatalf("newCase(%q): %v", s, err)
			}
		}
	})
}

func TestGridsParse(t *testing.T) {
	for _, g := range [][]string{AccuracyGrid(), QuickAccuracyGrid()} {
		for _, s := range g {
			c, err := newCase(s, false)
			if err != nil {
				t.Fatalf("%q: %v", s, err)
			}
			if c.probe.Count <= 0 || c.probe.PPS <= 0 {
				t.Errorf("%q: no probes planned: %+v", s, c.probe)
			}
		}
	}
	if n := len(AccuracyGrid()); n != 33 {
		t.Errorf("full grid has %d specs, want 33 (none, 15 delays, 4 losses, 8 rates, 3 combinations, 2 managed queues)", n)
	}
}
