package hostfile

import (
	"os"
	"strconv"
	"testing"
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
