// Package kernel configures a wanlab spec as the kernel's own qdisc tree
// (netem and tbf, chained root first as in "tc qdisc add ... root handle
// 1: netem ...; tc qdisc add ... parent 1:1 handle 10: tbf ..."), reads it
// back in the same canonical spec form, and restores what it replaced, so
// the userspace proxy can be compared with the kernel. Everything goes
// through netlink; the netem and tbf options are encoded by hand exactly
// as iproute2's tc encodes them.
package kernel

import (
	"errors"
	"fmt"
	"strings"
)

// DefaultStateDir is where Apply records what it replaced.
const DefaultStateDir = "/run/wanlab"

// Target names the interface to configure.
type Target struct {
	Iface    string
	Netns    string // "" = the current network namespace
	StateDir string // default DefaultStateDir
}

// ErrNotSupported marks a kind of qdisc the running kernel does not have.
var ErrNotSupported = errors.New("not supported by this kernel")

// NoKindError says which qdisc kind is missing.
type NoKindError struct{ Kind string }

func (e *NoKindError) Error() string {
	return fmt.Sprintf("kernel has no %s qdisc (sch_%s not available): nothing changed", e.Kind, e.Kind)
}

// Unwrap lets callers test errors.Is(err, ErrNotSupported).
func (e *NoKindError) Unwrap() error { return ErrNotSupported }

// NoInterfaceError says the interface does not exist.
type NoInterfaceError struct{ Iface string }

func (e *NoInterfaceError) Error() string { return fmt.Sprintf("interface %q: not found", e.Iface) }

func (t Target) withDefaults() (Target, error) {
	if t.Iface == "" || len(t.Iface) > 15 || strings.ContainsAny(t.Iface, "/ \t:") {
		return t, fmt.Errorf("interface %q: not a valid interface name", t.Iface)
	}
	if strings.ContainsAny(t.Netns, "/@") {
		return t, fmt.Errorf("netns %q: not a valid name", t.Netns)
	}
	if t.StateDir == "" {
		t.StateDir = DefaultStateDir
	}
	return t, nil
}

func (t Target) recordPath() string {
	p := t.StateDir + "/kernel-"
	if t.Netns != "" {
		p += t.Netns + "@"
	}
	return p + t.Iface + ".json"
}
