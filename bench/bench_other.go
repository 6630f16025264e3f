//go:build !linux

package bench

import (
	"context"
	"errors"
	"runtime"
)

var errOS = errors.New("bench: needs Linux network namespaces; not supported on " + runtime.GOOS)

// Accuracy needs Linux.
func Accuracy(context.Context, Config) (*Report, error) { return nil, errOS }

// Forward needs Linux.
func Forward(context.Context, Config) (*Report, error) { return nil, errOS }

// Sweep needs Linux.
func Sweep(context.Context, Config) (*Report, error) { return nil, errOS }
