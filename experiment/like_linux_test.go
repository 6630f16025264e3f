package experiment

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/fit"
	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// TestLikeReproducesAShapedDownload: a download through a token bucket is
// captured, fitted and reproduced in a new lab; the reproduction runs at
// the original's rate (within 10 %: a bottleneck's rate holds on a loaded
// host) with the same diagnosis, the fit of the reproduction gives the
// spec it was given back, and --try of a larger receive buffer reports
// before, after and a prediction. The report and the JSON are written.
func TestLikeReproducesAShapedDownload(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	orig := Config{Name: "original", Impair: map[string]string{ToClient: "delay 10ms | tbf rate 20mbit burst 32kb limit 100kb", ToServer: "delay 10ms"},
		Size: 6 * units.MiB, Seed: 1, Out: filepath.Join(dir, "original")}
	orig.Client.CC, orig.Server.CC = "cubic", "cubic"
	res, err := Run(context.Background(), orig)
	if err != nil {
		t.Fatal(err)
	}
	capture := res.Captures[SideServer].Path
	lr, err := Like(context.Background(), capture, Config{Out: filepath.Join(dir, "like"), Seed: 2}, fit.Options{},
		LikeOptions{Tries: []string{"net.ipv4.tcp_rmem=4096 131072 8388608"}})
	if err != nil {
		t.Fatal(err)
	}
	if lr.Side != SideServer || lr.Run == nil || lr.Refit == nil {
		t.Fatalf("like: side %q, run %v, refit %v", lr.Side, lr.Run != nil, lr.Refit != nil)
	}
	sim := map[string]Similarity{}
	for _, s := range lr.Similarity {
		sim[s.Measure] = s
	}
	if s := sim["rate_bps"]; !s.Within {
		t.Errorf("rate: %+v", s)
	}
	if s := sim["diagnosis"]; !s.Within {
		// Both captures' own evidence, and how the reproduction's sender
		// left slow start, say which of the two runs differed and why.
		t.Errorf("diagnosis: %+v\noriginal: %s\nreproduction: %s", s, evidence(res), evidence(lr.Run))
	}
	for _, m := range []string{"rtt_p50_ms", "retransmission_rate", "window_max_bytes", "rate_over_time"} {
		if _, ok := sim[m]; !ok {
			t.Errorf("no %s in the comparison", m)
		}
	}
	// The reproduction's own fit finds the rate it was given, the
	// original's fit (20.2-20.4 Mbit/s for this 20 Mbit/s bucket in ten
	// loaded runs), not the original's 20: its interval holds it, and its
	// median is within 10 %. The median of ACK clocking moves in steps of one packet per
	// interval (1.2 Mbit/s here, 6 %), and a loaded host's ACK timing
	// can move it one step (a CI run beside other packages' tests
	// measured 21.4 Mbit/s, [19.0, 21.6]); the 5 % target is the idle fit
	// grid's, `wanlab bench fit`.
	var rate fit.Param
	for _, d := range lr.Refit.Directions {
		if d.Data {
			rate = d.Params["rate_bps"]
		}
	}
	given := givenRate(t, lr.Run.Config)
	if g := float64(given); !rate.Known() || rate.Low > g || rate.High < g || math.Abs(rate.Value/g-1) > 0.10 {
		t.Errorf("the reproduction's fit: rate %+v, want an interval holding the %v it was given and a value within 10 %%", rate, given)
	}
	if len(lr.Tries) != 1 || lr.Tries[0].Change["client"]["net.ipv4.tcp_rmem"] == "" || lr.Tries[0].AfterBps <= 0 {
		t.Fatalf("tries: %+v", lr.Tries)
	}
	// A larger buffer does not lift a bottleneck: the model says so.
	if tr := lr.Tries[0]; tr.PredictedBps <= 0 || math.Abs(tr.PredictedBps/tr.AfterBps-1) > 0.15 || !strings.Contains(tr.Prediction, "bottleneck") {
		t.Errorf("try: before %.3g after %.3g predicted %.3g (%s)", tr.BeforeBps, tr.AfterBps, tr.PredictedBps, tr.Prediction)
	}
	for _, f := range []string{lr.Report, lr.JSON} {
		if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	assertTornDown(t, lr.Run.LabID)
}

// evidence is the diagnosis of a download's server capture and how its
// sender left slow start.
func evidence(res *Result) string {
	var b strings.Builder
	if cr := res.Captures[SideServer]; cr != nil && cr.Diagnosis != nil {
		fmt.Fprintf(&b, "%s: %q", cr.Diagnosis.Limit, cr.Diagnosis.Evidence)
	}
	if d := res.Download; d != nil && d.Server != nil {
		fmt.Fprintf(&b, " (the sender: ssthresh %d, cwnd %d segments, %d sent again)", d.Server.SndSsthresh, d.Server.SndCwnd, d.Server.TotalRetrans)
	}
	return b.String()
}

// givenRate is the token bucket's rate on the way to the client of the
// lab cfg describes.
func givenRate(t *testing.T, cfg Config) units.Rate {
	t.Helper()
	specs, err := cfg.Specs()
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range specs[ToClient].Stages {
		if tbf, ok := st.(*spec.TBF); ok {
			return tbf.Rate
		}
	}
	t.Fatalf("no token bucket in the reproduction's %q", cfg.Impair[ToClient])
	return 0
}

// TestLikeReproducesRequestResponse: seed 003's load (requests over a few
// keep-alive connections, the answer's second write held by Nagle until
// the client's delayed ACK) is fitted as request/response and reproduced
// with the same requests, connections and diagnosis, and a latency near
// the original's (the delayed-ACK timer sets it: 25 % here, the report's
// own tolerance is 10 %). It runs the reproduction three times (--runs 3).
func TestLikeReproducesRequestResponse(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	orig := reduced(t, "seed003")
	orig.Out = filepath.Join(dir, "original")
	res, err := Run(context.Background(), orig)
	if err != nil {
		t.Fatal(err)
	}
	lr, err := Like(context.Background(), res.Captures[SideClient].Path, Config{Out: filepath.Join(dir, "like")}, fit.Options{}, LikeOptions{Runs: 3})
	if err != nil {
		t.Fatal(err)
	}
	// Three runs, each compared, the verdict the majority's, and the one
	// beside the original among them. (The latency below is the shown
	// run's: of the majority, so a run the loaded host slowed does not
	// decide it alone.)
	outs := map[string]bool{}
	for _, r := range lr.Runs {
		outs[r.Out] = true
	}
	for _, r := range lr.Runs {
		for _, s := range r.Similarity {
			if strings.HasPrefix(s.Measure, "latency") {
				t.Logf("%s: %s %.1f against %.1f ms (within %v)", filepath.Base(r.Out), s.Measure, s.Reproduced, s.Original, s.Within)
			}
		}
	}
	if len(lr.Runs) != 3 || len(outs) != 3 || !outs[lr.Run.Out] || lr.Reproduced != (lr.ReproducedRuns >= 2) {
		t.Fatalf("runs %+v (%d reproduced, verdict %v), shown %s", lr.Runs, lr.ReproducedRuns, lr.Reproduced, lr.Run.Out)
	}
	if html, err := os.ReadFile(lr.Report); err != nil || !strings.Contains(string(html), fmt.Sprintf("runs (reproduced in %d of 3", lr.ReproducedRuns)) {
		t.Errorf("the report %s has no table of the runs (%v)", lr.Report, err)
	}
	rr := lr.Fit.RequestResponse
	if rr == nil || rr.Requests != orig.Requests || rr.Connections != orig.Concurrency {
		t.Fatalf("fit: %+v, want %d requests over %d connections", rr, orig.Requests, orig.Concurrency)
	}
	if lr.Run.RR == nil || lr.Run.RR.Requests != orig.Requests {
		t.Fatalf("the reproduction ran %+v", lr.Run.RR)
	}
	sim := map[string]Similarity{}
	for _, s := range lr.Similarity {
		sim[s.Measure] = s
	}
	if s := sim["diagnosis"]; !s.Within || s.OriginalText != "delayed-ack" {
		t.Errorf("diagnosis: %+v, want delayed-ack both", s)
	}
	if s := sim["latency_p50_ms"]; math.Abs(s.Figure-1) > 0.25 {
		t.Errorf("latency: %+v", s)
	}
	assertTornDown(t, lr.Run.LabID)
}
