package pair

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/traffic"
	"github.com/wanlab/wanlab/tuner/sockopt"
	"github.com/wanlab/wanlab/units"
)

// The traffic between two VMs runs inside the guests, as
// wanlab's own hidden commands run by the VM's agent (wanlab vm serve,
// download, rr, sysctl). Each takes its configuration as one JSON argument
// (serve a traffic.ServerConfig, rr a traffic.RRConfig) and prints its
// result as JSON on stdout.

// GuestDownload configures `wanlab vm download`.
type GuestDownload struct {
	Server  netip.AddrPort  `json:"server"`
	Size    units.Size      `json:"size_bytes"`
	Sockopt sockopt.Options `json:"sockopt"`
	// Progress writes one JSON Progress line to stderr every
	// ProgressEvery (default 250 ms) and one at the last byte.
	Progress      bool          `json:"progress,omitempty"`
	ProgressEvery time.Duration `json:"progress_every_ns,omitempty"`
}

// serveReady is the line a foreground server writes once it listens.
const serveReady = "ready"

// GuestServeStart starts the server of `wanlab vm serve` in the
// background (a new session, so it outlives the command) and prints its
// PID once it listens: the agent runs one command at a time and waits for
// each, so the server must not be that command.
func GuestServeStart(ctx context.Context, config string, stdout io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logf, err := os.CreateTemp("", "wanlab-serve-*.log")
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(self, "vm", "serve", "--foreground", config)
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("vm serve: %w", err)
	}
	line, rerr := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != serveReady {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b, _ := os.ReadFile(logf.Name())
		return fmt.Errorf("vm serve: server did not start (%v): %s", rerr, strings.TrimSpace(string(b)))
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	_, err = fmt.Fprintln(stdout, pid)
	return err
}

