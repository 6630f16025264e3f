//go:build unix

package tuner

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	touch := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	goneBackup := touch("tune-backup-netns-gone.json")
	goneLock := touch("tune-backup-netns-gone.json.lock")
	orphanLock := touch("tune-backup-netns-orphan.json.lock")
	liveBackup := touch("tune-backup-netns-live.json")
	liveLock := touch("tune-backup-netns-live.json.lock")
	hostBackup := touch("tune-backup.json")
	// A namespace that is gone but whose lock a running revert holds.
	busyBackup := touch("tune-backup-netns-busy.json")
	unlock, err := lockBackup(busyBackup)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()

	exists := func(ns string) bool { return ns == "live" }
	removed, err := RemoveStale(dir, exists)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(removed)
	want := []string{goneBackup, goneLock, orphanLock}
	sort.Strings(want)
	if len(removed) != len(want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	for i := range want {
		if removed[i] != want[i] {
			t.Fatalf("removed %v, want %v", removed, want)
		}
	}
	for _, p := range want {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there: %v", p, err)
		}
	}
	for _, p := range []string{liveBackup, liveLock, hostBackup, busyBackup, busyBackup + ".lock"} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
}

func TestRevertRemovesLockFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tune-backup-netns-x.json")
	unlock, err := lockBackup(path)
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	if _, err := os.Lstat(path + ".lock"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("lock file left without a backup: %v", err)
	}
	if err := os.WriteFile(path, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	unlock, err = lockBackup(path)
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	if _, err := os.Lstat(path + ".lock"); err != nil {
		t.Fatalf("lock file of a live backup removed: %v", err)
	}
}
