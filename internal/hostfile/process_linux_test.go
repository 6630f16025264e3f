package hostfile

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// TestProcessStart: this process has a start time, the same on every
// read; a PID no process holds has none; ProcStat's second field is the
// parent's PID.
func TestProcessStart(t *testing.T) {
	a, err := ProcessStart(os.Getpid())
	if err != nil || a == 0 {
		t.Fatalf("start %d, %v", a, err)
	}
	if b, err := ProcessStart(os.Getpid()); err != nil || b != a {
		t.Fatalf("read again: %d, %v; want %d", b, err, a)
	}
	if _, err := ProcessStart(1 << 30); err == nil {
		t.Fatal("no process: no error")
	}
	// Field 4 (f[1]) is the parent's PID.
	if f, err := ProcStat("self"); err != nil || len(f) < 20 || f[1] != strconv.Itoa(os.Getppid()) {
		t.Fatalf("stat fields %q, %v: want the parent %d second", f, err, os.Getppid())
	}
}

// TestRunningNotZombie: this process runs; a child that exited and is not
// yet reaped (a zombie) does not, nor does a start time of another
// process.
func TestRunningNotZombie(t *testing.T) {
	start, err := ProcessStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !Running(os.Getpid(), start) || !Running(os.Getpid(), 0) || Running(os.Getpid(), start+1) {
		t.Fatal("this process: Running wrong")
	}
	cmd := exec.Command("/bin/true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Until Wait reaps it, the exited child is a zombie.
	deadline := time.Now().Add(10 * time.Second)
	for {
		f, err := ProcStat(strconv.Itoa(cmd.Process.Pid))
		if err == nil && f[0] == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child did not exit: %q, %v", f, err)
		}
		time.Sleep(time.Millisecond) // polling interval: no event for another process's state
	}
	if Running(cmd.Process.Pid, 0) {
		t.Error("a zombie counts as running")
	}
	cmd.Wait()
}
