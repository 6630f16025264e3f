// Package experiment runs the seeds' experiment on one machine: it builds
// a client-router-server lab, impairs the router (userspace proxy or
// kernel qdiscs), downloads a generated file (or runs a request/response
// load) while capturing both ends, and turns the captures, the sockets'
// TCP_INFO and the tuner's advice into a summary, JSON and an HTML report.
package experiment

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/wanlab/wanlab/lab/traffic"
	"github.com/wanlab/wanlab/tc/schedule"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/tuner"
	"github.com/wanlab/wanlab/tuner/sockopt"
	"github.com/wanlab/wanlab/units"
)

// Directions of impairment, named from the lab's point of view: to-client
// is what the router sends toward the client (the download's data),
// to-server what it sends toward the server (requests and ACKs).
const (
	ToClient = "to-client"
	ToServer = "to-server"
)

// Config describes one experiment. Zero values take the defaults listed on
// each field; Defaults() is the bare `wanlab experiment`.
type Config struct {
	// Name labels the experiment in the report (a preset name or "custom").
	Name string `json:"name"`
	// Impair holds the spec per direction (ToClient, ToServer) in the
	// proxy's tc syntax; a missing direction is not impaired.
	Impair map[string]string `json:"impair"`
	// Schedule holds, per direction, a schedule (package schedule, its
	// canonical file form) that steps the direction's spec over time
	// through the proxy; Impair holds before its first step.
	Schedule map[string]string `json:"schedule,omitempty"`
	// ServerCmd and ClientCmd make the user's own programs the traffic
	// (owncmd.go): ServerCmd runs in the server namespace for the whole
	// experiment, ClientCmd in the client's instead of the download, the
	// experiment lasting while it runs.
	ServerCmd string `json:"server_cmd,omitempty"`
	ClientCmd string `json:"client_cmd,omitempty"`
	// Kernel applies the specs as qdiscs on the router's veths instead of
	// through the userspace proxy.
	Kernel bool `json:"kernel"`
	// VMs runs the client and the server as VMs (lab/vm) on TAPs of the
	// router namespace instead of namespaces of this host; VMBinary is the
	// static wanlab run inside them (empty: this executable).
	VMs      bool   `json:"vms,omitempty"`
	VMBinary string `json:"-"`
	// VMEngine runs the VMs: "kvm", "uml", "tcg" or "" (auto: KVM when
	// its probe boots, else UML when it can run, else tcg).
	VMEngine string `json:"vm_engine,omitempty"`
	// Proxy runs the proxy even when both specs are empty (to measure
	// its forwarding), instead of plain kernel routing.
	Proxy bool `json:"proxy,omitempty"`
	// Ping sends that many pings from the client to the server, with the
	// impairment in place, before the traffic (VMs only: the guests have
	// busybox's ping); Result.Ping is their median round trip.
	Ping int `json:"ping,omitempty"`
	// Backend is the proxy's device backend ("offload" or "water"; empty:
	// the proxy's default).
	Backend string `json:"backend,omitempty"`
	// Seed seeds the proxy's random stages (0: the proxy's default).
	Seed int64 `json:"seed,omitempty"`

	// Size is the file to download (default 256 MiB).
	Size units.Size `json:"size_bytes"`
	// Requests > 0 runs the request/response load instead of a download:
	// Concurrency connections (default 50), responses of RRBody bytes
	// (default 612) after ThinkTime (default 1 ms).
	Requests    int           `json:"requests,omitempty"`
	Concurrency int           `json:"concurrency,omitempty"`
	RRBody      units.Size    `json:"rr_body_bytes,omitempty"`
	ThinkTime   time.Duration `json:"think_time_ns,omitempty"`
	// Request/response runs leave Nagle's algorithm on at the server (seed
	// 003's nginx with tcp_nodelay off) unless NoNagle keeps TCP_NODELAY.
	NoNagle bool `json:"no_nagle,omitempty"`
	// RequestTimeout bounds each request of the load (0: 5 s).
	RequestTimeout time.Duration `json:"request_timeout_ns,omitempty"`
	// WriteRate > 0 paces the server's writes (a download's data, an
	// answer's body) at that rate, as an application producing its data
	// at that rate does; WritePauses > 0 stops a download's writes that
	// many times, WritePause each, evenly through it (traffic.ServerConfig).
	WriteRate   units.Rate    `json:"write_rate_bps,omitempty"`
	WriteChunk  units.Size    `json:"write_chunk_bytes,omitempty"`
	WritePauses int           `json:"write_pauses,omitempty"`
	WritePause  time.Duration `json:"write_pause_ns,omitempty"`

	// Socket options of the client and the server.
	Client sockopt.Options `json:"client_sockopt"`
	Server sockopt.Options `json:"server_sockopt"`
	// Sysctls written into each host's namespace.
	ClientSysctls map[string]string `json:"client_sysctls,omitempty"`
	ServerSysctls map[string]string `json:"server_sysctls,omitempty"`
	// IPv6 runs over the lab's IPv6 addresses.
	IPv6 bool `json:"ipv6,omitempty"`
	// NoOffload turns TSO, GSO and GRO off on every veth of the lab, so
	// the captures hold wire-sized segments instead of 64 KB
	// super-segments (at a CPU cost).
	NoOffload bool `json:"no_offload,omitempty"`

	// Snaplen of the captures (default 120); MaxCapture bounds each
	// capture file (default 512 MiB).
	Snaplen    int        `json:"snaplen"`
	MaxCapture units.Size `json:"max_capture_bytes"`

	// Out is the output directory; empty: a new directory under the
	// current one, named with hostfile.RandomBits random bits, mode 0700.
	// An existing Out is refused unless Force, which replaces the files
	// the run writes there by rename (never writing through them).
	Out   string `json:"out"`
	Force bool   `json:"force,omitempty"`

	// Args is the command line that ran the experiment (without the
	// program name); the tuner's re-run hint extends it.
	Args []string `json:"args,omitempty"`

	// Progress receives the download's progress, every ProgressEvery
	// (default 250 ms) and at the last byte; Log one line per step.
	Progress      func(traffic.Progress) `json:"-"`
	ProgressEvery time.Duration          `json:"-"`
	Log           io.Writer              `json:"-"`
	// Timeout bounds the traffic phase (default 5 minutes).
	Timeout time.Duration `json:"timeout_ns"`
}

