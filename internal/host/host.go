// Package host holds what every wanlab command that changes the host
// shares: the check of an interface name, the one "interface not found"
// error, and the error type that names the operation and the object that
// failed. State files and locks are package hostfile's.
package host

import (
	"errors"
	"fmt"
	"strings"
)

// MaxIfaceName is IFNAMSIZ-1: the kernel's limit on interface names.
const MaxIfaceName = 15

// CheckIfaceName reports what is wrong with an interface name: empty,
// longer than the kernel allows, or holding a character the kernel
// refuses ('/', ':', white space) or "." and "..".
func CheckIfaceName(n string) error {
	switch {
	case n == "":
		return errors.New("interface name is empty")
	case len(n) > MaxIfaceName:
		return fmt.Errorf("interface %q: name longer than %d bytes", n, MaxIfaceName)
	case strings.ContainsAny(n, "/ \t\n:") || n == "." || n == "..":
		return fmt.Errorf("interface %q: not a valid interface name", n)
	}
	return nil
}

// CheckNetnsName reports what is wrong with a named network namespace's
// name (a file of /run/netns): empty, longer than a file name may be,
// holding '/' or NUL, or "." and "..".
func CheckNetnsName(n string) error {
	switch {
	case n == "":
		return errors.New("namespace name is empty")
	case len(n) > 255:
		return fmt.Errorf("namespace %.20q...: name longer than 255 bytes", n)
	case strings.ContainsAny(n, "/\x00") || n == "." || n == "..":
		return fmt.Errorf("namespace %q: not a valid namespace name", n)
	}
	return nil
}

// ErrNotFound is matched (errors.Is) by every "interface not found" error.
var ErrNotFound = errors.New("not found")

// NotFoundError says an interface (or a TUN) does not exist.
type NotFoundError struct{ Iface string }

func (e *NotFoundError) Error() string { return fmt.Sprintf("interface %q: not found", e.Iface) }

// Is makes a NotFoundError match ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// OpError is a failed operation on one object of the host ("apply qdisc"
// on "eth0", "write sysctl" on "net/ipv4/ip_forward"): its text is one line,
// "op object: cause", and it wraps the cause for errors.Is and errors.As.
type OpError struct {
	Op     string
	Object string
	Err    error
}

func (e *OpError) Error() string {
	if e.Object == "" {
		return e.Op + ": " + e.Err.Error()
	}
	return e.Op + " " + e.Object + ": " + e.Err.Error()
}

func (e *OpError) Unwrap() error { return e.Err }

// The host directories of every wanlab command, in one place. RunDir holds
// what lasts as long as the processes that made it (state journals, locks,
// sockets, credentials; a reboot empties it), each command in its own
// subdirectory or by its own file names; LibDir what must outlive a reboot
// (the tuner's backup of host sysctls); CacheDir what is fetched once (the
// reference VM's kernel).
const (
	RunDir   = "/run/wanlab"
	LibDir   = "/var/lib/wanlab"
	CacheDir = "/var/cache/wanlab"
)

// PrivilegeError is an error that already says which privilege it lacks,
// so that a caller up the stack adds none (errors.As): Err followed by
// Hint in parentheses ("needs root or CAP_NET_ADMIN"), or Msg, a whole
// line of its own, matching Err (errors.Is).
type PrivilegeError struct {
	Err       error
	Hint, Msg string
}

func (e *PrivilegeError) Error() string {
	if e.Msg != "" {
		return e.Msg
	}
	return e.Err.Error() + " (" + e.Hint + ")"
}
func (e *PrivilegeError) Unwrap() error { return e.Err }
