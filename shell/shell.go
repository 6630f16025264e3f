// Package shell puts a program behind an impaired link: it runs it in a
// network namespace whose only way out is a wanlab proxy in a router
// namespace, routed and NATed by the kernel to the namespace the shell was
// started in, as mahimahi's shells do. Everything it changes there is
// journalled before it is made and undone by Close, or by Cleanup after a
// crash.
package shell

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/proxy"
	"github.com/wanlab/wanlab/proxy/tap"
	"github.com/wanlab/wanlab/tc/schedule"
	"github.com/wanlab/wanlab/tc/spec"
)

// Environment variables a shell gives its command.
const (
	// EnvControl is the proxy's control address, which `wanlab proxy set`
	// and `wanlab proxy stats` read, as the client package's Dial does.
	EnvControl = "WANLAB_CONTROL"
	// EnvShell is the shell's lab id.
	EnvShell = "WANLAB_SHELL"
)

// DirectionNames are the names the control API gives the shell's two
// directions, in the proxy's order: down (to the command), up (from it).
var DirectionNames = [2]string{"down", "up"}

// Config says how the link is impaired.
type Config struct {
	// Up impairs traffic from the command, Down traffic to it; the zero
	// value is none.
	Up, Down spec.Impairment
	// UpSchedule and DownSchedule step a direction's spec over time
	// (proxy.Config.Schedules); nil for none.
	UpSchedule, DownSchedule *schedule.Schedule
	// Tap records what entered and left the engine (--pcap); nil for none.
	Tap *tap.Tap
	// Seed, with HasSeed, seeds every stage's random generator.
	Seed    uint64
	HasSeed bool
	// ResolvConf is the resolver configuration the command reads; ""
	// means DefaultResolvConf. Its loopback nameservers are relayed
	// (dns.go).
	ResolvConf string
}

// Shell is a running shell's link: the command's namespace (Lab.Client),
// the router with the proxy, the NAT and forwarding in the namespace it
// was started in, and the control API.
type Shell struct {
	Lab *lab.Lab
	// Control is the proxy's control address.
	Control string
	// Ifaces are the proxy's egress interfaces: [down, up].
	Ifaces [2]string

	journal   *hostJournal
	link      *Link
	dns       *dnsRelay
	closeOnce sync.Once
	closeErr  error
}

// Start builds the shell's link. On error everything already made is
// undone before it returns.
func Start(ctx context.Context, cfg Config) (_ *Shell, err error) {
	if err := proxy.Preflight(); err != nil {
		return nil, err
	}
	if err := hostfile.Dir(StateDir); err != nil {
		return nil, fmt.Errorf("shell state: %w", err)
	}
	s := &Shell{}
	defer func() {
		if err != nil {
			if cerr := s.Close(); cerr != nil {
				err = fmt.Errorf("%w (and undoing it: %v)", err, cerr)
			}
		}
	}()
	if err := s.buildLink(ctx); err != nil {
		return nil, err
	}
	if err := s.startProxy(ctx, cfg); err != nil {
		return nil, err
	}
	resolv := cfg.ResolvConf
	if resolv == "" {
		resolv = DefaultResolvConf
	}
	if s.dns, err = startDNSRelay(resolv, s.Lab.Client.Handle, s.Lab.Server.IPv4); err != nil {
		return nil, fmt.Errorf("dns relay: %w", err)
	}
	return s, nil
}

