package hostfile

import (
	"os"
	"testing"
)

// TestProcessStart: this process has a start time, the same on every
// read; a PID no process holds has none; ProcStat's first field is the
// state.
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
	// The state of this process, read while it runs: R (running).
	if f, err := ProcStat("self"); err != nil || len(f) < 20 || f[0] != "R" {
		t.Fatalf("stat fields %q, %v", f, err)
	}
}
