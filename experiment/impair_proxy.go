package experiment

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/proxy"
	"github.com/wanlab/wanlab/proxy/tap"
	"github.com/wanlab/wanlab/tc/schedule"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// StateDir holds, per lab, the state files of the proxy's routing and of
// kernel qdiscs an experiment set up (StateDir/<lab id>/). Everything they
// describe lives inside the lab's router namespace, so removing the lab
// removes it; Cleanup then removes the directory.
const StateDir = host.RunDir + "/experiment"

// tapLimit bounds the proxy's own capture.
const tapLimit = 256 * units.MiB

// proxyImpairment is the userspace proxy running in the router namespace.
type proxyImpairment struct {
	p       *proxy.Proxy
	tap     *tap.Tap
	tapFile *os.File
	tapPath string
	ifaces  [2]string // [ToClient egress, ToServer egress]
	specs   map[string]*spec.Spec
	backend string

	once  sync.Once
	stats *ImpairStats
	err   error
}

func startProxy(ctx context.Context, l *lab.Lab, cfg Config, specs map[string]*spec.Spec, out string) (impairment, error) {
	pi := &proxyImpairment{
		ifaces:  [2]string{egress(l, ToClient), egress(l, ToServer)},
		specs:   specs,
		backend: cfg.Backend,
		tapPath: filepath.Join(out, "proxy.pcapng"),
	}
	f, err := hostfile.CreateOutput(pi.tapPath, 0o600, cfg.Force)
	if err != nil {
		return nil, fmt.Errorf("proxy tap: %w", err)
	}
	pi.tapFile = f
	// The tap keeps what the end captures keep (headers), so it costs the
	// forwarding path little.
	if pi.tap, err = tap.New(f, tapLimit, pi.ifaces[:], tap.WithSnapLen(cfg.Snaplen)); err != nil {
		f.Close()
		return nil, fmt.Errorf("proxy tap: %w", err)
	}
	pc := proxy.Config{
		Ifaces:   pi.ifaces,
		Specs:    [2]spec.Impairment{spec.PipelineImpairment(specs[ToClient]), spec.PipelineImpairment(specs[ToServer])},
		Backend:  cfg.Backend,
		Seed:     uint64(cfg.Seed),
		HasSeed:  cfg.Seed != 0,
		Netns:    l.Router.NS,
		StateDir: filepath.Join(StateDir, l.ID),
		Tap:      pi.tap,
	}
	scheds, err := cfg.Schedules()
	if err != nil {
		pi.closeTap()
		return nil, err
	}
	pc.Schedules = [2]*schedule.Schedule{scheds[ToClient], scheds[ToServer]}
	if err := hostfile.Dir(pc.StateDir); err != nil {
		pi.closeTap()
		return nil, fmt.Errorf("proxy state: %w", err)
	}
	if pi.p, err = proxy.Start(ctx, pc); err != nil {
		pi.closeTap()
		os.RemoveAll(pc.StateDir)
		return nil, fmt.Errorf("proxy: %w", err)
	}
	if pi.backend == "" {
		pi.backend = "offload"
	}
	return pi, nil
}

func (pi *proxyImpairment) Mode() string { return "proxy" }

func (pi *proxyImpairment) Describe() string {
	return fmt.Sprintf("userspace proxy (%s backend, seed %d) on %s/%s; %s", pi.backend, pi.p.Seed(), pi.ifaces[0], pi.ifaces[1], describe(pi.specs))
}

func (pi *proxyImpairment) closeTap() error {
	err := pi.tap.Close()
	if cerr := pi.tapFile.Close(); err == nil {
		err = cerr
	}
	return err
}

func (pi *proxyImpairment) Stop() (*ImpairStats, error) {
	pi.once.Do(func() {
		st := pi.p.Stats()
		err := pi.p.Close()
		if terr := pi.closeTap(); terr != nil {
			err = errors.Join(err, fmt.Errorf("proxy tap: %w", terr))
		}
		pi.stats = &ImpairStats{Proxy: &st, Tap: pi.tapPath}
		pi.err = err
	})
	return pi.stats, pi.err
}
