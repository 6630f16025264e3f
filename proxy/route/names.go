// Package route steers the packets a host forwards between two interfaces
// through a pair of TUN devices, by netlink only: policy rules by incoming
// interface, one routing table per direction and the forwarding sysctls.
// Every change is journalled to a state file before it is made, so Undo,
// or Cleanup after a crash, puts the host back exactly as it was.
package route

import (
	"fmt"
	"hash/fnv"
	"strings"

	hostenv "github.com/wanlab/wanlab/internal/host"
)

// DefaultStateDir is where state and lock files live unless Config says otherwise.
const DefaultStateDir = hostenv.RunDir

// Config says which interfaces to steer and where the TUNs are.
type Config struct {
	Ifaces   [2]string // A, B
	TUNs     [2]string // TUNs[i] carries packets that will LEAVE through Ifaces[i]; zero = TUNNames(Ifaces)
	StateDir string    // default DefaultStateDir
	Netns    string    // "" = current namespace; else a named netns (ip netns) to configure in

	// anonNetns is the inode of the current namespace when Netns is "" and
	// that namespace is neither the host's nor a named one (found by Apply):
	// it keeps the files of proxies in different namespaces apart.
	anonNetns uint64

	// hooks are the tests' handles on Apply; the zero value is production.
	hooks applyHooks
}

// applyHooks let a test fail, leave out or vary Apply's changes.
type applyHooks struct {
	// beforeChange runs after a change is journalled and before it is
	// made; an error makes Apply fail there.
	beforeChange func(c change) error
	// skipChange leaves a planned change out: the test that shows each
	// setting is needed.
	skipChange func(c change) bool
	// noForceForwarding takes the path of kernels before 6.17 (no
	// per-interface IPv6 force_forwarding).
	noForceForwarding bool
	// sysctlReadOnly makes /proc/sys read-only, as in a container.
	sysctlReadOnly bool
}

// maxIfaceName is IFNAMSIZ-1: the kernel's limit on interface names.
const maxIfaceName = hostenv.MaxIfaceName

// TUNNames returns the TUN device names the proxy uses for ifaces: "wl-"
// followed by the interface name, or for names too long for that, its first
// four bytes and a hash of the whole name. The result is deterministic, at
// most 15 bytes, and distinct for distinct interface names.
func TUNNames(ifaces [2]string) [2]string {
	return [2]string{tunName(ifaces[0]), tunName(ifaces[1])}
}

func tunName(iface string) string {
	if len("wl-"+iface) <= maxIfaceName {
		return "wl-" + iface
	}
	h := fnv.New32a()
	h.Write([]byte(iface))
	// "wl" + 4 bytes + 8 hex digits + "~" = 15 bytes; "~" cannot follow
	// 4 bytes in a short name's form, which keeps the two forms apart.
	return fmt.Sprintf("wl%s~%08x", iface[:4], h.Sum32())[:maxIfaceName]
}

// NotFoundError says an interface (or TUN) does not exist (host's one
// such error: errors.Is(err, hostenv.ErrNotFound)).
type NotFoundError = hostenv.NotFoundError

// withDefaults validates cfg and fills in defaults.
func (cfg Config) withDefaults() (Config, error) {
	for _, n := range cfg.Ifaces {
		if err := checkIfaceName(n); err != nil {
			return cfg, err
		}
	}
	if cfg.Ifaces[0] == cfg.Ifaces[1] {
		return cfg, fmt.Errorf("interfaces must differ (both are %q)", cfg.Ifaces[0])
	}
	if cfg.TUNs == [2]string{} {
		cfg.TUNs = TUNNames(cfg.Ifaces)
	}
	for _, n := range cfg.TUNs {
		if err := checkIfaceName(n); err != nil {
			return cfg, fmt.Errorf("TUN: %w", err)
		}
	}
	if cfg.StateDir == "" {
		cfg.StateDir = DefaultStateDir
	}
	if strings.ContainsAny(cfg.Netns, "/@") {
		return cfg, fmt.Errorf("netns %q: name must not contain '/' or '@'", cfg.Netns)
	}
	return cfg, nil
}

func checkIfaceName(n string) error { return hostenv.CheckIfaceName(n) }

// filePrefix keeps the files of proxies in different named namespaces apart.
func (cfg Config) filePrefix() string {
	switch {
	case cfg.Netns != "":
		return cfg.Netns + "@"
	case cfg.anonNetns != 0:
		return fmt.Sprintf("netns%d@", cfg.anonNetns)
	}
	return ""
}

// StatePath is the state file of a proxy with this configuration.
func (cfg Config) StatePath() string {
	cfg, _ = cfg.withDefaults()
	return cfg.StateDir + "/" + cfg.filePrefix() + cfg.Ifaces[0] + "-" + cfg.Ifaces[1] + stateSuffix
}

const (
	stateSuffix = ".route.json"
	lockSuffix  = ".lock"
)

func (cfg Config) lockPath(iface string) string {
	return cfg.StateDir + "/" + cfg.filePrefix() + iface + lockSuffix
}
