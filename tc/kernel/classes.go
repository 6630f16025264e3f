package kernel

import "strings"

// MissingError lists the parts of a class tree the kernel cannot build.
type MissingError struct{ Parts []string }

func (e *MissingError) Error() string {
	return "kernel cannot build this class tree: " + strings.Join(e.Parts, "; ") + ": nothing changed"
}

// Unwrap lets callers test errors.Is(err, ErrNotSupported).
func (e *MissingError) Unwrap() error { return ErrNotSupported }
