package hostfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// plant makes dir/name a symbolic link to a victim file and returns the
// victim's path; the victim must keep its content whatever is written.
func plant(t *testing.T, dir, name string) string {
	t.Helper()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	return victim
}

func assertIntact(t *testing.T, victim string) {
	t.Helper()
	b, err := os.ReadFile(victim)
	if err != nil || string(b) != "precious" {
		t.Fatalf("victim %s: %q, %v: written through a link", victim, b, err)
	}
}

func TestWriteAtomicReplacesLinkNotTarget(t *testing.T) {
	dir := t.TempDir()
	victim := plant(t, dir, "state.json")
	path := filepath.Join(dir, "state.json")
	if err := WriteAtomic(path, []byte("new\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	assertIntact(t, victim)
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s after WriteAtomic: %v, %v; want a regular 0600 file", path, fi, err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new\n" {
		t.Fatalf("content %q", b)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp-*")); len(left) > 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestOpenLockAndCreateExclusiveRefuseLinks(t *testing.T) {
	dir := t.TempDir()
	victim := plant(t, dir, "a.lock")
	if f, err := OpenLock(filepath.Join(dir, "a.lock")); err == nil {
		f.Close()
		t.Fatal("OpenLock followed a symbolic link")
	}
	victim2 := plant(t, dir, "a.token")
	if f, err := CreateExclusive(filepath.Join(dir, "a.token"), 0o600); err == nil {
		f.Close()
		t.Fatal("CreateExclusive opened a symbolic link")
	}
	// A dangling link must not be created through either.
	dangling := filepath.Join(dir, "dangling")
	target := filepath.Join(t.TempDir(), "created-through-link")
	if err := os.Symlink(target, dangling); err != nil {
		t.Fatal(err)
	}
	if f, err := OpenLock(dangling); err == nil {
		f.Close()
		t.Fatal("OpenLock followed a dangling link")
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file was created through a dangling link: %v", err)
	}
	assertIntact(t, victim)
	assertIntact(t, victim2)
	f, err := OpenLock(filepath.Join(dir, "b.lock"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func TestDirRefusesUnsafeDirectories(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := Dir(open); !errors.Is(err, ErrUnsafeDir) {
		t.Fatalf("world-writable dir: %v, want ErrUnsafeDir", err)
	}
	if err := WriteAtomic(filepath.Join(open, "x"), []byte("x"), 0o600); !errors.Is(err, ErrUnsafeDir) {
		t.Fatalf("WriteAtomic into a world-writable dir: %v, want ErrUnsafeDir", err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if err := Dir(link); !errors.Is(err, ErrUnsafeDir) {
		t.Fatalf("dir that is a link: %v, want ErrUnsafeDir", err)
	}
	if os.Geteuid() == 0 {
		theirs := filepath.Join(base, "theirs")
		if err := os.Mkdir(theirs, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(theirs, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if err := Dir(theirs); !errors.Is(err, ErrUnsafeDir) {
			t.Fatalf("dir owned by another user: %v, want ErrUnsafeDir", err)
		}
	}
	fresh := filepath.Join(base, "a", "b")
	if err := Dir(fresh); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(fresh); fi.Mode().Perm() != DirMode {
		t.Fatalf("new dir mode %04o, want %04o", fi.Mode().Perm(), DirMode)
	}
}
