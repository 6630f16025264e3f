// Package hostfile creates the files a privileged wanlab process writes on
// the host (state journals, locks, credentials, backups) so that no other
// local user can redirect them: directories are checked to belong to the
// process and to be writable by it alone, and no call follows a symbolic
// link at the final path component.
//
// A user who could create entries in a state directory could plant a link
// named like the next state file and make root write through it; the checks
// here refuse such a directory instead of writing into it.
package hostfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrUnsafeDir is matched (errors.Is) by the error for a directory that
// another user could write to or that is a symbolic link.
var ErrUnsafeDir = errors.New("unsafe directory")

// DirMode is the mode of directories this package creates: the owner
// writes, everyone may traverse to a file they know the name of (a
// control socket shared with a group), nobody else may list or create.
const DirMode os.FileMode = 0o711

// Dir creates dir (and missing parents) and checks that dir itself is a
// real directory, owned by this process's effective user, that no group or
// other user can write to, and that every directory above it belongs to
// root or to this user and is writable by no one else (or sticky, as
// /tmp): a directory another user could rename or replace anywhere on the
// way would let them swap dir for one of theirs.
func Dir(dir string) error {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	return CheckDir(dir)
}

// CheckDir is Dir without creating anything.
func CheckDir(dir string) error {
	if err := checkDir(dir); err != nil {
		return err
	}
	return checkAncestors(dir)
}

// checkAncestors checks the directories above dir (after resolving links:
// a link on the way is as safe as the directories it leads through).
func checkAncestors(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return err
	}
	for p := real; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if uid, ok := owner(fi); ok && uid != 0 && uid != os.Geteuid() {
			return fmt.Errorf("%s: %w: %s above it is owned by uid %d", dir, ErrUnsafeDir, p, uid)
		}
		if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
			return fmt.Errorf("%s: %w: %s above it is writable by other users (mode %04o)", dir, ErrUnsafeDir, p, fi.Mode().Perm())
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

func checkDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("%s: %w: it is a symbolic link", dir, ErrUnsafeDir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory", dir)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s: %w: writable by other users (mode %04o)", dir, ErrUnsafeDir, fi.Mode().Perm())
	}
	if uid, ok := owner(fi); ok && uid != os.Geteuid() {
		return fmt.Errorf("%s: %w: owned by uid %d, not by this process (uid %d)", dir, ErrUnsafeDir, uid, os.Geteuid())
	}
	return nil
}

// OpenLock opens (creating it 0600 if missing) the lock file at path for
// flock, refusing a symbolic link there.
func OpenLock(path string) (*os.File, error) {
	if err := Dir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|oNoFollow, 0o600)
}

// WriteJSON replaces path by v as indented JSON, as WriteAtomic does with
// mode 0600 (a state file, a backup); a failed write is named "what PATH".
func WriteJSON(path string, v any, what string) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := WriteAtomic(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	return nil
}

// WriteAtomic replaces path by a file of mode perm holding data: written to
// a new file of a random name in the same directory (O_EXCL), synced, then
// renamed over path, and the directory synced, so a crash leaves either the
// old or the new content and a link planted at path is replaced, never
// followed.
func WriteAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := Dir(dir); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	perr := f.Chmod(perm)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, perr, serr, cerr); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// CreateExclusive creates a new file at path (mode perm) that must not
// exist yet, not even as a dangling link.
func CreateExclusive(path string, perm os.FileMode) (*os.File, error) {
	if err := Dir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, perm)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
