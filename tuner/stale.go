package tuner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/wanlab/wanlab/internal/host"
)

const (
	netnsBackupPrefix = "tune-backup-netns-"
	backupSuffix      = ".json"
	lockSuffix        = ".lock"
)

// RemoveStale removes the backups and lock files that dir holds for
// network namespaces that no longer exist (exists reports whether one
// does). A namespace's sysctls die with it, so its backup has nothing left
// to restore. Files locked by a running apply or revert are left alone.
// It returns the paths removed.
func RemoveStale(dir string, exists func(netns string) bool) ([]string, error) {
	if dir == "" {
		dir = host.RunDir
	}
	matches, err := filepath.Glob(filepath.Join(dir, netnsBackupPrefix+"*"))
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var removed []string
	var errs []error
	for _, m := range matches {
		name := filepath.Base(m)
		ns := strings.TrimPrefix(name, netnsBackupPrefix)
		ns = strings.TrimSuffix(ns, lockSuffix)
		if !strings.HasSuffix(ns, backupSuffix) {
			continue
		}
		ns = strings.TrimSuffix(ns, backupSuffix)
		if ns == "" || seen[ns] || exists(ns) {
			continue
		}
		seen[ns] = true
		backup := filepath.Join(dir, netnsBackupPrefix+ns+backupSuffix)
		gone, err := removeUnlocked(backup)
		if err != nil {
			errs = append(errs, err)
		}
		removed = append(removed, gone...)
	}
	return removed, errors.Join(errs...)
}

// removeUnlocked removes backup and its lock file unless another process
// holds the lock.
func removeUnlocked(backup string) ([]string, error) {
	unlock, err := tryLockBackup(backup)
	if err != nil {
		if errors.Is(err, errLocked) {
			return nil, nil
		}
		return nil, err
	}
	var removed []string
	if err := os.Remove(backup); err == nil {
		removed = append(removed, backup)
	} else if !errors.Is(err, os.ErrNotExist) {
		unlock()
		return nil, fmt.Errorf("removing stale backup: %w", err)
	}
	unlock() // no backup left: removes the lock file
	if _, err := os.Lstat(backup + lockSuffix); errors.Is(err, os.ErrNotExist) {
		removed = append(removed, backup+lockSuffix)
	}
	return removed, nil
}