// Defaults is the bare `wanlab experiment`: seed 001 in under a minute, a
// 35 ms round trip and a client whose receive buffer may not grow beyond
// 3 MiB (so its window stops near 1.5 MB, as the seed's did), which caps
// a 256 MiB download near 1.5 MB / 35 ms ≈ 43 MB/s.
func Defaults() Config {
	c, _ := Preset("seed001")
	return c
}

// withDefaults fills in zero fields.
func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = "custom"
	}
	if c.Size == 0 {
		c.Size = 256 * units.MiB
	}
	if c.Requests > 0 {
		if c.Concurrency <= 0 {
			c.Concurrency = 50
		}
		if c.RRBody == 0 {
			c.RRBody = 612
		}
		if c.ThinkTime == 0 {
			c.ThinkTime = time.Millisecond
		}
	}
	if c.Snaplen == 0 {
		c.Snaplen = 120
	}
	if c.MaxCapture == 0 {
		c.MaxCapture = 512 * units.MiB
	}
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Minute
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c
}

// Specs parses the impairment of each direction; a direction without one
// gets an empty spec.
func (c Config) Specs() (map[string]*spec.Spec, error) {
	out := map[string]*spec.Spec{ToClient: spec.Empty(), ToServer: spec.Empty()}
	for _, dir := range slices.Sorted(maps.Keys(c.Impair)) {
		if dir != ToClient && dir != ToServer {
			return nil, fmt.Errorf("impairment direction %q: want %s or %s", dir, ToClient, ToServer)
		}
		s, err := spec.Parse(c.Impair[dir])
		if err != nil {
			return nil, fmt.Errorf("%s spec %q: %w", dir, c.Impair[dir], err)
		}
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("%s spec %q: %w", dir, c.Impair[dir], err)
		}
		out[dir] = s
	}
	return out, nil
}