// GuestServeForeground runs the server in the foreground until SIGTERM, writing
// serveReady to stdout once it listens (and closing stdout).
func GuestServeForeground(ctx context.Context, config string) error {
	var c traffic.ServerConfig
	if err := json.Unmarshal([]byte(config), &c); err != nil {
		return fmt.Errorf("vm serve: config: %w", err)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	srv, err := traffic.StartServer(ctx, netns.None(), c)
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Println(serveReady)
	os.Stdout.Close()
	<-ctx.Done()
	return nil
}

// GuestDownloadRun runs `wanlab vm download`: the download with the
// server's TCP_INFO asked over a second connection, printed as JSON.
func GuestDownloadRun(ctx context.Context, config string, stdout, stderr io.Writer) error {
	var c GuestDownload
	if err := json.Unmarshal([]byte(config), &c); err != nil {
		return fmt.Errorf("vm download: config: %w", err)
	}
	dc := traffic.DownloadConfig{Server: c.Server, Size: c.Size, Sockopt: c.Sockopt, AskPeer: true, ProgressEvery: c.ProgressEvery}
	if c.Progress {
		enc := json.NewEncoder(stderr)
		dc.Progress = func(p traffic.Progress) { _ = enc.Encode(p) }
	}
	dl, err := traffic.Download(ctx, netns.None(), dc)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(dl)
}

// GuestRRRun runs `wanlab vm rr` and prints its RRResult as JSON.
func GuestRRRun(ctx context.Context, config string, stdout io.Writer) error {
	var c traffic.RRConfig
	if err := json.Unmarshal([]byte(config), &c); err != nil {
		return fmt.Errorf("vm rr: config: %w", err)
	}
	rr, err := traffic.RequestResponse(ctx, netns.None(), c)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(rr)
}

// GuestSysctl runs `wanlab vm sysctl`: it prints as one JSON object the
// values of keys and of the keys of set, as they were before, then writes
// set ("KEY=VALUE"). A key the kernel lacks is printed as null.
func GuestSysctl(keys, set []string, stdout io.Writer) error {
	if len(set) > 0 && !inGuest() {
		return fmt.Errorf("vm sysctl --set: %w", errNotGuest)
	}
	want := map[string]string{}
	for _, kv := range set {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("vm sysctl: %q: want KEY=VALUE", kv)
		}
		want[k] = v
		keys = append(keys, k)
	}
	before := map[string]*string{}
	for _, k := range keys {
		b, err := host.ProcSys.ReadRaw(k)
		switch {
		case err == nil:
			s := strings.TrimSpace(string(b))
			before[k] = &s
		case errors.Is(err, os.ErrNotExist):
			before[k] = nil
		default:
			return fmt.Errorf("vm sysctl: %w", err)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if err := host.ProcSys.Write(k, []byte(want[k])); err != nil {
			return fmt.Errorf("vm sysctl %s=%q: %w", k, want[k], err)
		}
	}
	return json.NewEncoder(stdout).Encode(before)
}

// guestOffloads are the offloads `wanlab vm offload` reads and sets, on
// (1) or off (0); gsoMaxSegs, the most segments of one GSO packet, it
// reads and sets too: TCP builds GSO packets whatever the NIC's gso says
// (always on since Linux 4.19, segmented after the qdiscs), so only this
// bounds what a qdisc is handed.
var guestOffloads = map[string]lab.Offload{"tso": lab.OffloadTSO, "gso": lab.OffloadGSO, "gro": lab.OffloadGRO}

const gsoMaxSegs = "gso_max_segs"

// GuestOffload runs `wanlab vm offload [--set NAME=VALUE]... IFACE`: it
// prints the interface's TSO, GSO and GRO states (1 on, 0 off) and its
// gso_max_segs as JSON ({"tso": 1, ..., "gso_max_segs": 65535}), then
// sets the --set ones, as `ethtool -K IFACE NAME off` and `ip link set
// IFACE gso_max_segs N` would.
func GuestOffload(iface string, set []string, stdout io.Writer) error {
	if len(set) > 0 && !inGuest() {
		return fmt.Errorf("vm offload --set: %w", errNotGuest)
	}
	want := map[string]int{}
	for _, kv := range set {
		k, v, ok := strings.Cut(kv, "=")
		_, known := guestOffloads[k]
		switch {
		case ok && known && (v == "on" || v == "off"):
			want[k] = map[string]int{"on": 1, "off": 0}[v]
		case ok && k == gsoMaxSegs:
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 65535 {
				return fmt.Errorf("vm offload: %q: want gso_max_segs=1-65535", kv)
			}
			want[k] = n
		default:
			return fmt.Errorf("vm offload: %q: want tso, gso or gro =on or =off, or gso_max_segs=N", kv)
		}
	}
	before := map[string]int{}
	for name, o := range guestOffloads {
		on, err := lab.Offloaded(netns.None(), iface, o)
		if err != nil {
			return fmt.Errorf("vm offload: %w", err)
		}
		before[name] = map[bool]int{true: 1, false: 0}[on]
	}
	link, err := netlink.LinkByName(iface)
	if err != nil {
		return fmt.Errorf("vm offload: %s: %w", iface, err)
	}
	before[gsoMaxSegs] = int(link.Attrs().GSOMaxSegs)
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if k == gsoMaxSegs {
			err = setGSOMaxSegs(link, want[k])
		} else {
			err = lab.SetOffload(netns.None(), iface, guestOffloads[k], want[k] == 1)
		}
		if err != nil {
			return fmt.Errorf("vm offload %s: %s=%d: %w", iface, k, want[k], err)
		}
	}
	return json.NewEncoder(stdout).Encode(before)
}

// GuestStop runs `wanlab vm stop PID`: SIGTERM, then SIGKILL after 10 s,
// and returns once the process is gone or a zombie (the agent, PID 1,
// does not reap what it did not start).
func GuestStop(pid int) error {
	if !inGuest() {
		return fmt.Errorf("vm stop: %w", errNotGuest)
	}
	gone := func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		i := bytes.LastIndexByte(b, ')')
		return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return fmt.Errorf("vm stop %d: %w", pid, err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGKILL, 0} {
		deadline := time.Now().Add(10 * time.Second)
		for !gone() {
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond) // no event tells a process's end to a non-parent
		}
		if gone() {
			return nil
		}
		if sig != 0 {
			_ = syscall.Kill(pid, sig)
		}
	}
	return fmt.Errorf("vm stop %d: still running after SIGKILL", pid)
}

// errNotGuest refuses a guest command that changes the system outside a
// VM of lab/vm, where it would change this host instead.
var errNotGuest = errors.New("runs only inside a wanlab VM (PID 1 is `wanlab vm agent`)")

// inGuest reports whether PID 1 is the VM's agent.
func inGuest() bool {
	b, err := os.ReadFile("/proc/1/cmdline")
	return err == nil && bytes.HasSuffix(b, []byte("\x00vm\x00agent\x00"))
}
