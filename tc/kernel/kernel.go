// Package kernel configures a wanlab impairment as the kernel's own qdisc
// tree (a pipeline's stages chained root first as in "tc qdisc add ...
// root handle 1: netem ...; tc qdisc add ... parent 1:1 handle 10: tbf
// ...", a class tree as htb classes with those chains as leaves and u32
// filters), reads it back in the same canonical spec form, and restores
// what it replaced, so the userspace proxy can be compared with the
// kernel. Everything goes through netlink; the options are encoded by hand
// exactly as iproute2's tc encodes them.
package kernel

import (
	"errors"
	"fmt"
	"strings"

	"github.com/wanlab/wanlab/internal/host"
)

// DefaultStateDir is where Apply records what it replaced.
const DefaultStateDir = host.RunDir

// Target names the interface to configure.
type Target struct {
	Iface    string
	Netns    string // "" = the current network namespace
	StateDir string // default DefaultStateDir

	anon string // set by resolve for an unnamed namespace other than the process's
}

// ErrNotSupported marks a kind of qdisc the running kernel does not have.
var ErrNotSupported = errors.New("not supported by this kernel")

// NoKindError says which qdisc kind is missing.
type NoKindError struct{ Kind string }

func (e *NoKindError) Error() string {
	return fmt.Sprintf("kernel has no %s qdisc (sch_%s not available): nothing changed", e.Kind, e.Kind)
}

// Unwrap lets callers test errors.Is(err, ErrNotSupported).
func (e *NoKindError) Unwrap() error { return ErrNotSupported }

// NoInterfaceError says the interface does not exist (host's one such
// error: errors.Is(err, host.ErrNotFound)).
type NoInterfaceError = host.NotFoundError

func (t Target) withDefaults() (Target, error) {
	if err := host.CheckIfaceName(t.Iface); err != nil {
		return t, err
	}
	if strings.ContainsAny(t.Netns, "/@") {
		return t, fmt.Errorf("netns %q: not a valid name", t.Netns)
	}
	if t.StateDir == "" {
		t.StateDir = DefaultStateDir
	}
	return t, nil
}

func (t Target) recordPath() string {
	p := t.StateDir + "/kernel-"
	switch {
	case t.Netns != "":
		p += t.Netns + "@"
	case t.anon != "":
		p += t.anon + "@"
	}
	return p + t.Iface + ".json"
}

// Counters are a qdisc's statistics (TCA_STATS2), as "tc -s qdisc" shows them.
type Counters struct {
	Bytes          uint64 `json:"bytes"`
	Packets        uint64 `json:"packets"`
	Drops          uint32 `json:"drops"`
	Overlimits     uint32 `json:"overlimits"`
	Requeues       uint32 `json:"requeues"`
	BacklogBytes   uint32 `json:"backlog_bytes"`
	BacklogPackets uint32 `json:"backlog_packets"`
}

// StageStats are one stage's qdisc and its counters (or a class tree's
// qdisc or class).
type StageStats struct {
	Class    bool   `json:"class,omitempty"`
	Kind     string `json:"kind"`
	Handle   string `json:"handle"`
	Parent   string `json:"parent"`
	Counters `json:"counters"`
}

// TCA_STATS2 nested attributes (include/uapi/linux/gen_stats.h).
const (
	tcaStatsBasic = 1 // struct gnet_stats_basic: u64 bytes, u32 packets
	tcaStatsQueue = 3 // struct gnet_stats_queue: qlen backlog drops requeues overlimits
	tcaStatsPkt64 = 8 // u64 packets, when they do not fit in 32 bits
)

func parseStats2(b []byte) Counters {
	var c Counters
	m, err := parseAttrs(b)
	if err != nil {
		return c
	}
	if v, ok := m[tcaStatsBasic]; ok && len(v) >= 12 {
		c.Bytes = native.Uint64(v)
		c.Packets = uint64(native.Uint32(v[8:]))
	}
	if v, ok := m[tcaStatsPkt64]; ok && len(v) == 8 {
		c.Packets = native.Uint64(v)
	}
	if v, ok := m[tcaStatsQueue]; ok && len(v) >= 20 {
		c.BacklogPackets = native.Uint32(v)
		c.BacklogBytes = native.Uint32(v[4:])
		c.Drops = native.Uint32(v[8:])
		c.Requeues = native.Uint32(v[12:])
		c.Overlimits = native.Uint32(v[16:])
	}
	return c
}
