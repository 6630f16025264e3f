package hostfile

import (
	"errors"
	"io/fs"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Name returns a file name as it is safe to print: unchanged when it is
// valid UTF-8 of printable characters, quoted as %q quotes it otherwise,
// so that a name holding terminal escapes (a capture called
// "\x1b]0;pwned\a.pcap") shows its bytes instead of acting on the
// terminal that prints it.
func Name(path string) string {
	for _, r := range path {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return strconv.Quote(path)
		}
	}
	return path
}

// PathError is err, an error of an operation on path, with path printed
// as Name prints it (an *fs.PathError prints it raw): the same operation
// and cause, so errors.Is and errors.As see what they saw in err.
func PathError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == path {
		return &fs.PathError{Op: pe.Op, Path: Name(path), Err: pe.Err}
	}
	return err
}
