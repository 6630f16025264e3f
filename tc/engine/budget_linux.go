package engine

import (
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/units"
)

func physicalMemory() units.Size {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return units.Size(uint64(si.Totalram) * uint64(si.Unit))
}
