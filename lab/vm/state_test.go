package vm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCleanupKillsQemuOfDeadOwner fakes the state of a VM whose owner died
// while its qemu (here a sleep) lives on, and one of a live owner.
func TestCleanupKillsQemuOfDeadOwner(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	qemu := exec.Command("sleep", "60")
	if err := qemu.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { qemu.Wait(); close(exited) }()
	defer qemu.Process.Kill()

	dir := t.TempDir()
	orphan := &stateFile{ID: "00000a", PID: dead.Process.Pid, QemuPID: qemu.Process.Pid, dir: filepath.Join(dir, "00000a"),
		ControlSock: filepath.Join(dir, "00000a", "ctl.sock")}
	live := &stateFile{ID: "00000b", PID: os.Getpid(), dir: filepath.Join(dir, "00000b"), ControlSock: filepath.Join(dir, "00000b", "ctl.sock")}
	for _, st := range []*stateFile{orphan, live} {
		os.Mkdir(st.dir, 0o700)
		if err := st.save(); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(dir, "not-a-vm"), 0o700)
	removed, err := cleanupIn(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 2 {
		t.Errorf("removed %q, want the qemu and the state of 00000a", removed)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the orphan's qemu still runs")
	}
	if ws := qemu.ProcessState.Sys().(syscall.WaitStatus); ws.Signal() != syscall.SIGKILL {
		t.Errorf("qemu ended with %v", qemu.ProcessState)
	}
	for name, want := range map[string]bool{"00000a": false, "00000b": true, "not-a-vm": true} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != want {
			t.Errorf("%s exists = %v, want %v", name, err == nil, want)
		}
	}
}

// TestTamperedVMStateIsRefused: Cleanup acts only on a state file whose
// fields are what Boot writes.
func TestTamperedVMStateIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "00000c")
	good := `{"id":"00000c","pid":1,"netns":"wanlab-ab-router","taps":["wl-tap0"],"control_socket":"` + filepath.Join(dir, "ctl.sock") + `"}`
	if _, err := parseState([]byte(good), dir); err != nil {
		t.Fatalf("Boot's own state: %v", err)
	}
	for _, tc := range []struct{ from, to, field string }{
		{`"id":"00000c"`, `"id":"00000d"`, "id"},
		{filepath.Join(dir, "ctl.sock"), "/etc/shadow", "control_socket"},
		{`"netns":"wanlab-ab-router"`, `"netns":"../../etc"`, "netns"},
		{`"wl-tap0"`, `"a/b"`, "taps[0]"},
	} {
		_, err := parseState([]byte(strings.Replace(good, tc.from, tc.to, 1)), dir)
		if err == nil || !strings.HasPrefix(err.Error(), tc.field) {
			t.Errorf("%s: %v, want a refusal naming %s", tc.to, err, tc.field)
		}
	}
}

func FuzzParseVMState(f *testing.F) {
	f.Add([]byte(`{"id":"00000c","pid":1,"netns":"n","taps":["t"],"control_socket":"/run/wanlab/vm/00000c/ctl.sock"}`))
	f.Add([]byte(`{"id":"../x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseState(b, "/run/wanlab/vm/00000c")
		if err != nil {
			return
		}
		if st.ID != "00000c" || st.ControlSock != "/run/wanlab/vm/00000c/ctl.sock" || strings.Contains(st.Netns, "/") {
			t.Fatalf("accepted %+v", st)
		}
	})
}
