package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/wanlab/wanlab/experiment"
	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/lab"
)

// experimentCmd runs "wanlab experiment ..." in-process; stderr lines go
// to onErr as well as into the output.
func experimentCmd(t *testing.T, onErr func(string), args ...string) (stdout, stderr string, code int) {
	t.Helper()
	app := newApp()
	var out, errb bytes.Buffer
	var mu sync.Mutex
	app.Writer = &out
	app.ErrWriter = writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		errb.Write(b)
		mu.Unlock()
		if onErr != nil {
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				onErr(l)
			}
		}
		return len(b), nil
	})
	err := runCommandLine(context.Background(), app, append([]string{"wanlab", "experiment"}, args...))
	if err != nil {
		errb.WriteString("error: " + err.Error() + "\n")
		return out.String(), errb.String(), exitCode(err)
	}
	return out.String(), errb.String(), exitOK
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func TestExperimentUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--preset", "seed9"}, `preset "seed9": want one of send-buffer (seed000)`},
		{[]string{"--impair", "to-moon=delay 1ms"}, `direction "to-moon"`},
		{[]string{"--impair", "to-client=dela 1ms"}, `dela`},
		{[]string{"--delay", "5parsecs"}, `--delay "5parsecs"`},
		{[]string{"--loss", "120"}, `--loss "120"`},
		{[]string{"--rate", "fast"}, `--rate "fast"`},
		{[]string{"--size", "0"}, `--size "0"`}, {[]string{"--size", "5gb"}, `larger than 4 GiB`},
		{[]string{"--client-sysctl", "kernel.hostname=x"}, `want net.KEY=VALUE`},
		{[]string{"--client-sysctl", "net.ipv4.tcp_rmem=9000 100 10"}, `min 9000 is larger than default 100`},
		{[]string{"--server-sysctl", "net.core.wmem_max=9000000"}, `host-wide key`},
		{[]string{"--requests", "-1"}, `--requests -1`},
		{[]string{"stray"}, `unexpected argument "stray"`},
		{[]string{"--timeout", "soon"}, `--timeout "soon"`},
		{[]string{"--runs", "2"}, `--runs needs --like CAPTURE`},
		{[]string{"--like", "x.pcap", "--runs", "0"}, `--runs 0: want 1 to 20`},
	} {
		_, stderr, code := experimentCmd(t, nil, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("experiment %q: exit %d, %q; want exit %d naming %q", c.args, code, stderr, exitUsage, c.want)
		}
	}
}

func TestExperimentRunsAndCtrlCTearsDown(t *testing.T) {
	testenv.RequireRoot(t)
	out := t.TempDir()
	stdout, stderr, code := experimentCmd(t, nil, "--preset", "seed002", "--size", "512kb", "--json", "--out", out)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res experiment.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout)
	}
	if res.Download == nil || res.Download.Bytes != 512<<10 || res.Report != filepath.Join(out, "report.html") {
		t.Errorf("result %+v", res)
	}
	assertNoLab(t, res.LabID)

	// Ctrl-C while downloading: the signal reaches the command's handler
	// (installed for the run), which tears everything down.
	var id string
	_, stderr, code = experimentCmd(t, func(line string) {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "lab" {
			id = strings.TrimSuffix(f[1], ":")
		}
		if strings.HasPrefix(line, "download:") {
			_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
		}
	}, "--size", "3gb", "--out", t.TempDir())
	if code == exitOK || !strings.Contains(stderr, "interrupted") {
		t.Fatalf("after SIGINT: exit %d, %s", code, stderr)
	}
	assertNoLab(t, id)
}

func assertNoLab(t *testing.T, id string) {
	t.Helper()
	if id == "" {
		t.Fatal("no lab id reported")
	}
	for _, role := range []string{lab.RoleClient, lab.RoleRouter, lab.RoleServer} {
		if nsrun.Exists(lab.NamePrefix + id + "-" + role) {
			t.Errorf("namespace of lab %s (%s) left behind", id, role)
		}
	}
	if _, err := os.Stat(filepath.Join(experiment.StateDir, id)); err == nil {
		t.Errorf("proxy state of lab %s left behind", id)
	}
}

func TestExperimentCleanupCommand(t *testing.T) {
	testenv.RequireRoot(t)
	stdout, stderr, code := experimentCmd(t, nil, "cleanup")
	if code != exitOK || stdout == "" {
		t.Errorf("cleanup: exit %d, %q %q", code, stdout, stderr)
	}
}
