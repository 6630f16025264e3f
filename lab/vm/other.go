//go:build !linux

package vm

import (
	"context"
	"io"
	"time"
)

// VM is a running guest; on this system none can be booted.
type VM struct {
	ID       string
	Engine   Engine
	BootTime time.Duration
	Hello    Hello
}

// Prepare is not supported on this system.
func Prepare(context.Context, string, io.Writer) (*Prepared, error) { return nil, ErrNotSupported }

// Boot is not supported on this system.
func Boot(context.Context, Config) (*VM, error) { return nil, ErrNotSupported }

// ProbeAccel is not supported on this system.
func ProbeAccel(context.Context, string) (Engine, string, error) { return "", "", ErrNotSupported }

// Agent is not supported on this system.
func Agent() error { return ErrNotSupported }

// Run is not supported on this system.
func (v *VM) Run(context.Context, ...string) (Result, error) { return Result{}, ErrNotSupported }

// Stream is not supported on this system.
func (v *VM) Stream(context.Context, io.Writer, io.Writer, ...string) (int, error) {
	return -1, ErrNotSupported
}

// Close does nothing on this system.
func (v *VM) Close() error { return nil }

// ChooseEngine is not supported on this system.
func ChooseEngine(context.Context, string) (Engine, string, error) { return "", "", ErrNotSupported }

// UMLUsable is not supported on this system.
func UMLUsable() error { return ErrNotSupported }

// ExecUML is not supported on this system.
func ExecUML([]string) error { return ErrNotSupported }

func cleanupLeftovers(*stateFile) ([]string, error) { return nil, nil }

// UMLMaxMTU is the largest MTU a UML guest's NIC takes.
const UMLMaxMTU = 1500

func sweepMemoryDirs(string, string) []string { return nil }
