package route

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	hostenv "github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/internal/hostfile"
)

// state is the journal written to the state file. It is rewritten (atomically,
// by rename) BEFORE every change, so that after a crash at any instant the
// file lists every change that may have been made, with the value to restore.
type state struct {
	Version int       `json:"version"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Netns   string    `json:"netns,omitempty"`
	// NetnsInode identifies the namespace configured, so that undo refuses
	// to run in another one; AnonNetns is set for an unnamed namespace.
	NetnsInode uint64    `json:"netns_inode,omitempty"`
	AnonNetns  uint64    `json:"anon_netns,omitempty"`
	Ifaces     [2]string `json:"ifaces"`
	TUNs       [2]string `json:"tuns"`
	Changes    []change  `json:"changes"`
}

const stateVersion = 1

// Change kinds.
const (
	kindSysctl = "sysctl" // write Value to /proc/sys/Path; undo writes Prev
	kindMTU    = "mtu"    // set Link's MTU to MTU; undo sets PrevMTU
	kindUp     = "up"     // set Link up; undo sets it down
	// set Link's IPv6 addr_gen_mode to Mode by netlink; undo sets
	// PrevMode. The sysctl of the same name would, on undo, generate
	// link-local addresses as a side effect.
	kindAddrGenMode = "addr_gen_mode"
	kindRoute       = "route" // add a default route in Table via Link; undo deletes it
	kindRule        = "rule"  // add "iif Iif lookup Table" at Priority; undo deletes it
)

// change is one journalled modification and what undoes it.
type change struct {
	Kind string `json:"kind"`

	// sysctl: Path is relative to /proc/sys ("net/ipv4/conf/eth0/forwarding").
	// An empty Value records a value that another write changes as a side
	// effect (net.ipv6.conf.all.forwarding rewrites every interface's), so
	// that undo restores it too.
	Path  string `json:"path,omitempty"`
	Prev  string `json:"prev,omitempty"`
	Value string `json:"value,omitempty"`

	Link    string `json:"link,omitempty"`
	PrevMTU int    `json:"prev_mtu,omitempty"`
	MTU     int    `json:"mtu,omitempty"`
	// Pointers, so that mode 0 (eui64) is written out.
	PrevMode *int `json:"prev_mode,omitempty"`
	Mode     *int `json:"mode,omitempty"`

	Family   int    `json:"family,omitempty"` // 4 or 6
	Table    int    `json:"table,omitempty"`
	Priority int    `json:"priority,omitempty"`
	Iif      string `json:"iif,omitempty"`
}

func (c change) String() string {
	switch c.Kind {
	case kindSysctl:
		if c.Value == "" {
			return fmt.Sprintf("sysctl %s (was %s)", c.Path, c.Prev)
		}
		return fmt.Sprintf("sysctl %s=%s (was %s)", c.Path, c.Value, c.Prev)
	case kindMTU:
		return fmt.Sprintf("mtu of %s %d (was %d)", c.Link, c.MTU, c.PrevMTU)
	case kindUp:
		return fmt.Sprintf("set %s up", c.Link)
	case kindAddrGenMode:
		return fmt.Sprintf("ipv6 addr_gen_mode of %s %d (was %d)", c.Link, deref(c.Mode), deref(c.PrevMode))
	case kindRoute:
		return fmt.Sprintf("ipv%d default route via %s in table %d", c.Family, c.Link, c.Table)
	case kindRule:
		return fmt.Sprintf("ipv%d rule %d: iif %s lookup %d", c.Family, c.Priority, c.Iif, c.Table)
	}
	return c.Kind
}

// save writes st to path atomically and durably: a crash leaves either the
// old or the new journal, never a torn one.
func (st *state) save(path string) error { return hostfile.WriteJSON(path, st, "state file") }

// maxStateBytes bounds a state file: a journal of a few dozen changes.
const maxStateBytes = 1 << 20

func loadState(path string) (*state, error) {
	if err := hostfile.CheckDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	b, err := hostfile.ReadInput(path, maxStateBytes)
	if err != nil {
		return nil, fmt.Errorf("state file: %w", err)
	}
	st, err := parseState(b)
	if err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	return st, nil
}

// parseState decodes and validates a state file: every field undo uses
// to write to the host must be one this package writes (a sysctl of
// planChanges under net/ipv4|ipv6/conf/IFACE/, valid interface and
// namespace names), so a tampered file is refused, naming the field,
// before anything is undone.
func parseState(b []byte) (*state, error) {
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, err
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("version %d, want %d", st.Version, stateVersion)
	}
	if err := st.validate(); err != nil {
		return nil, err
	}
	return &st, nil
}

func (st *state) validate() error {
	for i, n := range st.Ifaces {
		if err := hostenv.CheckIfaceName(n); err != nil {
			return fmt.Errorf("ifaces[%d]: %w", i, err)
		}
	}
	for i, n := range st.TUNs {
		if err := hostenv.CheckIfaceName(n); n != "" && err != nil {
			return fmt.Errorf("tuns[%d]: %w", i, err)
		}
	}
	if err := hostenv.CheckNetnsName(st.Netns); st.Netns != "" && err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	for i, c := range st.Changes {
		if err := c.validate(); err != nil {
			return fmt.Errorf("changes[%d]: %w", i, err)
		}
	}
	return nil
}

// journalledSysctls are the per-interface sysctls planChanges records.
var journalledSysctls = map[string]bool{"forwarding": true, "rp_filter": true, "disable_ipv6": true, "force_forwarding": true}

func (c change) validate() error {
	link := func(field, n string) error {
		if err := hostenv.CheckIfaceName(n); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		return nil
	}
	switch c.Kind {
	case kindSysctl:
		// net/ipv4/conf/IFACE/KEY, IFACE a name, "all" or "default".
		p := strings.Split(c.Path, "/")
		if len(p) != 5 || p[0] != "net" || (p[1] != "ipv4" && p[1] != "ipv6") || p[2] != "conf" ||
			hostenv.CheckIfaceName(p[3]) != nil || !journalledSysctls[p[4]] {
			return fmt.Errorf("path %q: not a sysctl a proxy sets", c.Path)
		}
		for _, v := range [][2]string{{"prev", c.Prev}, {"value", c.Value}} {
			if _, err := strconv.Atoi(v[1]); v[1] != "" && err != nil {
				return fmt.Errorf("%s %q: not a number", v[0], v[1])
			}
		}
	case kindMTU:
		if c.PrevMTU < 68 || c.PrevMTU > 65535 {
			return fmt.Errorf("prev_mtu %d: not an MTU", c.PrevMTU)
		}
		return link("link", c.Link)
	case kindUp:
		return link("link", c.Link)
	case kindAddrGenMode:
		if c.PrevMode == nil || *c.PrevMode < 0 || *c.PrevMode > 3 {
			return errors.New("prev_mode: not an addr_gen_mode")
		}
		return link("link", c.Link)
	case kindRoute, kindRule:
		if c.Family != 4 && c.Family != 6 {
			return fmt.Errorf("family %d: want 4 or 6", c.Family)
		}
		if c.Kind == kindRoute {
			return link("link", c.Link)
		}
		return link("iif", c.Iif)
	default:
		return fmt.Errorf("kind %q: not a change a proxy makes", c.Kind)
	}
	return nil
}

// stateFiles lists the state files in dir.
func stateFiles(dir string) ([]string, error) {
	m, err := filepath.Glob(filepath.Join(dir, "*"+stateSuffix))
	if err != nil {
		return nil, err
	}
	return m, nil
}

func ensureDir(dir string) error {
	if err := hostfile.Dir(dir); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	return nil
}

// ErrInUse is matched (errors.Is) by the error of Acquire or Apply on
// interfaces that a live proxy holds.
var ErrInUse = errors.New("interfaces locked by a live proxy")

// lockedError is such an error; its text names the interface and the pid.
type lockedError string

func (e lockedError) Error() string        { return string(e) }
func (e lockedError) Is(target error) bool { return target == ErrInUse }

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
