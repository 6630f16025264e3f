package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// childRun is what a wanlab run as a child process did.
type childRun struct {
	stdout, stderr string
	code           int
	maxRSS         int64 // bytes, from the child's rusage
	wall           time.Duration
}

// runChild runs wanlab ARGS in a child process (this test binary, through
// mainArgsEnv) and returns its output, exit status and peak RSS, which only
// a separate process measures: the test's own heap is not in it. The child
// is killed at the deadline.
func runChild(t *testing.T, deadline time.Duration, args ...string) childRun {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, "-test.run=^$")
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+string(js))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err = cmd.Run()
	r := childRun{stdout: out.String(), stderr: errb.String(), wall: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("wanlab %q: not done within %v (killed)", args, deadline)
	}
	if cmd.ProcessState == nil {
		t.Fatalf("wanlab %q: %v", args, err)
	}
	r.code = cmd.ProcessState.ExitCode()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss << 10 // KiB on Linux
	}
	return r
}

// mib is a mebibyte, for RSS bounds.
const mib = 1 << 20

// TestFitCostFollowsPacketsNotSpan: 250 segments spread over 27 years
// with a queue that builds smoothly (the fit's rate walk stepped through
// the whole span in 50 ms intervals: 4.3 GB and minutes of CPU) are
// fitted within 200 MB and the test's deadline.
func TestFitCostFollowsPacketsNotSpan(t *testing.T) {
	path := t.TempDir() + "/years.pcap"
	spanYears(t, path, 250)
	r := runChild(t, 2*time.Minute, "fit", "--json", path)
	t.Logf("fit of 250 segments over 27 years: exit %d, peak RSS %.1f MiB, %v", r.code, float64(r.maxRSS)/mib, r.wall.Round(time.Millisecond))
	if r.code != exitOK && r.code != exitUsage {
		t.Errorf("exit %d: %s", r.code, r.stderr)
	}
	if r.maxRSS > 200*mib {
		t.Errorf("peak RSS %.0f MiB, over 200 MiB", float64(r.maxRSS)/mib)
	}
}
