package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Sysctl reads and writes sysctls below a root directory: /proc/sys on a
// live system (ProcSys), a fixture tree in tests. The values under
// /proc/sys/net belong to the network namespace of the thread that opens
// the file, so callers run inside nsrun.Do to reach another namespace.
type Sysctl struct {
	Root string
}

// ProcSys is the live /proc/sys.
var ProcSys = Sysctl{Root: "/proc/sys"}

// Path maps a key to its file: a dotted key ("net.ipv4.tcp_rmem") as
// sysctl(8) writes it, or a path relative to the root
// ("net/ipv4/conf/eth0.100/forwarding", for names that hold dots).
func (s Sysctl) Path(key string) string {
	if !strings.Contains(key, "/") {
		key = strings.ReplaceAll(key, ".", "/")
	}
	return filepath.Join(s.Root, filepath.FromSlash(key))
}

// ReadRaw returns the file's bytes exactly as the kernel prints them
// (tabs, trailing newline), which is what a backup must keep.
func (s Sysctl) ReadRaw(key string) ([]byte, error) {
	b, err := os.ReadFile(s.Path(key))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return b, nil
}

// Read returns the value with runs of whitespace collapsed to one space
// and no trailing newline ("4096 131072 6291456").
func (s Sysctl) Read(key string) (string, error) {
	b, err := s.ReadRaw(key)
	if err != nil {
		return "", err
	}
	return strings.Join(strings.Fields(string(b)), " "), nil
}

// Exists reports whether the key is present (some are absent inside a
// network namespace, e.g. net.ipv4.tcp_mem and net.core.default_qdisc).
func (s Sysctl) Exists(key string) bool {
	_, err := os.Stat(s.Path(key))
	return err == nil
}

// Write stores value with a single write(2), as sysctl -w does; the kernel
// parses the whole buffer at once (tabs and spaces both separate fields).
func (s Sysctl) Write(key string, value []byte) error {
	f, err := os.OpenFile(s.Path(key), os.O_WRONLY|os.O_TRUNC, 0)
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

// Glob lists the keys (paths relative to the root) matching pattern.
func (s Sysctl) Glob(pattern string) ([]string, error) {
	m, err := filepath.Glob(filepath.Join(s.Root, pattern))
	var out []string
	for _, p := range m {
		r, _ := filepath.Rel(s.Root, p)
		out = append(out, filepath.ToSlash(r))
	}
	return out, err
}