// buildLink makes the namespaces, the NAT and the forwarding under the
// state lock, so shells starting side by side pick different subnets.
func (s *Shell) buildLink(ctx context.Context) error {
	lock, err := hostfile.LockFile(filepath.Join(StateDir, lockName), false)
	if err != nil {
		return fmt.Errorf("shell state: %w", err)
	}
	defer lock.Unlock(false)
	pair, err := freePair()
	if err != nil {
		return err
	}
	// Not tied to ctx: Close removes the lab, after the proxy.
	l, err := lab.New(context.WithoutCancel(ctx), lab.Config{Outside: true,
		ClientNet4: pair.Inner4, ServerNet4: pair.Outer4, ClientNet6: pair.Inner6, ServerNet6: pair.Outer6})
	if err != nil {
		return err
	}
	s.Lab = l
	inode, err := host.NetnsInode("")
	if err != nil {
		return fmt.Errorf("shell: this namespace: %w", err)
	}
	j := &hostJournal{ID: l.ID, Owner: self(), Netns: host.CurrentNetns().Name, NetnsInode: inode, Forwarding: true}
	if err := j.save(); err != nil {
		return err
	}
	s.journal = j
	if err := holdForwarding(StateDir, j.Netns, inode); err != nil {
		return err
	}
	j.NAT = true
	if err := j.save(); err != nil {
		return err
	}
	return addNAT(l.ID, l.Client.Net4, l.Server.Link)
}

func (s *Shell) startProxy(ctx context.Context, cfg Config) error {
	l := s.Lab
	s.Ifaces = [2]string{l.Router.ClientLink, l.Router.ServerLink}
	link, err := ServeLink(ctx, LinkConfig{
		Ifaces: s.Ifaces, Names: DirectionNames, Netns: l.Router.NS, Dir: filepath.Dir(journalPath(l.ID)),
		Specs: [2]spec.Impairment{cfg.Down, cfg.Up}, Schedules: [2]*schedule.Schedule{cfg.DownSchedule, cfg.UpSchedule},
		Tap: cfg.Tap, Seed: cfg.Seed, HasSeed: cfg.HasSeed,
	})
	if err != nil {
		return err
	}
	s.link, s.Control = link, link.Control
	return nil
}

// Proxy is the shell's running proxy (its Stats, Specs).
func (s *Shell) Proxy() *proxy.Proxy { return s.link.Proxy }

// Environ is the command's environment: the caller's, plus the control
// address and the shell's id.
func (s *Shell) Environ() []string {
	return append(os.Environ(), EnvControl+"="+s.Control, EnvShell+"="+s.Lab.ID)
}

// StartCommand starts cmd inside the shell's namespace (cmd.Env nil: the
// shell's Environ).
func (s *Shell) StartCommand(cmd *exec.Cmd) error {
	if cmd.Env == nil {
		cmd.Env = s.Environ()
	}
	// The child is forked from the locked thread that entered the
	// namespace, and keeps it.
	return s.Lab.Client.Do(cmd.Start)
}

// Close stops the proxy and its control API, removes the NAT table,
// releases forwarding and removes the namespaces; safe to call twice.
func (s *Shell) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.teardown() })
	return s.closeErr
}

func (s *Shell) teardown() error {
	errs := []error{s.dns.Close()}
	if s.link != nil {
		errs = append(errs, s.link.Close())
	}
	if j := s.journal; j != nil {
		lock, err := hostfile.LockFile(filepath.Join(StateDir, lockName), false)
		if err != nil {
			return fmt.Errorf("shell state: %w", err)
		}
		jerr := errors.Join(j.release(), os.Remove(journalPath(j.ID)))
		lock.Unlock(false)
		if jerr != nil {
			// The journal stays for Cleanup.
			return errors.Join(append(errs, jerr)...)
		}
	}
	if s.Lab != nil {
		if err := s.Lab.Close(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		errs = append(errs, os.RemoveAll(filepath.Dir(journalPath(s.Lab.ID))))
	}
	return errors.Join(errs...)
}

// release undoes the journal's changes made by this (live) process.
func (j *hostJournal) release() error {
	run := func(fn func() error) error { return fn() }
	var errs []error
	if j.NAT {
		errs = append(errs, deleteNAT(j.ID))
	}
	if j.Forwarding {
		o := j.Owner
		errs = append(errs, releaseForwarding(StateDir, j.NetnsInode, &o, run))
	}
	return errors.Join(errs...)
}
