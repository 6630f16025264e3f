package experiment

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/vishvananda/netns"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/traffic"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/tuner"
)

// namespaces are the endpoints of a lab of its own: the client and the
// server are namespaces of this host, built for one experiment and
// removed with it.
type namespaces struct {
	l   *lab.Lab
	srv *traffic.Server
}

func (e *namespaces) open(ctx context.Context, cfg Config, logf func(string, ...any)) (*lab.Lab, map[string]HostInfo, error) {
	l, err := lab.New(ctx, lab.Config{ClientSysctls: cfg.ClientSysctls, ServerSysctls: cfg.ServerSysctls,
		DisableTSO: cfg.NoOffload, DisableGSO: cfg.NoOffload, DisableGRO: cfg.NoOffload})
	if err != nil {
		return nil, nil, err
	}
	e.l = l
	k := HostInfo{Kernel: host.KernelRelease()}
	logf("lab %s: client %s, router %s, server %s", l.ID, l.Client.NS, l.Router.NS, l.Server.NS)
	return l, map[string]HostInfo{lab.RoleClient: k, lab.RoleRouter: k, lab.RoleServer: k}, nil
}

func (e *namespaces) close() error {
	if e.l == nil {
		return nil
	}
	if err := e.l.Close(); err != nil {
		return err
	}
	// The proxy's and the qdiscs' state described objects inside the
	// lab, which are gone now.
	_ = os.RemoveAll(filepath.Join(StateDir, e.l.ID))
	return nil
}

func (e *namespaces) serve(ctx context.Context, c traffic.ServerConfig) (netip.AddrPort, func() error, error) {
	srv, err := traffic.StartServer(ctx, e.l.Server.Handle, c)
	if err != nil {
		return netip.AddrPort{}, nil, err
	}
	e.srv = srv
	// The server's own errors on close are not the experiment's: its
	// connections are over by then.
	return srv.Addr(), func() error { srv.Close(); return nil }, nil
}

func (e *namespaces) startKernel(ctx context.Context, specs map[string]*spec.Spec) (impairment, error) {
	return startKernel(ctx, e.l, specs)
}

// host is the client's or the server's namespace (a role or a side: the
// same names).
func (e *namespaces) host(role string) *lab.Host {
	if role == lab.RoleServer {
		return &e.l.Server
	}
	return &e.l.Client
}

func (e *namespaces) capturePoint(side string) (netns.NsHandle, string, string) {
	h := e.host(side)
	return h.Handle, h.Link, h.NS
}

func (e *namespaces) in() string { return "" }

func (e *namespaces) download(ctx context.Context, c traffic.DownloadConfig) (*traffic.DownloadResult, error) {
	c.Peer = e.srv
	dl, err := traffic.Download(ctx, e.l.Client.Handle, c)
	if err != nil {
		return nil, err
	}
	return &dl, nil
}

func (e *namespaces) requestResponse(ctx context.Context, c traffic.RRConfig) (*traffic.RRResult, error) {
	rr, err := traffic.RequestResponse(ctx, e.l.Client.Handle, c)
	if err != nil {
		return nil, err
	}
	return &rr, nil
}

// snapshot reads the sysctls in force inside the host's namespace, while
// the lab still exists.
func (e *namespaces) snapshot(_ context.Context, role string) (*tuner.Snapshot, error) {
	h := e.host(role)
	var snap *tuner.Snapshot
	if err := h.Do(func() error {
		var err error
		snap, err = tuner.ReadSnapshot(tuner.Host, h.NS)
		return err
	}); err != nil {
		return nil, fmt.Errorf("tuner snapshot of %s: %w", h.NS, err)
	}
	return snap, nil
}
