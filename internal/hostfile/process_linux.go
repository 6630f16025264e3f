package hostfile

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcessStart reads a process's start time in clock ticks since boot
// (field 22 of /proc/PID/stat; the command name in field 2 may contain
// spaces and parentheses, so fields are counted after its closing one).
// A PID and its start time name one process even after the PID is reused.
func ProcessStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	f := strings.Fields(s[i+1:])
	// After ")" come fields 3, 4, ...; field 22 is f[19].
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	return strconv.ParseUint(f[19], 10, 64)
}
