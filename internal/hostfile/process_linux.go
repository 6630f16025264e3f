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

// Running reports whether the process pid runs and, when start is not 0,
// is the one that started at start (ProcessStart). A zombie (state Z:
// exited, not yet reaped by its parent) does not run: it holds no file,
// socket or namespace any more, so what it owned can be cleaned up.
func Running(pid int, start uint64) bool {
	f, err := ProcStat(strconv.Itoa(pid))
	if err != nil || len(f) < 20 || f[0] == "Z" {
		return false
	}
	s, err := strconv.ParseUint(f[19], 10, 64)
	return err == nil && (start == 0 || s == start)
}
