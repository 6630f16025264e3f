package experiment

import (
	"strings"
	"testing"
)

// TestFitGridHalves: the committed held-out list names points of the
// grid only, about half of them, in both the single-factor and the
// combined points; the quick grid is all tuning.
func TestFitGridHalves(t *testing.T) {
	names := map[string]bool{}
	held, combined, combinedHeld := 0, 0, 0
	grid := FitGrid(false)
	for _, p := range grid {
		names[p.Name] = true
		if p.Half() == HalfHeldOut {
			held++
		}
	}
	for _, p := range combinedPoints() {
		if !names[p.Name] {
			t.Errorf("combined point %q is not in the full grid", p.Name)
		}
		combined++
		if p.Half() == HalfHeldOut {
			combinedHeld++
		}
	}
	for n := range heldOut {
		if !names[n] {
			t.Errorf("held-out list names %q, not a grid point", n)
		}
	}
	if share := float64(held) / float64(len(grid)); share < 0.45 || share > 0.55 {
		t.Errorf("%d of %d points held out", held, len(grid))
	}
	if combinedHeld == 0 || combinedHeld == combined {
		t.Errorf("%d of %d combined points held out: want both halves", combinedHeld, combined)
	}
	for _, p := range FitGrid(true) {
		if p.Half() != HalfTuning {
			t.Errorf("quick point %q in the held-out half", p.Name)
		}
	}
}

// TestCombinedPointsSpecs: a combined point's spec holds each factor
// once, netem's limit at most once (and out of the way with a bucket or
// a jitter), and the sysctls turn timestamps off where
// the point says so.
func TestCombinedPointsSpecs(t *testing.T) {
	for _, p := range combinedPoints() {
		s := p.Spec()
		netem := strings.Split(s, "|")[0]
		if n := strings.Count(netem, " limit "); n > 1 || (p.Rate > 0 || p.Jitter > 0) && !strings.Contains(netem, " limit 100000") {
			t.Errorf("%s: netem's limit not once in %q", p.Name, s)
		}
		if p.Rate > 0 && !strings.Contains(s, "| tbf rate "+p.Rate.String()) {
			t.Errorf("%s: no bucket in %q", p.Name, s)
		}
		if p.Loss != "" && !strings.Contains(netem, " loss "+p.Loss) {
			t.Errorf("%s: no loss in %q", p.Name, s)
		}
		if p.Jitter > 0 && !strings.HasPrefix(s, "delay 25ms 5ms") {
			t.Errorf("%s: no jitter in %q", p.Name, s)
		}
		if ts := p.sysctls()["net.ipv4.tcp_timestamps"]; (ts == "0") != p.NoTimestamps {
			t.Errorf("%s: tcp_timestamps %q, no timestamps %v", p.Name, ts, p.NoTimestamps)
		}
	}
}

// TestWriteHalves: each half reports precision over the claims,
// coverage over the points that have the parameter, and calibration over
// the claimed intervals.
func TestWriteHalves(t *testing.T) {
	var tuning, held FitPoint
	for _, p := range FitGrid(false) {
		if p.Rate > 0 && p.Half() == HalfTuning && tuning.Name == "" {
			tuning = p
		}
		if p.Rate > 0 && p.Half() == HalfHeldOut && held.Name == "" {
			held = p
		}
	}
	rows := []FitRow{
		{Point: tuning, Side: SideServer, RTTOK: true, RateOK: true, BufferOK: true, InInterval: map[string]bool{"rtt": true, "rate": false, "buffer": true}},
		{Point: tuning, Side: SideClient, RTTOK: false, Unknown: []string{"rate", "buffer"}, InInterval: map[string]bool{"rtt": false}},
		{Point: held, Side: SideServer, RTTOK: true, RateOK: true, BufferOK: true, InInterval: map[string]bool{"rtt": true, "rate": true, "buffer": true}},
		{Point: held, Side: SideClient, Err: "run failed"},
		{Point: held, Side: SideClient, Unknown: []string{"rtt", "rate", "buffer"}, LossClaimed: true, LossOK: true, InInterval: map[string]bool{"loss": true}},
	}
	var b strings.Builder
	writeHalves(&b, rows)
	out := b.String()
	for _, want := range []string{
		"tuning half, 2 captures",
		"  rtt     precision 1 of 2 (50%)  coverage 2 of 2 (100%)  calibration 1 of 2 (50%)",
		"  rate    precision 1 of 1 (100%)  coverage 1 of 2 (50%)  calibration 0 of 1 (0%)",
		"held-out half, 2 captures",
		"  rate    precision 1 of 1 (100%)  coverage 1 of 2 (50%)  calibration 1 of 1 (100%)",
		"  loss    precision 1 of 1 (100%)  coverage -  calibration 1 of 1 (100%)",
		"  loss    precision -  coverage -  calibration -",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}
