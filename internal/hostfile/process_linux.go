package hostfile

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcStat reads the fields of /proc/PID/stat (PID a number or "self")
// after the command name, which is in parentheses and may hold spaces and
// parentheses itself: f[0] is field 3 (the state), f[i] field i+3.
func ProcStat(pid string) ([]string, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%s/stat: no command field", pid)
	}
	return strings.Fields(s[i+1:]), nil
}

// ProcessStart reads a process's start time in clock ticks since boot
// (field 22 of /proc/PID/stat). A PID and its start time name one process
// even after the PID is reused.
func ProcessStart(pid int) (uint64, error) {
	f, err := ProcStat(strconv.Itoa(pid))
	if err != nil {
		return 0, err
	}
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	return strconv.ParseUint(f[19], 10, 64)
}
