package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/bench"
	"github.com/wanlab/wanlab/internal/testenv"
)

func benchCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	app := newApp()
	var out, errb bytes.Buffer
	app.Writer, app.ErrWriter = &out, &errb
	if err := runCommandLine(context.Background(), app, append([]string{"wanlab", "bench"}, args...)); err != nil {
		return out.String(), errb.String() + "error: " + err.Error() + "\n", exitCode(err)
	}
	return out.String(), errb.String(), exitOK
}

func TestBenchUsageErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(bad, []byte("delay 10ms\nloss 200%\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"accuracy", "extra"}, `unexpected argument "extra"`},
		{[]string{"accuracy", "--specs", filepath.Join(dir, "missing.txt")}, "missing.txt"},
		{[]string{"accuracy", "--specs", bad}, "bad.txt:2: "},
		{[]string{"fit", "--kernel", "--quick", "extra"}, `bench fit: unexpected argument "extra"`},
		{[]string{"fit", "--refit", dir, "--quick"}, "bench fit: --refit fits kept runs as they were run"},
		{[]string{"fit", "--point", "tbf 1ms 1mbit 1bdp"}, `bench fit: --point: no fit grid point "tbf 1ms 1mbit 1bdp"`},
		{[]string{"fit", "--point", "bbr tbf 50ms 50mbit 1bdp", "--quick"}, "bench fit: --point names points of the full grid"},
	} {
		_, stderr, code := benchCmd(t, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("bench %v: exit %d, stderr %q; want exit %d naming %q", c.args, code, stderr, exitUsage, c.want)
		}
	}
}

// One spec through the command: the three files appear and the JSON on
// stdout is the report.
func TestBenchAccuracyCommand(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	specs := filepath.Join(dir, "specs.txt")
	if err := os.WriteFile(specs, []byte("# one case\ndelay 2ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	stdout, stderr, code := benchCmd(t, "accuracy", "--specs", specs, "--out", out, "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r bench.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, stdout)
	}
	if r.Bench != "accuracy" || len(r.Tables) == 0 || r.Command != "wanlab bench accuracy --json --specs "+specs+" --out "+out {
		t.Errorf("report %+v", r)
	}
	var sawKernelNA bool
	for _, tb := range r.Tables {
		for _, m := range tb.Rows {
			if m.Label != "delay 2ms" {
				t.Errorf("row for %q, want only the spec of the file", m.Label)
			}
			sawKernelNA = sawKernelNA || (m.Path == bench.PathKernel && m.NA != "")
		}
	}
	if !sawKernelNA && !strings.Contains(stdout, `"path": "kernel"`) {
		t.Error("no kernel row")
	}
	for _, f := range []string{"report.json", "report.txt", "report.html"} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if !strings.Contains(stderr, "report: "+filepath.Join(out, "report.html")) {
		t.Errorf("stderr does not say where the report is: %q", stderr)
	}
}
