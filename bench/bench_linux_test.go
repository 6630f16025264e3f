package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/internal/testenv"
)

// checkReport asserts a quick run is complete: every table has rows,
// every figure is finite, and the three outputs render.
func checkReport(t *testing.T, r *Report, tables ...string) {
	t.Helper()
	if err := r.Finite(); err != nil {
		t.Fatal(err)
	}
	have := map[string]int{}
	for _, tb := range r.Tables {
		have[tb.Name] = len(tb.Rows)
	}
	for _, name := range tables {
		if have[name] == 0 {
			t.Errorf("table %q missing or empty (have %v)", name, have)
		}
	}
	var txt, js, html bytes.Buffer
	if err := r.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), "<svg") || !strings.HasSuffix(strings.TrimSpace(html.String()), "</html>") {
		t.Error("HTML page without inline SVG plots")
	}
	t.Logf("%s took %v\n%s", r.Bench, r.Duration, txt.String())
}

func TestQuickAccuracy(t *testing.T) {
	testenv.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Accuracy(ctx, Config{Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, r, "delay", "loss", "rate")
	paths := map[string]bool{}
	var na int
	for _, tb := range r.Tables {
		for _, m := range tb.Rows {
			paths[m.Path] = true
			if m.NA != "" {
				na++
			}
		}
	}
	for _, p := range []string{PathProxyOffload, PathProxyWater, PathKernel} {
		if !paths[p] {
			t.Errorf("no rows for path %s", p)
		}
	}
}

func TestQuickForward(t *testing.T) {
	testenv.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Forward(ctx, Config{Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, r, "forward", "usage")
	for _, m := range r.Tables[0].Rows {
		if m.Realized <= 0 {
			t.Errorf("%s %s %s: %g, want a positive figure", m.Label, m.Path, m.Metric, m.Realized)
		}
	}
}

func TestQuickSweep(t *testing.T) {
	testenv.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Sweep(ctx, Config{Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, r, "loss", "delay", "seed000", "seed001")
	for _, tb := range r.Tables {
		for _, m := range tb.Rows {
			if m.NA == "" && m.Realized <= 0 {
				t.Errorf("%s %s: throughput %g, want positive", tb.Name, m.Label, m.Realized)
			}
		}
	}
}
