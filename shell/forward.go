package shell

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/internal/nsrun"
)

// IPv4 forwarding is one switch per namespace that every shell in it
// needs on, so shells hold it together: a hold file per namespace
// (StateDir/forward-<netns inode>.json) records the values from before
// the first holder, and the holders. The last holder to go, or Cleanup
// once every holder is dead, writes those values back.

// forwardHold is the hold file.
type forwardHold struct {
	Netns      string `json:"netns,omitempty"` // the namespace's name, "" for an unnamed one
	NetnsInode uint64 `json:"netns_inode"`
	// Saved are the values before the first holder, by path under
	// /proc/sys: net/ipv4/ip_forward, the per-interface forwarding that
	// writing it overwrites, and conf/all/accept_redirects, which it
	// flips (inet_forward_change in net/ipv4/devinet.c).
	Saved   map[string]string `json:"saved"`
	Holders []owner           `json:"holders"`
}

// owner is a process, told apart from a later one of the same PID by its
// start time.
type owner struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"pid_start_ticks"`
}

func self() owner {
	o := owner{PID: os.Getpid()}
	o.Start, _ = hostfile.ProcessStart(o.PID)
	return o
}

func (o owner) alive() bool { return hostfile.Running(o.PID, o.Start) }

const forwardKey = "net/ipv4/ip_forward"

// forwardSysctls are the keys a hold saves, as found in the namespace.
func forwardSysctls() ([]string, error) {
	keys, err := host.ProcSys.Glob("net/ipv4/conf/*/forwarding")
	if err != nil {
		return nil, err
	}
	return append([]string{forwardKey, "net/ipv4/conf/all/accept_redirects"}, keys...), nil
}

func holdPath(dir string, inode uint64) string {
	return filepath.Join(dir, fmt.Sprintf("forward-%d.json", inode))
}

// holdForwarding adds this process to the holders of the current
// namespace's forwarding (in which the caller runs) and turns it on. The
// caller holds the state lock.
func holdForwarding(dir string, ns string, inode uint64) error {
	path := holdPath(dir, inode)
	h, err := readHold(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		h = &forwardHold{Netns: ns, NetnsInode: inode, Saved: map[string]string{}}
		keys, err := forwardSysctls()
		if err != nil {
			return fmt.Errorf("forwarding: %w", err)
		}
		for _, k := range keys {
			v, err := host.ProcSys.Read(k)
			if err != nil {
				return fmt.Errorf("forwarding: %w", err)
			}
			h.Saved[k] = v
		}
	case err != nil:
		return err
	}
	h.Holders = append(h.Holders, self())
	// Journalled before the change.
	if err := hostfile.WriteJSON(path, h, "forwarding hold"); err != nil {
		return err
	}
	if err := host.ProcSys.Write(forwardKey, []byte("1")); err != nil {
		return fmt.Errorf("forwarding: %w", err)
	}
	return nil
}

// releaseForwarding drops o and every dead holder from the hold of the
// namespace with this inode; with none left it restores the saved values
// inside that namespace (run, the caller's way into it) and removes the
// file. The caller holds the state lock.
func releaseForwarding(dir string, inode uint64, o *owner, run func(func() error) error) error {
	path := holdPath(dir, inode)
	h, err := readHold(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var keep []owner
	for _, x := range h.Holders {
		if (o == nil || x != *o) && x.alive() {
			keep = append(keep, x)
		}
	}
	if len(keep) > 0 {
		h.Holders = keep
		return hostfile.WriteJSON(path, h, "forwarding hold")
	}
	if run != nil {
		if err := run(h.restore); err != nil {
			return err
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("forwarding hold: %w", err)
	}
	return nil
}

// restore writes the saved values back: ip_forward first (it rewrites
// every interface's), then each interface still there, then
// accept_redirects, which the first write flipped.
func (h *forwardHold) restore() error {
	keys := make([]string, 0, len(h.Saved))
	for k := range h.Saved {
		if k != forwardKey && !strings.HasSuffix(k, "/accept_redirects") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	keys = append(append([]string{forwardKey}, keys...), "net/ipv4/conf/all/accept_redirects")
	var errs []error
	for _, k := range keys {
		v, ok := h.Saved[k]
		if !ok || !host.ProcSys.Exists(k) {
			continue // an interface gone since
		}
		if cur, err := host.ProcSys.Read(k); err == nil && cur == v {
			continue
		}
		if err := host.ProcSys.Write(k, []byte(v)); err != nil {
			errs = append(errs, fmt.Errorf("forwarding: restore: %w", err))
		}
	}
	return errors.Join(errs...)
}

// maxHoldBytes bounds a hold file: a few hundred interfaces and holders.
const maxHoldBytes = 1 << 20

func readHold(path string) (*forwardHold, error) {
	if _, err := os.Lstat(path); err != nil {
		return nil, err
	}
	h := &forwardHold{}
	if err := readJSON(path, maxHoldBytes, h, "forwarding hold"); err != nil {
		return nil, err
	}
	for k, v := range h.Saved {
		if !validForwardKey(k) || strings.ContainsAny(v, "\n/") {
			return nil, fmt.Errorf("forwarding hold %s: saved %q: not a forwarding sysctl", path, k)
		}
	}
	return h, nil
}

// validForwardKey admits only the keys forwardSysctls saves.
func validForwardKey(k string) bool {
	if k == forwardKey || k == "net/ipv4/conf/all/accept_redirects" {
		return true
	}
	p := strings.Split(k, "/")
	return len(p) == 5 && p[0] == "net" && p[1] == "ipv4" && p[2] == "conf" &&
		host.CheckIfaceName(p[3]) == nil && p[4] == "forwarding"
}

// inNetns returns the way into the namespace a record names, or nil when
// it is gone (with it everything done inside it): by name, else the
// caller's own namespace when the inode is that one's.
func inNetns(name string, inode uint64) func(func() error) error {
	if name != "" {
		if ino, err := host.NetnsInode(name); err == nil && ino == inode {
			return func(fn func() error) error { return nsrun.DoNamed(name, fn) }
		}
	}
	if ino, err := host.NetnsInode(""); err == nil && ino == inode {
		return func(fn func() error) error { return fn() }
	}
	return nil
}
