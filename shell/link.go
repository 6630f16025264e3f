package shell

import (
	"context"
	"errors"
	"fmt"

	"github.com/wanlab/wanlab/proxy"
	"github.com/wanlab/wanlab/proxy/control"
	"github.com/wanlab/wanlab/proxy/tap"
	"github.com/wanlab/wanlab/tc/schedule"
	"github.com/wanlab/wanlab/tc/spec"
)

// LinkConfig is a proxy between two interfaces of a router namespace,
// served on a control socket under direction names.
type LinkConfig struct {
	// Ifaces are the egress interfaces, Names what the control API calls
	// each ("down", "up"; "to-client", "to-server").
	Ifaces, Names [2]string
	// Netns is the router's namespace; Dir holds the proxy's route state
	// and its control socket, token and endpoint files.
	Netns, Dir string
	Specs      [2]spec.Impairment
	Schedules  [2]*schedule.Schedule
	Tap        *tap.Tap
	Seed       uint64
	HasSeed    bool
}

// Link is a running proxy with its control API.
type Link struct {
	Proxy *proxy.Proxy
	// Control is the control address, unix:DIR/A-B.sock.
	Control string

	srv         *control.Server
	removeCreds func() error
}

// ServeLink starts the proxy and its control API, which admits root and
// this process's user on the socket (control.Access, as `wanlab proxy`).
// On error nothing is left running.
func ServeLink(ctx context.Context, cfg LinkConfig) (_ *Link, err error) {
	p, err := proxy.Start(context.WithoutCancel(ctx), proxy.Config{
		Ifaces: cfg.Ifaces, Specs: cfg.Specs, Schedules: cfg.Schedules,
		Seed: cfg.Seed, HasSeed: cfg.HasSeed, Netns: cfg.Netns, StateDir: cfg.Dir, Tap: cfg.Tap,
	})
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	k := &Link{Proxy: p}
	defer func() {
		if err != nil {
			err = errors.Join(err, k.Close())
		}
	}()
	tok, err := control.NewToken()
	if err != nil {
		return nil, err
	}
	acc := control.Access{Token: tok}
	ln, err := control.Listen(control.DefaultAddr(cfg.Dir, cfg.Ifaces), acc)
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	ep, err := control.SelfEndpoint(ln)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("control: %w", err)
	}
	if k.removeCreds, err = control.WriteCredentials(cfg.Dir, cfg.Ifaces, ep, tok); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control: %w", err)
	}
	b := Directions{Backend: p, Ifaces: cfg.Ifaces, Names: cfg.Names}
	if k.srv, err = control.Serve(ln, b, acc); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control: %w", err)
	}
	k.Control = ep.Address
	return k, nil
}

// Close stops the control API and the proxy, restoring the router's
// routing.
func (k *Link) Close() error {
	var errs []error
	if k.srv != nil {
		errs = append(errs, k.srv.Close())
	}
	if k.removeCreds != nil {
		errs = append(errs, k.removeCreds())
	}
	return errors.Join(append(errs, k.Proxy.Close())...)
}
