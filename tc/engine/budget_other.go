//go:build !linux

package engine

import "github.com/wanlab/wanlab/units"

func physicalMemory() units.Size { return 0 }
