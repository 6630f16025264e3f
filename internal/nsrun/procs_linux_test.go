//go:build linux

package nsrun_test

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/internal/testenv"
)

// TestDeleteStopsItsProcesses: processes left in a namespace (a daemon,
// and one that ignores SIGTERM) end with it, not in a detached namespace;
// a process outside is untouched.
func TestDeleteStopsItsProcesses(t *testing.T) {
	name, h := testenv.NetNS(t)
	start := func(script string) *exec.Cmd {
		cmd := exec.Command("sh", "-c", script)
		if err := nsrun.Do(h, cmd.Start); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	polite := start("exec sleep 300")
	stubborn := start("trap '' TERM; while :; do sleep 1; done")
	outside := exec.Command("sleep", "300")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { outside.Process.Kill(); outside.Wait() })
	h.Close()
	if err := nsrun.Delete(name); err != nil {
		t.Fatal(err)
	}
	for what, cmd := range map[string]*exec.Cmd{"sleep": polite, "a shell ignoring SIGTERM": stubborn} {
		err := cmd.Wait()
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if err == nil || !ok || !ws.Signaled() {
			t.Errorf("%s in the namespace: %v, want ended by a signal", what, err)
		}
	}
	if err := outside.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("a process outside the namespace: %v, want it running", err)
	}
}
