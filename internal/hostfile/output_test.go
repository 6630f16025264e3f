package hostfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestCreateOutputNeverWritesThroughALink(t *testing.T) {
	dir := t.TempDir()
	victim := plant(t, dir, "capture.pcap")
	path := filepath.Join(dir, "capture.pcap")
	if f, err := CreateOutput(path, 0o600, false); !errors.Is(err, ErrExists) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("link at the output path without --force: %v, want ErrExists", err)
	}
	assertIntact(t, victim)
	// --force replaces the link by a new file.
	if err := WriteOutput(path, []byte("packets"), 0o600, true); err != nil {
		t.Fatal(err)
	}
	assertIntact(t, victim)
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s after --force: %v, %v; want a regular 0600 file", path, fi, err)
	}
	if b, _ := os.ReadFile(path); string(b) != "packets" {
		t.Fatalf("content %q", b)
	}
	// An existing regular file: refused, then replaced (a new inode, the
	// old one untouched for whoever holds it).
	if err := WriteOutput(path, []byte("again"), 0o600, false); !errors.Is(err, ErrExists) {
		t.Fatalf("existing file without --force: %v", err)
	}
	hard := filepath.Join(dir, "hardlink")
	if err := os.Link(path, hard); err != nil {
		t.Fatal(err)
	}
	if err := WriteOutput(path, []byte("again"), 0o644, true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(hard); string(b) != "packets" {
		t.Fatalf("--force wrote through the old file: %q", b)
	}
	// A dangling link: nothing created at its target.
	dangling := filepath.Join(dir, "dangling")
	target := filepath.Join(t.TempDir(), "created-through-link")
	if err := os.Symlink(target, dangling); err != nil {
		t.Fatal(err)
	}
	if err := WriteOutput(dangling, []byte("x"), 0o600, false); !errors.Is(err, ErrExists) {
		t.Fatalf("dangling link: %v", err)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("created through a dangling link: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp-*")); len(left) > 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestOutputDirRefusesExistingAndLinks(t *testing.T) {
	base := t.TempDir()
	d := filepath.Join(base, "a", "out")
	if err := OutputDir(d, false); err != nil {
		t.Fatal(err)
	}
	if err := OutputDir(d, false); err != nil {
		t.Fatalf("an existing dir of ours: %v", err)
	}
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := OutputDir(open, false); !errors.Is(err, ErrExists) || !errors.Is(err, ErrUnsafeDir) {
		t.Fatalf("existing world-writable dir: %v, want ErrExists", err)
	}
	if err := OutputDir(open, true); err != nil {
		t.Fatalf("existing dir with force: %v", err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if err := OutputDir(link, true); !errors.Is(err, ErrUnsafeDir) {
		t.Fatalf("link as output dir with force: %v, want ErrUnsafeDir", err)
	}
}

func TestNewOutputDirIsFreshAndPrivate(t *testing.T) {
	base := t.TempDir()
	seen := map[string]bool{}
	for range 20 {
		d, err := NewOutputDir(base, "run-")
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(d)
		if len(strings.TrimPrefix(name, "run-")) != RandomBits/4 || seen[name] {
			t.Fatalf("name %q: want %d hex digits, never twice", name, RandomBits/4)
		}
		seen[name] = true
		fi, err := os.Lstat(d)
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v, %v; want a 0700 directory", d, fi, err)
		}
	}
}

func TestReadInputRefusesUnboundedFiles(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "spec.txt")
	if err := os.WriteFile(small, []byte("delay 10ms\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadInput(small, 1024); err != nil || string(b) != "delay 10ms\n" {
		t.Fatalf("regular file: %q, %v", b, err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 2048), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{big, fifo, "/dev/zero", dir} {
		_, err := ReadInput(p, 1024)
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "1 KiB") {
			t.Errorf("ReadInput(%s): %v; want ErrInput naming the file and the limit", p, err)
		}
	}
}

func TestDirRefusesAnUnsafeParent(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := Dir(filepath.Join(open, "vm")); !errors.Is(err, ErrUnsafeDir) {
		t.Fatalf("dir under a world-writable one: %v, want ErrUnsafeDir", err)
	}
	sticky := filepath.Join(base, "sticky")
	if err := os.Mkdir(sticky, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sticky, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	if err := Dir(filepath.Join(sticky, "vm")); err != nil {
		t.Fatalf("dir under a sticky one (as /tmp): %v", err)
	}
}
