package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTraceCommands(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "c.trace")
	if out, code := runWanlab(t, "trace", "constant", "--rate", "12mbit", "--duration", "2s", "-o", f); code != 0 {
		t.Fatalf("constant: %d %s", code, out)
	}
	out, code := runWanlab(t, "trace", "stats", f)
	if code != 0 || !strings.Contains(out, "2000 opportunities over 2s") || !strings.Contains(out, "mean 12Mbit/s, per second min 12Mbit/s max 12Mbit/s, idle 0.0%") {
		t.Fatalf("stats: %d %s", code, out)
	}
	if out, code := runWanlab(t, "trace", "cellular", "--duration", "5s", "--seed", "3", "-o", filepath.Join(dir, "cell")); code != 0 {
		t.Fatalf("cellular: %d %s", code, out)
	}
	png := filepath.Join(dir, "cell.png")
	if out, code := runWanlab(t, "trace", "plot", "-o", png, filepath.Join(dir, "cell")); code != 0 {
		t.Fatalf("plot: %d %s", code, out)
	}
	if b, err := os.ReadFile(png); err != nil || !strings.HasPrefix(string(b), "\x89PNG") {
		t.Fatalf("plot wrote no PNG: %v", err)
	}
	// The trace replays on the virtual clock: 12 Mbit/s offered 20 Mbit/s.
	out, code = runWanlab(t, "simulate", "--spec", "trace "+f, "--pps", "1667", "--packets", "3000", "--json")
	if code != 0 || !strings.Contains(out, `"kind": "trace"`) {
		t.Fatalf("simulate: %d %s", code, out)
	}
	os.WriteFile(filepath.Join(dir, "bad"), []byte("5\n3\n"), 0o644)
	out, code = runWanlab(t, "simulate", "--spec", "trace "+filepath.Join(dir, "bad"))
	if code != exitUsage || !strings.Contains(out, "bad:2: 3 after 5: timestamps must be monotonically nondecreasing") {
		t.Fatalf("bad trace: %d %s", code, out)
	}
}