// Schedules parses the schedule of each direction that has one.
func (c Config) Schedules() (map[string]*schedule.Schedule, error) {
	out := map[string]*schedule.Schedule{}
	for _, dir := range slices.Sorted(maps.Keys(c.Schedule)) {
		if dir != ToClient && dir != ToServer {
			return nil, fmt.Errorf("schedule direction %q: want %s or %s", dir, ToClient, ToServer)
		}
		s, err := schedule.Parse(dir+" schedule", []byte(c.Schedule[dir]), nil)
		if err != nil {
			return nil, err
		}
		out[dir] = s
	}
	if len(out) > 0 && c.Kernel {
		return nil, fmt.Errorf("a schedule steps the proxy's spec: it does not run with the kernel's qdiscs (--kernel)")
	}
	return out, nil
}

// ErrBadSysctl marks a sysctl value refused before anything was built.
var ErrBadSysctl = tuner.ErrInvalid

// CheckSysctls refuses nonsense before a lab is built: for the keys the
// tuner knows, the values it would refuse (min > default > max, values
// outside the kernel's range, host-wide keys a namespace cannot change).
// Other net.* keys are left to the kernel, which names them if it refuses.
func (c Config) CheckSysctls() error {
	for _, h := range []struct {
		name string
		kv   map[string]string
	}{{"client", c.ClientSysctls}, {"server", c.ServerSysctls}} {
		var set []tuner.Assignment
		for _, k := range slices.Sorted(maps.Keys(h.kv)) {
			if !strings.HasPrefix(k, "net.") {
				return fmt.Errorf("%s sysctl %s: %w: only net.* keys exist per namespace", h.name, k, ErrBadSysctl)
			}
			if _, ok := tuner.LookupKey(k); ok {
				set = append(set, tuner.Assignment{Key: k, Value: h.kv[k]})
			}
		}
		if len(set) == 0 {
			continue
		}
		// Validation reads nothing of the lab: the namespace name only
		// selects the per-namespace rules and appears in messages.
		netns := "(lab " + h.name + ")"
		if c.VMs {
			netns = "" // a VM is a whole host: its host-wide keys are its own
		}
		t := &tuner.Tuner{FS: tuner.Host, Netns: netns}
		if _, err := t.Validate(set); err != nil {
			return fmt.Errorf("%s sysctl: %w", h.name, err)
		}
	}
	return nil
}

// AddImpair adds "[to-client=|to-server=]SPEC" to c. Without a direction
// the spec applies to both, as the proxy's --impair does.
func (c *Config) AddImpair(arg string) error {
	dir, s, err := spec.ParseDirectional(arg)
	if err != nil {
		return fmt.Errorf("--impair %q: %w", arg, err)
	}
	text := s.String()
	if c.Impair == nil {
		c.Impair = map[string]string{}
	}
	switch dir {
	case ToClient, ToServer:
		c.Impair[dir] = text
	case "":
		c.Impair[ToClient], c.Impair[ToServer] = text, text
	default:
		return fmt.Errorf("--impair %q: direction %q: want %s= or %s=", arg, dir, ToClient, ToServer)
	}
	return nil
}

// AppendStage adds a stage to one direction's spec (used by the --delay,
// --loss and --rate shortcuts): netem keywords join the first netem stage,
// a tbf stage goes last.
func (c *Config) AppendStage(dir, stage string) {
	if c.Impair == nil {
		c.Impair = map[string]string{}
	}
	cur := strings.TrimSpace(c.Impair[dir])
	switch {
	case cur == "":
		c.Impair[dir] = stage
	case strings.HasPrefix(stage, "tbf"):
		c.Impair[dir] = cur + " | " + stage
	default:
		// netem keywords go into the first stage, before any "|".
		if i := strings.Index(cur, "|"); i >= 0 {
			c.Impair[dir] = strings.TrimSpace(cur[:i]) + " " + stage + " " + cur[i:]
		} else if strings.HasPrefix(cur, "tbf") {
			c.Impair[dir] = stage + " | " + cur
		} else {
			c.Impair[dir] = cur + " " + stage
		}
	}
}
