package experiment

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/tc/engine"
)

// TestFitGridTruthFromTheSpec: without the proxy's counters (the kernel's
// qdiscs) a point's truth is its spec's long-run shares: a Gilbert
// channel's p / (p + r), netem's correlated reorder share, each with the
// variance its correlation adds over a binomial's.
func TestFitGridTruthFromTheSpec(t *testing.T) {
	if l, v := specLoss("2%"); l != 0.02 || v != 1 {
		t.Errorf("loss 2%%: %v, variance x%v", l, v)
	}
	l, v := specLoss("gemodel 1% 25%")
	if math.Abs(l-0.01/0.26) > 1e-9 || math.Abs(v-(1.74/0.26)) > 1e-9 {
		t.Errorf("gemodel 1%% 25%%: %v, variance x%v", l, v)
	}
	r, v := specReorder("1% 25%")
	if r != engine.ReorderedShare(0.01, 0.25, 1) || r <= 0 || math.Abs(v-1.25/0.75) > 1e-9 {
		t.Errorf("reorder 1%% 25%%: %v, variance x%v", r, v)
	}
	if r, _ := specReorder(""); r != 0 {
		t.Errorf("no reorder: %v", r)
	}
}

// TestFitGridHasReordering: every round trip of the grid, and the quick
// grid, has a reordering point, netem's reorder with its delay; the
// table shows the reordering where it was claimed and tallies it, and
// says where the truth came from.
func TestFitGridHasReordering(t *testing.T) {
	for _, quick := range []bool{false, true} {
		n := 0
		for _, p := range FitGrid(quick) {
			if p.Reorder != "" {
				n++
				if !strings.Contains(p.Spec(), "delay ") || !strings.Contains(p.Spec(), " reorder "+p.Reorder) {
					t.Errorf("%s: spec %q", p.Name, p.Spec())
				}
			}
		}
		if want := map[bool]int{false: 3, true: 1}[quick]; n != want {
			t.Errorf("quick %v: %d reordering points, want %d", quick, n, want)
		}
	}
	p := FitGrid(true)[0]
	rows := []FitRow{
		{Point: p, Side: SideClient, RTTOK: true, ReorderClaimed: true, TrueReorder: 0.01, Reorder: 0.011, ReorderSD: 0.8, ReorderOK: true, TruthFrom: TruthSpec},
		{Point: p, Side: SideServer, RTTOK: true, Unknown: []string{"reorder"}, TruthFrom: TruthSpec},
	}
	var b strings.Builder
	if err := WriteFitGrid(&b, rows); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"reorder (true, fit, sd)", "1% 1.1% +0.8sd", "reorder within 2 sd:  1 of 1 claimed", "the spec's long-run shares"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// TestFitGridBucketQueued: the share of a token bucket's packets that
// waited over a millisecond comes from its stage's sojourn histogram
// (the netem stage's delay is no queue), -1 without a bucket; the table
// counts a row naming neither a limit nor a rate as not claimed.
func TestFitGridBucketQueued(t *testing.T) {
	var h engine.Histogram
	h.Counts[0] = 60 // up to 10 µs: tokens were there
	h.Counts[7] = 25 // 1-2.5 ms
	h.Counts[9] = 15 // 5-10 ms
	var line engine.Histogram
	line.Counts[9] = 100 // the delay line's 5 ms
	classes := []engine.ClassSnapshot{{Stages: []engine.StageSnapshot{
		{Kind: "netem", Counters: engine.Counters{Sojourn: line}},
		{Kind: "tbf", Counters: engine.Counters{Sojourn: h}},
	}}}
	if q := bucketQueued(classes); math.Abs(q-0.4) > 1e-9 {
		t.Errorf("bucket queued %v, want 0.4", q)
	}
	if q := bucketQueued(classes[:0]); q != -1 {
		t.Errorf("no bucket: %v, want -1", q)
	}
	p := FitGrid(true)[0]
	rows := []FitRow{
		{Point: p, Side: SideServer, RTTOK: true, LimitOK: false, LimitClaimed: false, BottleneckReached: true, Unknown: []string{"rate", "buffer"}},
		{Point: p, Side: SideClient, RTTOK: true, RateOK: true, LimitOK: true, LimitClaimed: true, BottleneckReached: true},
	}
	var b strings.Builder
	if err := WriteFitGrid(&b, rows); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "limit:                1 of 1 claimed") {
		t.Errorf("table:\n%s", b.String())
	}
}

// TestRefitFitGrid: a kept run refits from its own directory, wherever it
// moved (result.json's capture paths are where the run wrote them), one
// row per side; a point whose run is gone is a row naming its file, and
// a directory without rows.json is an error naming it.
func TestRefitFitGrid(t *testing.T) {
	dir := t.TempDir()
	pts := FitGrid(true)[:2]
	kept := []FitRow{{Point: pts[0], Side: SideServer}, {Point: pts[0], Side: SideClient}, {Point: pts[1], Err: "lab failed"}}
	b, _ := json.Marshal(kept)
	if err := os.WriteFile(filepath.Join(dir, "rows.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "01")
	capture, err := os.ReadFile("../analyzer/testdata/loss.pcap")
	if err != nil {
		t.Fatal(err)
	}
	os.Mkdir(run, 0o755)
	res := Result{Captures: map[string]*CaptureResult{}}
	for _, side := range []string{SideServer, SideClient} {
		os.WriteFile(filepath.Join(run, side+".pcap"), capture, 0o644)
		res.Captures[side] = &CaptureResult{Path: "/where/it/ran/01/" + side + ".pcap"}
	}
	b, _ = json.Marshal(res)
	os.WriteFile(filepath.Join(run, "result.json"), b, 0o644)
	rows, err := RefitFitGrid([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3: %+v", len(rows), rows)
	}
	for _, r := range rows[:2] {
		if r.Err != "" || r.Point.Name != pts[0].Name || r.Spec == "" {
			t.Errorf("%s %s: err %q, spec %q", r.Point.Name, r.Side, r.Err, r.Spec)
		}
	}
	if rows[2].Point.Name != pts[1].Name || !strings.Contains(rows[2].Err, filepath.Join(dir, "02", "result.json")) {
		t.Errorf("the missing run: %+v", rows[2])
	}
	if _, err := RefitFitGrid([]string{t.TempDir()}); err == nil || !strings.Contains(err.Error(), "rows.json") {
		t.Errorf("no rows.json: %v", err)
	}
}
