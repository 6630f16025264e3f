package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/proxy"
	"github.com/wanlab/wanlab/proxy/control"
	"github.com/wanlab/wanlab/proxy/device"
	"github.com/wanlab/wanlab/tc/kernel"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// env is a lab and the directory for its state files.
type env struct {
	lab      *lab.Lab
	stateDir string
	cfg      Config
}

func newEnv(ctx context.Context, cfg Config, lc lab.Config) (*env, error) {
	l, err := lab.New(ctx, lc)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(StateDir, l.ID)
	if err := hostfile.Dir(dir); err != nil {
		l.Close()
		return nil, fmt.Errorf("bench state: %w", err)
	}
	return &env{lab: l, stateDir: dir, cfg: cfg}, nil
}

func (e *env) Close() error {
	err := e.lab.Close()
	if rerr := os.RemoveAll(e.stateDir); err == nil {
		err = rerr
	}
	return err
}

// ifaces are the router's egress interfaces toward the server and the
// client.
func (e *env) toServer() string { return e.lab.Router.ServerLink }
func (e *env) toClient() string { return e.lab.Router.ClientLink }

// path is one way of forwarding (and impairing) through the router.
type path interface {
	Name() string
	// Set impairs traffic toward the server and toward the client ("" =
	// none). An error wrapping kernel.ErrNotSupported means the path
	// cannot do it here.
	Set(toServer, toClient string) error
	// Usage is the CPU time and resident memory of the forwarder so far,
	// with what they include.
	Usage() (cpu time.Duration, rss units.Size, scope string, err error)
	Close() error
}

