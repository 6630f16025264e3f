package hostfile

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/wanlab/wanlab/units"
)

// ErrInput is matched (errors.Is) by the error for a file a command was
// told to read that is not a regular file or is larger than its limit.
var ErrInput = errors.New("unusable input file")

// The limits on the files commands read by name. Specs, class trees,
// schedules and configs are text a person writes: MaxInput. Traces list
// one line per 1500-byte opportunity, about 8 MB per hour at 10 Mbit/s:
// MaxTrace.
const (
	MaxInput units.Size = 64 << 20
	MaxTrace units.Size = 256 << 20
)

// ReadInput reads the file at path, which must be a regular file of at
// most limit bytes: a FIFO, a device (/dev/zero), a directory or a larger
// file is refused with an error naming path and the limit (ErrInput),
// before anything much is read. Opening never blocks (a FIFO with no
// writer).
func ReadInput(path string, limit units.Size) ([]byte, error) {
	f, err := OpenInput(path, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > int64(limit) {
		return nil, fmt.Errorf("%s: %w: larger than the %s limit", path, ErrInput, limit.Human())
	}
	return b, nil
}

// OpenInput opens path for reading under ReadInput's rules; a caller that
// streams the file should still read at most limit bytes of it (a file
// may grow after the check).
func OpenInput(path string, limit units.Size) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|oNonBlock, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w: not a regular file (%s), and the limit is %s", path, ErrInput, kind(fi.Mode()), limit.Human())
	}
	if fi.Size() > int64(limit) {
		f.Close()
		return nil, fmt.Errorf("%s: %w: %s is larger than the %s limit", path, ErrInput, units.Size(fi.Size()).Human(), limit.Human())
	}
	return f, nil
}

func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeSocket != 0:
		return "a socket"
	}
	return "mode " + m.String()
}
