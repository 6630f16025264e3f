package vm

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/wanlab/wanlab/internal/hostfile"
)

// TestUnsafeStateDirIsRefused: a VM state directory another user can
// write to (or own) is refused before anything is created in it, so no
// one can take the control socket or plant links at the state and
// console files.
func TestUnsafeStateDirIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("WANLAB_REQUIRE_PRIVILEGED") == "1" {
			t.Fatal("needs root to hand a directory to uid 65534")
		}
		t.Skip("needs root to hand a directory to uid 65534")
	}
	open := filepath.Join(t.TempDir(), "vm")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(open, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	wide := filepath.Join(t.TempDir(), "vm")
	if err := os.Mkdir(wide, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(wide, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{open, wide} {
		v := &VM{cfg: Config{StateDir: d}}
		if err := v.createState(); !errors.Is(err, hostfile.ErrUnsafeDir) {
			t.Errorf("state dir %s: %v, want ErrUnsafeDir", d, err)
		}
		if ents, _ := os.ReadDir(d); len(ents) != 0 {
			t.Errorf("%s: %d entries created in an unsafe directory", d, len(ents))
		}
	}
}
