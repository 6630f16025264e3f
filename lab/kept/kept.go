// Package kept holds a lab up under a name, with a proxy on its router and
// the proxy's control API, so that users run their own programs in its
// client, router and server namespaces (`wanlab lab up`, `lab exec`). The
// lab's namespaces are journalled by package lab; the proxy's state and
// the lab's description live in StateDir/<name>/ and go with it.
package kept

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/shell"
	"github.com/wanlab/wanlab/tc/schedule"
	"github.com/wanlab/wanlab/tc/spec"
)

// StateDir holds one directory per kept lab.
const StateDir = host.RunDir + "/labs"

// DefaultName is the name of a lab started without one.
const DefaultName = "lab"

// DirectionNames are the control API's names of the two directions, in
// the proxy's order, as the experiment names them.
var DirectionNames = [2]string{"to-client", "to-server"}

// Config says how the kept lab's link is impaired.
type Config struct {
	// Name is the lab's id: 1 to 8 characters of [0-9a-z]; "" means
	// DefaultName.
	Name string
	// Specs and Schedules per direction, in DirectionNames' order.
	Specs     [2]spec.Impairment
	Schedules [2]*schedule.Schedule
	// ClientSysctls and ServerSysctls are written in the end hosts'
	// namespaces; NoOffload turns TSO, GSO and GRO off on every veth
	// (a preset's host settings).
	ClientSysctls, ServerSysctls map[string]string
	NoOffload                    bool
}

// Info describes a running kept lab: what `lab exec`, `lab capture` and
// `lab down` need to find it.
type Info struct {
	Name    string `json:"name"`
	PID     int    `json:"pid"`
	Start   uint64 `json:"pid_start_ticks"`
	Control string `json:"control"`
	// Namespaces by role, and the end hosts' links and IPv4 addresses.
	Namespaces map[string]string     `json:"namespaces"`
	Links      map[string]string     `json:"links"`
	Addrs      map[string]netip.Addr `json:"addrs"`
}

// Alive reports whether the lab's process still runs.
func (i Info) Alive() bool { return hostfile.Running(i.PID, i.Start) }

// Kept is a lab held up by this process.
type Kept struct {
	Lab  *lab.Lab
	Info Info
	link *shell.Link
	dir  string
}

// Start builds the lab and starts its proxy. On error nothing is left.
func Start(ctx context.Context, cfg Config) (_ *Kept, err error) {
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if !lab.ValidID(cfg.Name) {
		return nil, fmt.Errorf("lab name %q: want 1-8 characters of [0-9a-z]", cfg.Name)
	}
	k := &Kept{dir: filepath.Join(StateDir, cfg.Name)}
	if err := hostfile.Dir(StateDir); err != nil {
		return nil, fmt.Errorf("lab state: %w", err)
	}
	if _, err := os.Lstat(k.dir); err == nil {
		if i, err := Find(cfg.Name); err == nil && i.Alive() {
			return nil, fmt.Errorf("lab %s: already up (pid %d); wanlab lab down --name %s", cfg.Name, i.PID, cfg.Name)
		}
		return nil, fmt.Errorf("lab %s: %s is left from a crashed lab: run wanlab cleanup", cfg.Name, k.dir)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, k.Close())
		}
	}()
	if k.Lab, err = lab.New(context.WithoutCancel(ctx), lab.Config{ID: cfg.Name,
		ClientSysctls: cfg.ClientSysctls, ServerSysctls: cfg.ServerSysctls,
		DisableTSO: cfg.NoOffload, DisableGSO: cfg.NoOffload, DisableGRO: cfg.NoOffload}); err != nil {
		return nil, err
	}
	if err := hostfile.Dir(k.dir); err != nil {
		return nil, fmt.Errorf("lab state: %w", err)
	}
	l := k.Lab
	ifaces := [2]string{l.Router.ClientLink, l.Router.ServerLink}
	if k.link, err = shell.ServeLink(ctx, shell.LinkConfig{Ifaces: ifaces, Names: DirectionNames,
		Netns: l.Router.NS, Dir: k.dir, Specs: cfg.Specs, Schedules: cfg.Schedules}); err != nil {
		return nil, err
	}
	k.Info = Info{Name: cfg.Name, PID: os.Getpid(), Control: k.link.Control,
		Namespaces: map[string]string{lab.RoleClient: l.Client.NS, lab.RoleRouter: l.Router.NS, lab.RoleServer: l.Server.NS},
		Links:      map[string]string{lab.RoleClient: l.Client.Link, lab.RoleServer: l.Server.Link},
		Addrs:      map[string]netip.Addr{lab.RoleClient: l.Client.IPv4, lab.RoleServer: l.Server.IPv4},
	}
	k.Info.Start, _ = hostfile.ProcessStart(k.Info.PID)
	if err := hostfile.WriteJSON(infoPath(cfg.Name), k.Info, "lab info"); err != nil {
		return nil, err
	}
	return k, nil
}

func infoPath(name string) string { return filepath.Join(StateDir, name, "info.json") }

// Close stops the proxy and removes the lab and its state.
func (k *Kept) Close() error {
	var errs []error
	if k.link != nil {
		errs = append(errs, k.link.Close())
	}
	if k.Lab != nil {
		if err := k.Lab.Close(); err != nil {
			return errors.Join(append(errs, err)...) // the state stays for cleanup
		}
	}
	if k.Lab != nil || k.link != nil {
		errs = append(errs, os.RemoveAll(k.dir))
	}
	return errors.Join(errs...)
}

// maxInfoBytes bounds an info file: a few hundred bytes of JSON.
const maxInfoBytes = 64 << 10

// Find reads the kept lab of that name; "" finds the one lab up (or says
// which are).
func Find(name string) (Info, error) {
	if name == "" {
		names := Names()
		if len(names) != 1 {
			if len(names) == 0 {
				return Info{}, errors.New("no lab is up (wanlab lab up)")
			}
			return Info{}, fmt.Errorf("labs %s are up: say which with --name", strings.Join(names, ", "))
		}
		name = names[0]
	}
	if !lab.ValidID(name) {
		return Info{}, fmt.Errorf("lab name %q: want 1-8 characters of [0-9a-z]", name)
	}
	b, err := hostfile.ReadInput(infoPath(name), maxInfoBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return Info{}, fmt.Errorf("lab %s: not up", name)
	}
	if err != nil {
		return Info{}, fmt.Errorf("lab %s: %w", name, err)
	}
	var i Info
	if err := json.Unmarshal(b, &i); err != nil {
		return Info{}, fmt.Errorf("lab %s: %s: %w", name, infoPath(name), err)
	}
	if i.Name != name {
		return Info{}, fmt.Errorf("lab %s: %s names lab %q", name, infoPath(name), i.Name)
	}
	for role, ns := range i.Namespaces {
		if ns != lab.NamePrefix+name+"-"+role {
			return Info{}, fmt.Errorf("lab %s: namespace %q of %s: not this lab's", name, ns, role)
		}
	}
	return i, nil
}

// Names lists the kept labs that have an info file.
func Names() []string {
	paths, _ := filepath.Glob(filepath.Join(StateDir, "*", "info.json"))
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(filepath.Dir(p)))
	}
	sort.Strings(names)
	return names
}

// Cleanup removes the state directories of kept labs whose namespaces are
// gone (lab.Cleanup removes those of dead processes; run it first).
func Cleanup() ([]string, error) { return lab.RemoveStaleStateDirs(StateDir, "lab") }
