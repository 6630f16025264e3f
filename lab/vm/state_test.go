package vm

import (
	"os"
	"os/exec"
	"path/filepath"
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
	orphan := &stateFile{ID: "00000a", PID: dead.Process.Pid, QemuPID: qemu.Process.Pid, dir: filepath.Join(dir, "00000a")}
	live := &stateFile{ID: "00000b", PID: os.Getpid(), dir: filepath.Join(dir, "00000b")}
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
