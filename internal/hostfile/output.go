package hostfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrExists is matched (errors.Is) by the error for an output path that
// already exists (a file, a directory or a link) and may be replaced only
// when the user says so (--force).
var ErrExists = errors.New("already exists")

// CreateOutput creates the file a user named for a command's output (a
// capture, a report, a plot), mode perm. It never writes through what is
// at path: without force path must not exist, not even as a dangling link
// (O_EXCL|O_NOFOLLOW), else the error names it and matches ErrExists; with
// force a new file of a random name is created in the same directory
// (O_EXCL) and renamed over path at once, so a link or file planted there
// is replaced, never followed or truncated. The caller writes to and closes
// the returned file.
func CreateOutput(path string, perm os.FileMode, force bool) (*os.File, error) {
	if !force {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, perm)
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("%s: %w (--force replaces it)", path, ErrExists)
		}
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%s: %w as a directory", path, ErrExists)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// WriteOutput is CreateOutput writing data and closing the file.
func WriteOutput(path string, data []byte, perm os.FileMode, force bool) error {
	f, err := CreateOutput(path, perm, force)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// OutputDir creates the directory a user named for a command's outputs
// (missing parents and dir itself 0755). An existing dir is used if it is
// one of this user's that no one else can write to (checkDir): the files
// go into it with CreateOutput, which refuses names already there. Any
// other existing dir (another user's, one others can write to) is refused
// (ErrExists) unless force; a symbolic link there is refused even with
// force.
func OutputDir(dir string, force bool) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	err := os.Mkdir(dir, 0o755)
	if err == nil || !errors.Is(err, os.ErrExist) {
		return err
	}
	fi, lerr := os.Lstat(dir)
	switch {
	case lerr != nil:
		return lerr
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%s: %w: it is a symbolic link", dir, ErrUnsafeDir)
	case !fi.IsDir():
		return fmt.Errorf("%s: %w and is not a directory", dir, ErrExists)
	case force:
		return nil
	}
	if err := checkDir(dir); err != nil {
		return fmt.Errorf("%w (%w; --force writes into it)", err, ErrExists)
	}
	return nil
}

// RandomBits is the number of random bits in the name of every directory
// NewOutputDir makes: enough that no one can pre-create the names.
const RandomBits = 64

// NewOutputDir creates a new directory, mode 0700, named prefix followed
// by RandomBits random bits in hex, under parent, and returns its path. A
// name that exists already (planted by someone) is never used: os.Mkdir
// fails on it and another name is drawn.
func NewOutputDir(parent, prefix string) (string, error) {
	var b [RandomBits / 8]byte
	for range 8 {
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		dir := filepath.Join(parent, prefix+hex.EncodeToString(b[:]))
		err := os.Mkdir(dir, 0o700)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("%s: no free name %s<random> after 8 draws", parent, prefix)
}
