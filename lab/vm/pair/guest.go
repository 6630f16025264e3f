package pair

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/lab/traffic"
	"github.com/wanlab/wanlab/lab/vm"
	"github.com/wanlab/wanlab/tuner"
)

// Shell runs a shell script in a guest; a non-zero exit is an error
// with the script's stderr.
func Shell(ctx context.Context, g *vm.VM, script string) error {
	_, err := Output(ctx, g, "sh", "-c", script)
	return err
}

// Output runs argv in a guest and returns its stdout; a non-zero exit
// is an error with the command's stderr.
func Output(ctx context.Context, g *vm.VM, argv ...string) ([]byte, error) {
	r, err := g.Run(ctx, argv...)
	if err != nil {
		return nil, err
	}
	if r.ExitCode != 0 {
		return r.Stdout, &guestError{argv: argv, code: r.ExitCode, stderr: strings.TrimSpace(string(r.Stderr))}
	}
	return r.Stdout, nil
}

type guestError struct {
	argv   []string
	code   int
	stderr string
}

func (e *guestError) Error() string {
	name := strings.Join(e.argv[:min(3, len(e.argv))], " ")
	return fmt.Sprintf("in the VM: %s: exit %d: %s", name, e.code, e.stderr)
}

// SetSysctls writes kv in a guest and returns the values before, for
// RestoreSysctls.
func SetSysctls(ctx context.Context, g *vm.VM, kv map[string]string) (map[string]*string, error) {
	if len(kv) == 0 {
		return nil, nil
	}
	argv := []string{"wanlab", "vm", "sysctl"}
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		argv = append(argv, "--set", k+"="+kv[k])
	}
	return vmSysctl(ctx, g, argv)
}

// vmSysctl runs argv, a `wanlab vm sysctl`, in g and returns the values it
// printed.
func vmSysctl(ctx context.Context, g *vm.VM, argv []string) (map[string]*string, error) {
	out, err := Output(ctx, g, argv...)
	if err != nil {
		return nil, err
	}
	vals := map[string]*string{}
	if err := json.Unmarshal(out, &vals); err != nil {
		return nil, fmt.Errorf("vm sysctl: %w", err)
	}
	return vals, nil
}

// RestoreSysctls writes back what SetSysctls found.
func RestoreSysctls(ctx context.Context, g *vm.VM, before map[string]*string) error {
	kv := map[string]string{}
	for k, v := range before {
		if v != nil {
			kv[k] = *v
		}
	}
	_, err := SetSysctls(ctx, g, kv)
	return err
}

// SetOffloads sets offloads of a guest's interface ("tso": 0, as
// `ethtool -K`; "gso_max_segs": 1, as `ip link set`) and returns their
// states before, all of them, for SetOffloads again to restore.
func SetOffloads(ctx context.Context, g *vm.VM, iface string, want map[string]int) (map[string]int, error) {
	argv := []string{"wanlab", "vm", "offload"}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		v := strconv.Itoa(want[k])
		if k != gsoMaxSegs {
			v = map[bool]string{true: "on", false: "off"}[want[k] != 0]
		}
		argv = append(argv, "--set", k+"="+v)
	}
	argv = append(argv, iface) // flags before the argument
	out, err := Output(ctx, g, argv...)
	if err != nil {
		return nil, err
	}
	before := map[string]int{}
	if err := json.Unmarshal(out, &before); err != nil {
		return nil, fmt.Errorf("vm offload: %w", err)
	}
	return before, nil
}

// Snapshot reads the tuner's keys inside a guest into a snapshot of
// that kernel, a whole host (not a namespace).
func Snapshot(ctx context.Context, g *vm.VM) (*tuner.Snapshot, error) {
	argv := []string{"wanlab", "vm", "sysctl", "kernel.osrelease"}
	for _, k := range tuner.Keys {
		argv = append(argv, k.Name)
	}
	vals, err := vmSysctl(ctx, g, argv)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "wanlab-guest-sysctl-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tree := host.Sysctl{Root: dir}
	for k, v := range vals {
		if v == nil {
			continue
		}
		p := tree.Path(k)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, []byte(*v+"\n"), 0o644); err != nil {
			return nil, err
		}
	}
	return tuner.ReadSnapshot(tree, "")
}

