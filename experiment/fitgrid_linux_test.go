package experiment

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/internal/testenv"
)

// TestFitGridPoint runs the grid points WANLAB_FIT_POINT names (";"
// between names, as the table writes them: "tbf 50ms 10mbit 0.25bdp"),
// each one lab run, and logs their table: one point of `wanlab bench
// fit` without the whole grid (WANLAB_FIT_KERNEL=1: with the kernel's
// qdiscs in guests, as --kernel). The runs are kept in
// WANLAB_KEEP_CAPTURES (a temporary directory otherwise). Skipped
// unless asked for.
func TestFitGridPoint(t *testing.T) {
	names := os.Getenv("WANLAB_FIT_POINT")
	if names == "" {
		t.Skip("set WANLAB_FIT_POINT to the grid points to run")
	}
	testenv.RequireRoot(t)
	points, err := FitGridPoints(strings.Split(names, ";")...)
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("WANLAB_KEEP_CAPTURES")
	if dir == "" {
		dir = t.TempDir()
	} else if dir, err = os.MkdirTemp(dir, "fit-point-"); err != nil {
		t.Fatal(err)
	}
	rows, err := RunFitGrid(context.Background(), points, dir, testWriter{t}, FitGridOptions{Kernel: os.Getenv("WANLAB_FIT_KERNEL") != ""})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteFitGrid(&b, rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("runs in %s\n%s", dir, b.String())
}

func TestFitGridPointsByName(t *testing.T) {
	ps, err := FitGridPoints("tbf 50ms 10mbit 0.25bdp", " tbf  10ms 100mbit 0.25bdp")
	if err != nil || len(ps) != 2 || ps[0].Name != "tbf 10ms 100mbit 0.25bdp" || ps[1].Rate != 10e6 {
		t.Fatalf("points %+v, %v", ps, err)
	}
	if _, err := FitGridPoints("tbf 7ms 1mbit"); err == nil || strings.Contains(err.Error(), "\n") {
		t.Fatalf("an unknown point: %v, want a one-line error", err)
	}
}

// testWriter logs what is written to it.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