// openPath starts a path on the lab's router.
func (e *env) openPath(ctx context.Context, name string) (path, error) {
	switch name {
	case PathRouting:
		return routingPath{}, nil
	case PathKernel:
		return &kernelPath{e: e}, nil
	case PathProxyOffload, PathProxyOffload1, PathProxyOffloadCPU, PathProxyWater:
		backend := device.Offload
		if name == PathProxyWater {
			backend = device.Water
		}
		queues := 0 // proxy.DefaultQueues
		switch name {
		case PathProxyOffload1:
			queues = 1
		case PathProxyOffloadCPU:
			queues = min(runtime.NumCPU(), device.MaxQueues)
		}
		if len(e.cfg.ProxyExec) > 0 {
			return e.startProxyProcess(ctx, name, backend, queues)
		}
		p, err := proxy.Start(ctx, proxy.Config{
			Ifaces:     [2]string{e.toServer(), e.toClient()},
			Backend:    backend,
			Queues:     queues,
			Seed:       1,
			HasSeed:    true,
			Netns:      e.lab.Router.NS,
			StateDir:   e.stateDir,
			Realtime:   e.cfg.Realtime,
			LowLatency: e.cfg.LowLatency,
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return &proxyPath{name: name, p: p, e: e}, nil
	}
	return nil, fmt.Errorf("path %q: want routing, proxy-offload, proxy-offload-1q, proxy-offload-cpuq, proxy-water or kernel", name)
}

type routingPath struct{}

func (routingPath) Name() string { return PathRouting }
func (routingPath) Set(toServer, toClient string) error {
	if toServer != "" || toClient != "" {
		return errors.New("routing: cannot impair")
	}
	return nil
}
func (routingPath) Usage() (time.Duration, units.Size, string, error) {
	return 0, 0, "kernel (softirq, not attributed)", nil
}
func (routingPath) Close() error { return nil }

// proxyPath is the proxy running in this process.
type proxyPath struct {
	name string
	p    *proxy.Proxy
	e    *env
}

func (pp *proxyPath) Name() string { return pp.name }
func (pp *proxyPath) Set(toServer, toClient string) error {
	if err := pp.p.SetSpec(pp.e.toServer(), toServer); err != nil {
		return err
	}
	return pp.p.SetSpec(pp.e.toClient(), toClient)
}
func (pp *proxyPath) Usage() (time.Duration, units.Size, string, error) {
	cpu, rss, err := processUsage("self")
	return cpu, rss, "whole process (proxy in-process, traffic generators included)", err
}
func (pp *proxyPath) Close() error { return pp.p.Close() }

// latenessTaker is what proxyPath measures beyond the path interface: how far
// the proxy's writes toward the server ran behind their departures since
// the previous call.
type latenessTaker interface {
	TakeLateness() proxy.Lateness
}

func (pp *proxyPath) TakeLateness() proxy.Lateness { return pp.p.TakeLateness()[0] }

// procPath is the proxy as a child process, driven over its control API.
type procPath struct {
	name string
	cmd  *exec.Cmd
	ctl  *control.Client
	e    *env
	done chan error
}

func (e *env) startProxyProcess(ctx context.Context, name, backend string, queues int) (path, error) {
	sock := filepath.Join(e.stateDir, name+".sock")
	args := append([]string{}, e.cfg.ProxyExec[1:]...)
	args = append(args, "--iface", e.toServer(), "--iface", e.toClient(), "--backend", backend, "--queues", strconv.Itoa(queues),
		"--netns", e.lab.Router.NS, "--control", "unix:"+sock, "--seed", "1", "--state-dir", e.stateDir)
	if e.cfg.Realtime {
		args = append(args, "--realtime")
	}
	if e.cfg.LowLatency != "" {
		args = append(args, "--low-latency", string(e.cfg.LowLatency))
	}
	cmd := exec.Command(e.cfg.ProxyExec[0], args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start %s: %w", name, e.cfg.ProxyExec[0], err)
	}
	pp := &procPath{name: name, cmd: cmd, ctl: control.Dial("unix:" + sock), e: e, done: make(chan error, 1)}
	go func() { pp.done <- cmd.Wait() }()
	// Ready once the control API answers; fail at once if the process
	// exits first.
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := pp.ctl.Specs(); err == nil {
			return pp, nil
		}
		select {
		case err := <-pp.done:
			return nil, fmt.Errorf("%s: proxy exited before it was ready (%v): %s", name, err, strings.TrimSpace(stderr.String()))
		case <-deadline:
			pp.Close()
			return nil, fmt.Errorf("%s: proxy control API not answering after 10 s", name)
		case <-ctx.Done():
			pp.Close()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

func (pp *procPath) Name() string { return pp.name }
func (pp *procPath) Set(toServer, toClient string) error {
	if err := pp.ctl.Set(pp.e.toServer(), toServer); err != nil {
		return err
	}
	return pp.ctl.Set(pp.e.toClient(), toClient)
}
func (pp *procPath) Usage() (time.Duration, units.Size, string, error) {
	cpu, rss, err := processUsage(strconv.Itoa(pp.cmd.Process.Pid))
	return cpu, rss, "proxy process", err
}
func (pp *procPath) Close() error {
	_ = pp.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-pp.done:
		return nil
	case <-time.After(10 * time.Second):
		_ = pp.cmd.Process.Kill()
		<-pp.done
		return fmt.Errorf("%s: proxy did not stop on SIGTERM, killed", pp.name)
	}
}

// kernelPath puts the specs as qdiscs on the router's egress veths.
type kernelPath struct {
	e       *env
	applied []kernel.Target
}

func (kp *kernelPath) Name() string { return PathKernel }
func (kp *kernelPath) Set(toServer, toClient string) error {
	if err := kp.clear(); err != nil {
		return err
	}
	for _, s := range []struct{ iface, text string }{{kp.e.toServer(), toServer}, {kp.e.toClient(), toClient}} {
		if s.text == "" {
			continue
		}
		parsed, err := spec.Parse(s.text)
		if err != nil {
			return err
		}
		t := kernel.Target{Iface: s.iface, Netns: kp.e.lab.Router.NS, StateDir: kp.e.stateDir}
		if err := kernel.Apply(t, spec.PipelineImpairment(parsed)); err != nil {
			return errors.Join(fmt.Errorf("kernel %s: %w", s.iface, err), kp.clear())
		}
		kp.applied = append(kp.applied, t)
	}
	return nil
}
func (kp *kernelPath) clear() error {
	var errs []error
	for _, t := range kp.applied {
		if err := kernel.Clear(t); err != nil {
			errs = append(errs, err)
		}
	}
	kp.applied = nil
	return errors.Join(errs...)
}
func (kp *kernelPath) Usage() (time.Duration, units.Size, string, error) {
	return 0, 0, "kernel (softirq, not attributed)", nil
}
func (kp *kernelPath) Close() error { return kp.clear() }

// naReason turns a path's refusal into the text of an n/a cell.
func naReason(err error) string {
	var nk *kernel.NoKindError
	if errors.As(err, &nk) {
		return "n/a: kernel has no " + nk.Kind
	}
	if errors.Is(err, kernel.ErrNotSupported) {
		return "n/a: " + err.Error()
	}
	return ""
}

// processUsage reads utime+stime and VmRSS of /proc/<pid>.
func processUsage(pid string) (time.Duration, units.Size, error) {
	f, err := hostfile.ProcStat(pid) // utime is field 14, stime 15
	if err != nil {
		return 0, 0, err
	}
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("/proc/%s/stat: %d fields", pid, len(f))
	}
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	const ticks = 100 // USER_HZ
	cpu := time.Duration(ut+st) * time.Second / ticks
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return cpu, 0, err
	}
	var rss units.Size
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			rss = units.Size(kb) * 1024
		}
	}
	return cpu, rss, nil
}

// loadAverage is the first three fields of /proc/loadavg: the bench's
// timing figures are only as good as the machine is idle.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// finish stamps the run's duration and the machine's load into r.
func (r *Report) finish(began time.Time, loadAtStart string) error {
	r.Duration = time.Since(began)
	r.Notes = append(r.Notes, fmt.Sprintf("load average (1, 5, 15 min) at start %s, at end %s on %d CPUs", loadAtStart, loadAverage(), runtime.NumCPU()))
	return r.Finite()
}
