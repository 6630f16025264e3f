// Package tuner reads, explains, plans and changes the Linux sysctls that
// bound one TCP connection's throughput (socket buffer limits, window
// scaling, congestion control), per network namespace, and records what it
// changed so a revert restores the previous values byte for byte.
package tuner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ProcSys reads and writes sysctls below a root directory: /proc/sys on a
// live system, a fixture tree in tests. The values under /proc/sys/net
// belong to the network namespace of the thread that opens the file, so
// run calls inside nsrun.Do to read or change another namespace.
type ProcSys struct {
	Root string
}

// Host is the live /proc/sys.
var Host = ProcSys{Root: "/proc/sys"}

// Path maps a dotted key ("net.ipv4.tcp_rmem") to its file.
func (p ProcSys) Path(key string) string {
	return filepath.Join(p.Root, filepath.FromSlash(strings.ReplaceAll(key, ".", "/")))
}

// ReadRaw returns the file's bytes exactly as the kernel prints them
// (tabs, trailing newline), which is what a backup must keep.
func (p ProcSys) ReadRaw(key string) ([]byte, error) {
	b, err := os.ReadFile(p.Path(key))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return b, nil
}

// Read returns the value with runs of whitespace collapsed to one space
// and no trailing newline ("4096 131072 6291456").
func (p ProcSys) Read(key string) (string, error) {
	b, err := p.ReadRaw(key)
	if err != nil {
		return "", err
	}
	return normalize(string(b)), nil
}

// Exists reports whether the key is present (some are absent inside a
// network namespace, e.g. net.ipv4.tcp_mem and net.core.default_qdisc).
func (p ProcSys) Exists(key string) bool {
	_, err := os.Stat(p.Path(key))
	return err == nil
}

// Write stores value with a single write(2), as sysctl -w does; the kernel
// parses the whole buffer at once (tabs and spaces both separate fields).
func (p ProcSys) Write(key string, value []byte) error {
	f, err := os.OpenFile(p.Path(key), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	_, werr := f.Write(value)
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("write %s = %q: %w", key, strings.TrimSpace(string(value)), werr)
	}
	if cerr != nil {
		return fmt.Errorf("write %s = %q: %w", key, strings.TrimSpace(string(value)), cerr)
	}
	return nil
}

func normalize(s string) string { return strings.Join(strings.Fields(s), " ") }

// isNotExist reports a key missing from the tree.
func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }
