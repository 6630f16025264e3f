package route

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	hostenv "github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/internal/nsrun"
)

// host is one network namespace as seen through netlink and /proc/sys.
type host struct {
	nl  *netlink.Handle
	ns  netns.NsHandle // netns.None() = the current namespace
	sys hostenv.Sysctl // /proc/sys; a field so the namespace is the only thing that varies
	// readOnly makes every sysctl write fail as on a read-only /proc/sys
	// (a container's): the tests' stand-in for one.
	readOnly bool
}

func openHost(name string) (*host, error) {
	h := &host{ns: netns.None(), sys: hostenv.ProcSys}
	var err error
	if name == "" {
		h.nl, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	} else {
		if h.ns, err = nsrun.Open(name); err != nil {
			return nil, err
		}
		h.nl, err = netlink.NewHandleAt(h.ns, unix.NETLINK_ROUTE)
	}
	if err != nil {
		h.close()
		return nil, fmt.Errorf("netlink: %w", err)
	}
	return h, nil
}

func (h *host) close() {
	if h.nl != nil {
		h.nl.Close()
	}
	if h.ns.IsOpen() {
		h.ns.Close()
	}
}

// readSysctl reads /proc/sys/p inside the namespace.
func (h *host) readSysctl(p string) (string, error) {
	var v string
	err := nsrun.Do(h.ns, func() error {
		b, err := os.ReadFile(h.sys.Path(p))
		v = strings.TrimSpace(string(b))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("sysctl %s: %w", p, unwrapPath(err))
	}
	return v, nil
}

func (h *host) writeSysctl(p, v string) error {
	if h.readOnly {
		return fmt.Errorf("sysctl %s=%s: %w", p, v, unix.EROFS)
	}
	err := nsrun.Do(h.ns, func() error {
		f, err := os.OpenFile(h.sys.Path(p), os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteString(v)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", p, v, unwrapPath(err))
	}
	return nil
}

// sysctlGlob lists paths under /proc/sys matching pattern, inside the namespace.
func (h *host) sysctlGlob(pattern string) ([]string, error) {
	var out []string
	err := nsrun.Do(h.ns, func() error {
		var err error
		out, err = h.sys.Glob(pattern)
		return err
	})
	return out, err
}

// unwrapPath drops *PathError's path (the message names the sysctl already).
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func (h *host) link(name string) (netlink.Link, error) {
	l, err := h.nl.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) || errors.Is(err, unix.ENODEV) {
			return nil, &NotFoundError{Iface: name}
		}
		return nil, fmt.Errorf("interface %q: %w", name, err)
	}
	return l, nil
}

func familyOf(v int) int {
	if v == 6 {
		return netlink.FAMILY_V6
	}
	return netlink.FAMILY_V4
}

func defaultDst(v int) *net.IPNet {
	if v == 6 {
		return &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
	}
	return &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
}

func ruleOf(c change) *netlink.Rule {
	r := netlink.NewRule()
	r.Family = familyOf(c.Family)
	r.Priority = c.Priority
	r.Table = c.Table
	r.IifName = c.Iif
	return r
}

// do makes one change.
func (h *host) do(c change) error {
	switch c.Kind {
	case kindSysctl:
		if c.Value == "" {
			return nil
		}
		err := h.writeSysctl(c.Path, c.Value)
		if errors.Is(err, unix.EROFS) {
			// /proc/sys is mounted read-only, as in a container. A
			// value that is already what we want needs no write.
			if cur, rerr := h.readSysctl(c.Path); rerr == nil && cur == c.Value {
				return nil
			}
			return fmt.Errorf("%w: /proc/sys is read-only (a container?): start it with %s (docs/topologies.md)", err, presetHint(c.Path, c.Value))
		}
		return err
	case kindMTU, kindUp, kindAddrGenMode:
		l, err := h.link(c.Link)
		if err != nil {
			return err
		}
		switch c.Kind {
		case kindMTU:
			err = h.nl.LinkSetMTU(l, c.MTU)
		case kindAddrGenMode:
			err = h.nl.LinkSetIP6AddrGenMode(l, deref(c.Mode))
		default:
			err = h.nl.LinkSetUp(l)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
		return nil
	case kindRoute:
		l, err := h.link(c.Link)
		if err != nil {
			return err
		}
		r := &netlink.Route{Family: familyOf(c.Family), Table: c.Table, LinkIndex: l.Attrs().Index,
			Dst: defaultDst(c.Family), Scope: netlink.SCOPE_LINK}
		if err := h.nl.RouteAdd(r); err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
		return nil
	case kindRule:
		if err := h.nl.RuleAdd(ruleOf(c)); err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
		return nil
	}
	return fmt.Errorf("unknown change kind %q", c.Kind)
}

// presetHint is what a container's start needs instead of the write of
// path=value: the setting for all interfaces (Docker's --sysctl takes
// interfaces that exist when it starts, not those the proxy creates).
func presetHint(path, value string) string {
	parts := strings.Split(path, "/") // net ipv4 conf DEV key
	if len(parts) == 5 && parts[2] == "conf" {
		key := parts[4]
		switch {
		case key == "force_forwarding":
			return "--sysctl net.ipv6.conf.all.forwarding=1"
		case key == "rp_filter":
			return "--sysctl net.ipv4.conf.all.rp_filter=0 --sysctl net.ipv4.conf.default.rp_filter=0"
		case key == "disable_ipv6":
			return "--sysctl net.ipv6.conf.all.disable_ipv6=0 --sysctl net.ipv6.conf.default.disable_ipv6=0"
		}
		return "--sysctl " + strings.Join([]string{parts[0], parts[1], "conf", "all", key}, ".") + "=" + value
	}
	return "--sysctl " + strings.ReplaceAll(path, "/", ".") + "=" + value
}

// gone reports errors meaning the thing to undo no longer exists (a TUN
// that vanished with its process takes its routes and sysctls with it).
func gone(err error) bool {
	var nf netlink.LinkNotFoundError
	var missing *NotFoundError
	return errors.As(err, &nf) || errors.As(err, &missing) || errors.Is(err, unix.ENOENT) ||
		errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENODEV) || errors.Is(err, os.ErrNotExist)
}

// undo reverts one change. It is idempotent and treats a vanished object
// as already reverted, so it can replay a journal whose last entry may
// never have been carried out.
func (h *host) undo(c change) error {
	var err error
	switch c.Kind {
	case kindSysctl:
		var cur string
		if cur, err = h.readSysctl(c.Path); err == nil && cur != c.Prev {
			err = h.writeSysctl(c.Path, c.Prev)
		}
	case kindMTU, kindUp, kindAddrGenMode:
		var l netlink.Link
		if l, err = h.link(c.Link); err != nil {
			break
		}
		switch {
		case c.Kind == kindMTU && l.Attrs().MTU != c.PrevMTU:
			err = h.nl.LinkSetMTU(l, c.PrevMTU)
		case c.Kind == kindAddrGenMode:
			err = h.nl.LinkSetIP6AddrGenMode(l, deref(c.PrevMode))
		case c.Kind == kindUp && l.Attrs().Flags&net.FlagUp != 0:
			err = h.nl.LinkSetDown(l)
		}
	case kindRoute:
		r := &netlink.Route{Family: familyOf(c.Family), Table: c.Table, Dst: defaultDst(c.Family)}
		if l, lerr := h.link(c.Link); lerr == nil {
			r.LinkIndex = l.Attrs().Index
		} else {
			return nil // the route died with its TUN
		}
		err = h.nl.RouteDel(r)
	case kindRule:
		err = h.nl.RuleDel(ruleOf(c))
	default:
		err = fmt.Errorf("unknown change kind %q", c.Kind)
	}
	if err != nil && !gone(err) {
		return fmt.Errorf("undo %s: %w", c, err)
	}
	return nil
}
