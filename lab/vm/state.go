package vm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"syscall"
	"time"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/internal/hostfile"
)

// stateFile is what a VM records before its engine starts (and again with
// the engine's PID once it runs): enough for Cleanup, in another process
// after a crash, to tell a dead owner from a live one and to stop its qemu
// or linux.uml (QemuPID names either; Accel is the engine).
type stateFile struct {
	ID          string    `json:"id"`
	PID         int       `json:"pid"`
	Start       uint64    `json:"pid_start_ticks"`
	QemuPID     int       `json:"qemu_pid,omitempty"`
	QemuStart   uint64    `json:"qemu_start_ticks,omitempty"`
	Created     time.Time `json:"created"`
	Accel       Accel     `json:"accel"`
	Netns       string    `json:"netns,omitempty"`
	Taps        []string  `json:"taps,omitempty"`
	ControlSock string    `json:"control_socket"`
	// ShmDir holds a UML guest's memory file.
	ShmDir string `json:"shm_dir,omitempty"`

	dir string
}

// idPattern matches the directory names Boot gives VMs.
var idPattern = regexp.MustCompile(`^[0-9a-f]{6}$`)

func (st *stateFile) path() string { return filepath.Join(st.dir, "state.json") }

func (st *stateFile) save() error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(st.path(), append(b, '\n')); err != nil {
		return fmt.Errorf("vm state: %w", err)
	}
	return nil
}

// readState reads and validates dir's state file. dir (and every
// directory above it) must be one only root can write to, and each field
// Cleanup acts on must be what Boot writes: the ID of dir's name, the
// control socket inside dir, valid namespace and TAP names. A tampered
// file is refused naming the field; nothing is done with it.
func readState(dir string) (*stateFile, error) {
	if err := hostfile.CheckDir(dir); err != nil {
		return nil, fmt.Errorf("vm state: %w", err)
	}
	path := filepath.Join(dir, "state.json")
	if _, err := os.Lstat(path); err != nil {
		return nil, err
	}
	b, err := hostfile.ReadInput(path, 1<<20)
	if err != nil {
		return nil, fmt.Errorf("vm state: %w", err)
	}
	st, err := parseState(b, dir)
	if err != nil {
		return nil, fmt.Errorf("vm state %s: %w", path, err)
	}
	return st, nil
}

func parseState(b []byte, dir string) (*stateFile, error) {
	st := &stateFile{dir: dir}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, err
	}
	switch {
	case !idPattern.MatchString(st.ID) || st.ID != filepath.Base(dir):
		return nil, fmt.Errorf("id %q: not this directory's", st.ID)
	case st.ControlSock != filepath.Join(dir, "ctl.sock"):
		return nil, fmt.Errorf("control_socket %q: not %s", st.ControlSock, filepath.Join(dir, "ctl.sock"))
	case st.PID < 0 || st.QemuPID < 0:
		return nil, errors.New("pid: negative")
	}
	if err := host.CheckNetnsName(st.Netns); st.Netns != "" && err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	for i, tap := range st.Taps {
		if err := host.CheckIfaceName(tap); err != nil {
			return nil, fmt.Errorf("taps[%d]: %w", i, err)
		}
	}
	return st, nil
}

func (st *stateFile) engineProcess() string {
	if st.Accel == EngineUML {
		return "linux.uml"
	}
	return "qemu"
}

func alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	s, err := hostfile.ProcessStart(pid)
	return err == nil && (start == 0 || s == start)
}

// Cleanup stops the qemu of every VM whose owning process is gone and
// removes its state directory; VMs of running processes are left alone. A
// state directory without a state file (a crash between the two) counts as
// dead once it is a minute old. It returns what it removed.
func Cleanup() ([]string, error) {
	removed, err := cleanupIn(DefaultStateDir)
	return append(removed, sweepMemoryDirs(DefaultStateDir, "/dev/shm")...), err
}

func cleanupIn(stateDir string) ([]string, error) {
	ents, err := os.ReadDir(stateDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("vm cleanup: %w", err)
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		if !e.IsDir() || !idPattern.MatchString(e.Name()) {
			continue
		}
		dir := filepath.Join(stateDir, e.Name())
		st, err := readState(dir)
		if errors.Is(err, fs.ErrNotExist) {
			if info, ierr := e.Info(); ierr != nil || time.Since(info.ModTime()) < time.Minute {
				continue // being created
			}
		} else if err != nil {
			errs = append(errs, err)
			continue
		} else if alive(st.PID, st.Start) {
			continue
		}
		if st != nil && alive(st.QemuPID, st.QemuStart) {
			if err := syscall.Kill(st.QemuPID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("vm %s: kill %s %d: %w", e.Name(), st.engineProcess(), st.QemuPID, err))
				continue
			}
			removed = append(removed, fmt.Sprintf("%s %d of vm %s", st.engineProcess(), st.QemuPID, e.Name()))
		}
		if st != nil {
			r, err := cleanupLeftovers(st)
			removed = append(removed, r...)
			if err != nil {
				errs = append(errs, err)
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("vm cleanup: %w", err))
			continue
		}
		removed = append(removed, "state "+dir)
	}
	sort.Strings(removed)
	return removed, errors.Join(errs...)
}
