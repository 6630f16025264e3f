//go:build !linux

package kernel

import "github.com/wanlab/wanlab/tc/spec"

// ApplyClasses builds a class tree as kernel qdiscs; Linux only.
func ApplyClasses(t Target, cs *spec.Classes) error { return errOS }