// Server is the traffic server running in the server VM.
type Server struct {
	g    *vm.VM
	pid  int
	Addr netip.AddrPort
}

// StartServer starts the traffic server of `wanlab vm serve` in g and
// returns once it listens.
func StartServer(ctx context.Context, g *vm.VM, c traffic.ServerConfig) (*Server, error) {
	b, _ := json.Marshal(c)
	out, err := Output(ctx, g, "wanlab", "vm", "serve", string(b))
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return nil, fmt.Errorf("server: PID %q: %w", out, err)
	}
	return &Server{g: g, pid: pid, Addr: c.Listen}, nil
}

// Stop ends the server and returns once it is gone, so that the next
// experiment on the same VM can listen on its port.
func (s *Server) Stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := Output(ctx, s.g, "wanlab", "vm", "stop", strconv.Itoa(s.pid))
	return err
}

// progressWriter turns the guest's JSON progress lines into calls of fn.
type progressWriter struct {
	fn   func(traffic.Progress)
	buf  bytes.Buffer
	rest bytes.Buffer // lines that are not progress: the command's errors
}

func (w *progressWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadBytes('\n')
		if err != nil {
			w.buf.Write(line) // incomplete: wait for the rest
			return len(p), nil
		}
		var pr traffic.Progress
		if json.Unmarshal(line, &pr) == nil && pr.Total > 0 {
			if w.fn != nil {
				w.fn(pr)
			}
			continue
		}
		w.rest.Write(line)
	}
}

// Download runs the download in the client VM.
func Download(ctx context.Context, g *vm.VM, c GuestDownload, progress func(traffic.Progress)) (*traffic.DownloadResult, error) {
	c.Progress = progress != nil
	b, _ := json.Marshal(c)
	var out bytes.Buffer
	pw := &progressWriter{fn: progress}
	code, err := g.Stream(ctx, &out, pw, "wanlab", "vm", "download", string(b))
	if err != nil {
		return nil, fmt.Errorf("download in the client VM: %w", err)
	}
	if code != 0 {
		return nil, fmt.Errorf("download in the client VM: exit %d: %s", code, strings.TrimSpace(pw.rest.String()+pw.buf.String()))
	}
	var dl traffic.DownloadResult
	if err := json.Unmarshal(out.Bytes(), &dl); err != nil {
		return nil, fmt.Errorf("download in the client VM: result: %w", err)
	}
	return &dl, nil
}

// RR runs the request/response load in the client VM.
func RR(ctx context.Context, g *vm.VM, c traffic.RRConfig) (*traffic.RRResult, error) {
	b, _ := json.Marshal(c)
	out, err := Output(ctx, g, "wanlab", "vm", "rr", string(b))
	if err != nil {
		return nil, fmt.Errorf("request/response in the client VM: %w", err)
	}
	var rr traffic.RRResult
	if err := json.Unmarshal(out, &rr); err != nil {
		return nil, fmt.Errorf("request/response in the client VM: result: %w", err)
	}
	return &rr, nil
}

var pingTime = regexp.MustCompile(`time=([0-9.]+) ms`)

// Ping pings dst n times, 200 ms apart, from a guest (busybox's ping)
// and returns the median round trip (the first echo may also pay for a
// neighbour resolution or a cold path).
func Ping(ctx context.Context, g *vm.VM, dst netip.Addr, n int) (time.Duration, error) {
	out, err := Output(ctx, g, "ping", "-c", strconv.Itoa(n), "-i", "0.2", "-W", "5", dst.String())
	if err != nil {
		return 0, fmt.Errorf("ping %s: %w", dst, err)
	}
	rtts := parsePing(out)
	if len(rtts) == 0 {
		return 0, fmt.Errorf("ping %s: no echo in %q", dst, out)
	}
	slices.Sort(rtts)
	return rtts[len(rtts)/2], nil
}

// parsePing returns the round trips of ping's "time=X ms" lines.
func parsePing(out []byte) []time.Duration {
	var rtts []time.Duration
	for _, m := range pingTime.FindAllSubmatch(out, -1) {
		f, err := strconv.ParseFloat(string(m[1]), 64)
		if err == nil && f >= 0 && f < 1e9 {
			rtts = append(rtts, time.Duration(f*float64(time.Millisecond)))
		}
	}
	return rtts
}
