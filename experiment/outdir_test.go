package experiment

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/wanlab/wanlab/internal/hostfile"
)

// TestOutDirCannotBePreCreated: the default output directory carries 64
// random bits, so another user cannot pre-create every name in a
// directory both can write to (with 2 random bytes, 65,536 mkdirs took
// 2 s), and it is a new directory of this user's, mode 0700. An --out
// another user made is refused without --force.
func TestOutDirCannotBePreCreated(t *testing.T) {
	shared := t.TempDir()
	if err := os.Chmod(shared, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	t.Chdir(shared)
	now := time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC)
	name := regexp.MustCompile(`^wanlab-experiment-20261201-230000-[0-9a-f]{16}$`)
	seen := map[string]bool{}
	for range 3 {
		dir, err := outDir("", now, false)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(dir)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if !name.MatchString(filepath.Base(dir)) || seen[dir] || !fi.IsDir() || fi.Mode().Perm() != 0o700 || int(st.Uid) != os.Geteuid() {
			t.Fatalf("output dir %s: mode %04o, uid %d; want a new 0700 directory of ours named with 16 hex digits", dir, fi.Mode().Perm(), st.Uid)
		}
		seen[dir] = true
	}
	if os.Geteuid() == 0 {
		theirs := filepath.Join(shared, "planted")
		if err := os.Mkdir(theirs, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(theirs, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := outDir(theirs, now, false); !errors.Is(err, hostfile.ErrExists) {
			t.Fatalf("--out of another user's directory: %v, want ErrExists", err)
		}
	}
}
