package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wanlab/wanlab/experiment"
	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/units"
)

// assertLabGone checks what assertNoLab does (the lab's namespaces, its
// proxy state) and the rest a lab puts on the host: its state file under
// /run/wanlab and links in this namespace named after it.
func assertLabGone(t *testing.T, id string) {
	t.Helper()
	assertNoLab(t, id)
	if _, err := os.Stat(filepath.Join(lab.DefaultStateDir, id+".json")); err == nil {
		t.Errorf("state file of lab %s left behind", id)
	}
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if strings.Contains(i.Name, id) {
			t.Errorf("link %s of lab %s left behind", i.Name, id)
		}
	}
}

// labIDs are the labs a run's log lines name ("lab ID: client ...").
func labIDs(lines []string) []string {
	var ids []string
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "lab" && strings.HasSuffix(f[1], ":") {
			ids = append(ids, strings.TrimSuffix(f[1], ":"))
		}
	}
	return ids
}

// TestLikeOutOfRangeBuildsNothing: a capture whose fit is outside the
// lab's range (a round trip of 40 s: over 10 s one way), or no path TCP
// runs over at all (250 segments over 27 years: a round trip of days,
// which the fit itself refuses), is refused with exit 2 naming the
// value, before any lab or output directory is made.
func TestLikeOutOfRangeBuildsNothing(t *testing.T) {
	testenv.RequireRoot(t)
	for _, c := range []struct {
		name  string
		write func(path string)
		want  []string
	}{
		{"40 s", func(p string) { spanRTT(t, p, 50, 40*time.Second, 0, 50*time.Second) }, []string{"over 10s one way", "outside the lab's range"}},
		{"years", func(p string) { spanYears(t, p, 250) }, []string{"not one TCP runs over", "a round trip of"}},
	} {
		dir := t.TempDir()
		capture := filepath.Join(dir, "capture.pcap")
		c.write(capture)
		var lines []string
		_, stderr, code := experimentCmd(t, func(l string) { lines = append(lines, l) }, "--like", capture, "--out", filepath.Join(dir, "out"))
		if code != exitUsage || !strings.Contains(stderr, c.want[0]) || !strings.Contains(stderr, c.want[1]) {
			t.Errorf("%s: exit %d, want %d naming the round trip: %s", c.name, code, exitUsage, stderr)
		}
		if ids := labIDs(lines); len(ids) > 0 {
			t.Errorf("%s: labs built: %q", c.name, ids)
		}
		if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
			t.Errorf("%s: an output directory was made", c.name)
		}
	}
}

// likeOriginal runs a shaped download of 8 s and returns its server-side
// capture, what --like is given.
func likeOriginal(t *testing.T) string {
	t.Helper()
	orig := experiment.Config{Name: "original", Impair: map[string]string{experiment.ToClient: "delay 10ms | tbf rate 20mbit burst 32kb limit 100kb", experiment.ToServer: "delay 10ms"},
		Size: 20 * units.MiB, Seed: 1, Out: filepath.Join(t.TempDir(), "original")}
	res, err := experiment.Run(context.Background(), orig)
	if err != nil {
		t.Fatal(err)
	}
	return res.Captures[experiment.SideServer].Path
}

// TestLikeDeadlineLeavesNothing: a reproduction past its --deadline ends
// with the deadline named and the lab removed; one killed with SIGKILL
// leaves its lab, which `wanlab cleanup` removes.
func TestLikeDeadlineLeavesNothing(t *testing.T) {
	testenv.RequireRoot(t)
	capture := likeOriginal(t)

	var lines []string
	_, stderr, code := experimentCmd(t, func(l string) { lines = append(lines, l) }, "--like", capture, "--deadline", "3s", "--out", filepath.Join(t.TempDir(), "like"))
	if code == exitOK || !strings.Contains(stderr, "the reproduction's deadline passed") || !strings.Contains(stderr, "3s") {
		t.Errorf("past the deadline: exit %d: %s", code, stderr)
	}
	ids := labIDs(lines)
	if len(ids) == 0 {
		t.Fatalf("no lab was built before the deadline: %s", stderr)
	}
	for _, id := range ids {
		assertLabGone(t, id)
	}

	// SIGKILL: nothing runs the teardown; `wanlab cleanup` does.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal([]string{"experiment", "--like", capture, "--out", filepath.Join(t.TempDir(), "killed")})
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+string(args))
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errPipe)
		sent := false
		for sc.Scan() {
			if ids := labIDs([]string{sc.Text()}); len(ids) > 0 && !sent {
				found <- ids[0]
				sent = true
			}
		}
		if !sent {
			close(found)
		}
	}()
	var id string
	select {
	case id = <-found:
	case <-time.After(2 * time.Minute):
	}
	if id == "" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the child never named its lab")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if _, err := os.Stat(filepath.Join(lab.DefaultStateDir, id+".json")); err != nil {
		t.Errorf("the killed run's lab %s has no state file for cleanup to find: %v", id, err)
	}
	if out, code := runWanlab(t, "cleanup"); code != exitOK {
		t.Fatalf("cleanup: exit %d: %s", code, out)
	}
	assertLabGone(t, id)
}
