//go:build linux

package nsrun

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// stopGrace is how long processes left in a namespace get to end after
// SIGTERM before SIGKILL.
const stopGrace = 2 * time.Second

// stopProcesses ends the processes whose network namespace is the named
// one (nginx, iperf3 -s -D, a shell's command): SIGTERM, then SIGKILL to
// those still there after stopGrace. A process left inside would keep the
// namespace alive after its name is gone, unreachable. It returns how many
// it signalled. This process is never one of them.
func stopProcesses(name string) (int, error) {
	var target syscall.Stat_t
	if err := syscall.Stat(filepath.Join(Dir, name), &target); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	}
	pids := inNamespace(target.Dev, target.Ino)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(stopGrace)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for len(pids) > 0 && time.Now().Before(deadline) {
		<-tick.C
		pids = alive(pids, target.Dev, target.Ino)
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return len(pids), nil
}

// inNamespace lists the processes whose network namespace is (dev, ino).
func inNamespace(dev uint64, ino uint64) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if inNS(pid, dev, ino) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func inNS(pid int, dev, ino uint64) bool {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/"+strconv.Itoa(pid)+"/ns/net", &st); err != nil {
		return false
	}
	return st.Dev == dev && st.Ino == ino
}

// alive keeps the pids still in the namespace.
func alive(pids []int, dev, ino uint64) []int {
	out := pids[:0]
	for _, pid := range pids {
		if inNS(pid, dev, ino) {
			out = append(out, pid)
		}
	}
	return out
}
