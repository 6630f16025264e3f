//go:build !linux

package kernel

import (
	"fmt"
	"runtime"

	"github.com/wanlab/wanlab/tc/spec"
)

var errOS = fmt.Errorf("kernel qdiscs: not supported on %s (Linux tc only)", runtime.GOOS)

// Apply configures im as the kernel's qdiscs; Linux only.
func Apply(t Target, im spec.Impairment) error { return errOS }

// Show reads the kernel's qdisc chain back; Linux only.
func Show(t Target) (string, error) { return "", errOS }

// Clear restores the replaced qdiscs; Linux only.
func Clear(t Target) error { return errOS }

// Stats returns the chain's counters; Linux only.
func Stats(t Target) ([]StageStats, error) { return nil, errOS }
