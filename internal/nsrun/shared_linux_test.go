package nsrun_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/internal/testenv"
)

// TestEnsureSharedBindsOnce runs ensureShared on fresh directories inside
// a private mount namespace of its own thread, so nothing it mounts is
// seen outside: an empty directory becomes a shared mount point, once
// however often it is called, and a directory that already holds entries
// is left as it is.
func TestEnsureSharedBindsOnce(t *testing.T) {
	testenv.RequireRoot(t)
	empty, full := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "someone-elses"), nil, 0o444); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		// The thread never unlocks: it dies with the goroutine, and its
		// mount namespace with it.
		runtime.LockOSThread()
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				return err
			}
			if err := unix.Mount("", "/", "none", unix.MS_PRIVATE|unix.MS_REC, ""); err != nil {
				return err
			}
			for range 2 {
				if err := nsrun.EnsureShared(empty); err != nil {
					return err
				}
			}
			if err := nsrun.EnsureShared(full); err != nil {
				return err
			}
			b, err := os.ReadFile("/proc/thread-self/mountinfo")
			if err != nil {
				return err
			}
			var emptyMounts, fullMounts int
			for _, line := range strings.Split(string(b), "\n") {
				f := strings.Fields(line)
				if len(f) < 7 {
					continue
				}
				switch f[4] {
				case empty:
					emptyMounts++
					if !strings.Contains(line, " shared:") {
						return errors.New("bind not shared: " + line)
					}
				case full:
					fullMounts++
				}
			}
			if emptyMounts != 1 || fullMounts != 0 {
				return errors.New("mount points: " + strings.Join([]string{empty, full}, ", ") + ": want one on the empty directory, none on the other")
			}
			return nil
		}()
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
