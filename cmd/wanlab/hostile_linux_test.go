package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wanlab/wanlab/fit"
)

// childRun is what a wanlab run as a child process did.
type childRun struct {
	stdout, stderr string
	code           int
	maxRSS         int64 // bytes, from the child's rusage
	// parentRSS is the test process's own peak, which maxRSS is at
	// least (see runChild): a bound below it cannot be tested.
	parentRSS int64
	wall      time.Duration
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
	// The output is kept in part: the child's peak RSS counts the test
	// process's own at the exec (Linux keeps the high-water mark of the
	// memory it replaces, which Go's vfork shares with the parent), so
	// the test must stay small; an analysis of 200,000 connections
	// writes 760 MB of JSON.
	out, errb := &headTail{}, &headTail{}
	cmd.Stdout, cmd.Stderr = out, errb
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
	var own syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &own); err == nil {
		r.parentRSS = own.Maxrss << 10
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss << 10 // KiB on Linux
	}
	return r
}

// checkRSS fails the test if the child's peak RSS passed bound, saying
// when the test process's own peak (which the child's counts) did.
func (r childRun) checkRSS(t *testing.T, what string, bound int64) {
	t.Helper()
	if r.maxRSS <= bound {
		return
	}
	if r.parentRSS >= bound {
		t.Errorf("%s: the test process itself peaked at %.0f MiB, over the %.0f MiB bound a child's peak RSS (which counts it) is tested against",
			what, float64(r.parentRSS)/mib, float64(bound)/mib)
		return
	}
	t.Errorf("%s: peak RSS %.0f MiB, over %.0f MiB", what, float64(r.maxRSS)/mib, float64(bound)/mib)
}

// headTail keeps the first and the last headTailKeep bytes written to it.
type headTail struct {
	head, tail []byte
}

// headTailKeep is what headTail keeps at each end.
const headTailKeep = 1 << 20

func (h *headTail) Write(b []byte) (int, error) {
	n := len(b)
	if room := headTailKeep - len(h.head); room > 0 {
		k := min(room, len(b))
		h.head = append(h.head, b[:k]...)
		b = b[k:]
	}
	h.tail = append(h.tail, b...)
	if over := len(h.tail) - headTailKeep; over > 0 {
		h.tail = append(h.tail[:0], h.tail[over:]...)
	}
	return n, nil
}

// String is what was written if it all fits, else its head and tail.
func (h *headTail) String() string { return string(h.head) + string(h.tail) }

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
	r.checkRSS(t, "fit", 200*mib)
}

// TestManyConnectionsWithinBudget: 200,000 connections open at once (the
// fit once took 2.25 GB of them, 11 KB each) are fitted and analysed
// within 600 MB, past the budget of open connections in its bounded mode:
// a warning names the budget and --max-open-connections, the other
// connections are summarised past fit.MaxOthersListed.
func TestManyConnectionsWithinBudget(t *testing.T) {
	path := t.TempDir() + "/conns.pcap"
	manyConnections(t, path, 200_000)
	r := runChild(t, 3*time.Minute, "fit", "--json", path)
	t.Logf("fit of 200,000 open connections: exit %d, peak RSS %.0f MiB, %v", r.code, float64(r.maxRSS)/mib, r.wall.Round(time.Millisecond))
	var doc struct {
		Notes          []string `json:"notes"`
		Others         []any    `json:"other_connections"`
		OthersUnlisted int      `json:"other_connections_unlisted"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); r.code != exitOK || err != nil {
		t.Fatalf("fit: exit %d, %v: %s", r.code, err, r.stderr)
	}
	r.checkRSS(t, "fit", 600*mib)
	if !hasNote(doc.Notes, "--max-open-connections") || len(doc.Others) != fit.MaxOthersListed || doc.OthersUnlisted != 200_000-1-fit.MaxOthersListed {
		t.Errorf("fit: notes %q; %d others listed, %d unlisted", doc.Notes, len(doc.Others), doc.OthersUnlisted)
	}
	r = runChild(t, 3*time.Minute, "analyze", "--format", "json", path)
	t.Logf("analyze --format json of 200,000 open connections: exit %d, peak RSS %.0f MiB, %v", r.code, float64(r.maxRSS)/mib, r.wall.Round(time.Millisecond))
	r.checkRSS(t, "analyze", 600*mib)
	if r.code != exitOK || !strings.Contains(r.stdout, "--max-open-connections raises it") {
		t.Errorf("analyze: exit %d, budget warning %v", r.code, strings.Contains(r.stdout, "--max-open-connections"))
	}
}

// TestFitPacketBudget: a connection of 1.2 million segments and their
// ACKs (1.8 million packets) is fitted on its first fit.DefaultMaxPackets
// within 800 MB (the bound before, 4 Mi packets, peaked at 2.5-3.3 GB),
// with a note naming the budget and --max-packets; --max-packets lowers
// it.
func TestFitPacketBudget(t *testing.T) {
	path := t.TempDir() + "/long.pcap"
	longConnection(t, path, 1_200_000)
	r := runChild(t, 3*time.Minute, "fit", "--json", path)
	t.Logf("fit of 1.8 million packets: exit %d, peak RSS %.0f MiB, %v", r.code, float64(r.maxRSS)/mib, r.wall.Round(time.Millisecond))
	var doc struct {
		Notes []string `json:"notes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); r.code != exitOK || err != nil {
		t.Fatalf("fit: exit %d, %v: %s", r.code, err, r.stderr)
	}
	r.checkRSS(t, "fit", 800*mib)
	if !hasNote(doc.Notes, fmt.Sprintf("more than %d packets", fit.DefaultMaxPackets)) || !hasNote(doc.Notes, "--max-packets raises it") {
		t.Errorf("notes %q", doc.Notes)
	}
	small := runChild(t, time.Minute, "fit", "--json", "--max-packets", "5000", path)
	if small.code != exitOK || !strings.Contains(small.stdout, "more than 5000 packets") {
		t.Errorf("--max-packets 5000: exit %d: %.300s", small.code, small.stdout+small.stderr)
	}
	if bad := runChild(t, time.Minute, "fit", "--max-packets", "0", path); bad.code != exitUsage || !strings.Contains(bad.stderr, "--max-packets 0") {
		t.Errorf("--max-packets 0: exit %d: %s", bad.code, bad.stderr)
	}
}

func hasNote(notes []string, part string) bool {
	for _, n := range notes {
		if strings.Contains(n, part) {
			return true
		}
	}
	return false
}
