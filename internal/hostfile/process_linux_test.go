package hostfile

import (
	"os"
	"testing"
)

// TestProcessStart: this process has a start time, the same on every
// read; a PID no process holds has none.
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
}
