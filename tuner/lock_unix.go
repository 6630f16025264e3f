//go:build unix

package tuner

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/wanlab/wanlab/internal/hostfile"
)

// lockBackup takes an exclusive flock next to the backup file, so two
// applies (or an apply and a revert) on one namespace never interleave
// their reads of the previous values and their writes. Unlocking removes
// the lock file when no backup is left to guard (after a revert, or an
// apply that changed nothing), so lock files do not pile up.
func lockBackup(path string) (unlock func(), err error) {
	return lockBackupFile(path, false)
}

// errLocked is tryLockBackup's answer when another process holds the lock.
var errLocked = errors.New("locked by another process")

// tryLockBackup is lockBackup without waiting.
func tryLockBackup(path string) (unlock func(), err error) {
	return lockBackupFile(path, true)
}

func lockBackupFile(path string, try bool) (unlock func(), err error) {
	l, err := hostfile.LockFile(path+".lock", try)
	if try && errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, errLocked
	}
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_, serr := os.Lstat(path)
		l.Unlock(errors.Is(serr, os.ErrNotExist))
	}, nil
}
