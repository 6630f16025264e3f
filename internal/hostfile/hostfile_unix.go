//go:build unix

package hostfile

import (
	"os"
	"syscall"
)

const oNoFollow = syscall.O_NOFOLLOW

func owner(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// Lock is an exclusive flock on a lock file that its holder may remove.
type Lock struct {
	f    *os.File
	path string
}

// LockFile takes an exclusive flock on path (created 0600 if missing,
// never through a symbolic link), waiting for another holder unless
// nonBlocking. A holder may unlink the file on release (Unlock(true)), so
// after the lock is granted the file is checked to still be the one at
// path; if it was unlinked meanwhile, the lock starts over on the new one.
func LockFile(path string, nonBlocking bool) (*Lock, error) {
	how := syscall.LOCK_EX
	if nonBlocking {
		how |= syscall.LOCK_NB
	}
	for {
		f, err := OpenLock(path)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), how); err != nil {
			f.Close()
			return nil, err
		}
		var held, now syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &held) == nil && syscall.Stat(path, &now) == nil &&
			held.Dev == now.Dev && held.Ino == now.Ino {
			return &Lock{f: f, path: path}, nil
		}
		f.Close()
	}
}

// Unlock releases the lock; with remove it first unlinks the lock file
// (while still holding it, so no one else holds a lock on that file).
func (l *Lock) Unlock(remove bool) error {
	if l == nil || l.f == nil {
		return nil
	}
	var err error
	if remove {
		if rerr := os.Remove(l.path); rerr != nil && !os.IsNotExist(rerr) {
			err = rerr
		}
	}
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

// File is the open lock file, for writing the holder's pid into it.
func (l *Lock) File() *os.File { return l.f }

const oNonBlock = syscall.O_NONBLOCK
