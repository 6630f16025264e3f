//go:build !linux

package route

import (
	"fmt"
	"runtime"
)

// Lock is the claim of one proxy on its two interfaces.
type Lock struct{}

// Release gives the interfaces up.
func (l *Lock) Release() error { return nil }

// Applied is the routing set up by Apply.
type Applied struct{}

// Undo restores what Apply changed.
func (a *Applied) Undo() error { return nil }

var errUnsupported = fmt.Errorf("route: not supported on %s (needs Linux policy routing)", runtime.GOOS)

// Acquire claims cfg's interfaces; Linux only.
func Acquire(cfg Config) (*Lock, error) { return nil, errUnsupported }

// Apply steers forwarded traffic through TUNs; Linux only.
func Apply(cfg Config) (*Applied, error) { return nil, errUnsupported }

// Cleanup undoes the state of crashed proxies; Linux only.
func Cleanup(stateDir string) ([]string, error) { return nil, errUnsupported }
