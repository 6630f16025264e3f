package route

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	ihost "github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/internal/nsrun"
)

// Lock is the claim of one proxy on its two interfaces: an flock on one
// lock file per interface, released by the kernel when the process dies,
// so a lock that can be taken proves its previous owner is gone.
type Lock struct {
	paths []string
	locks []*hostfile.Lock
}

// held records the lock files this process holds, so that Apply knows when
// the caller already holds the lock and a second claim from the same
// process gets a message of its own.
var held = struct {
	sync.Mutex
	m      map[string]bool // lock files
	active map[string]bool // state files of Applied not yet undone
}{m: map[string]bool{}, active: map[string]bool{}}

// Acquire claims cfg's interfaces for this process. A second proxy on
// either interface is refused with a message naming its pid. State left by
// a crashed proxy on these interfaces is undone first.
func Acquire(cfg Config) (*Lock, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg = resolveNetns(cfg)
	l, err := lockIfaces(cfg, cfg.Ifaces[:])
	if err != nil {
		return nil, err
	}
	if err := undoStale(cfg); err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}

func lockIfaces(cfg Config, ifaces []string) (*Lock, error) {
	if err := ensureDir(cfg.StateDir); err != nil {
		return nil, err
	}
	l := &Lock{}
	for _, iface := range ifaces {
		p := cfg.lockPath(iface)
		held.Lock()
		mine := held.m[p]
		held.Unlock()
		if mine {
			l.Release()
			return nil, lockedError(fmt.Sprintf("interface %q is already used by a proxy in this process (pid %d)", iface, os.Getpid()))
		}
		lk, err := hostfile.LockFile(p, true)
		if err != nil {
			l.Release()
			if errors.Is(err, unix.EWOULDBLOCK) {
				b, _ := os.ReadFile(p)
				return nil, lockedError(fmt.Sprintf("interface %q is already used by wanlab proxy pid %s (lock %s)",
					iface, strings.TrimSpace(string(b)), p))
			}
			return nil, fmt.Errorf("lock %s: %w", p, err)
		}
		f := lk.File()
		f.Truncate(0)
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		held.Lock()
		held.m[p] = true
		held.Unlock()
		l.paths = append(l.paths, p)
		l.locks = append(l.locks, lk)
	}
	return l, nil
}

// Release gives the interfaces up and removes their lock files. It does
// not undo anything.
func (l *Lock) Release() error {
	if l == nil {
		return nil
	}
	held.Lock()
	defer held.Unlock()
	for i, lk := range l.locks {
		delete(held.m, l.paths[i])
		lk.Unlock(true) // unlinked while still locked: see hostfile.LockFile
	}
	l.locks, l.paths = nil, nil
	return nil
}

// holds reports whether this process holds the locks of cfg's interfaces.
func holds(cfg Config) bool {
	held.Lock()
	defer held.Unlock()
	return held.m[cfg.lockPath(cfg.Ifaces[0])] && held.m[cfg.lockPath(cfg.Ifaces[1])]
}

// undoStale undoes the state files in cfg's namespace that name one of
// cfg's interfaces. The caller holds those interfaces' locks, so their
// owners are dead; the other interface of such a file is locked too while
// it is undone.
func undoStale(cfg Config) error {
	files, err := stateFiles(cfg.StateDir)
	if err != nil {
		return err
	}
	for _, p := range files {
		st, err := loadState(p)
		if err != nil || st.Netns != cfg.Netns || st.AnonNetns != cfg.anonNetns {
			continue
		}
		var others []string
		overlap := false
		for _, n := range st.Ifaces {
			if n == cfg.Ifaces[0] || n == cfg.Ifaces[1] {
				overlap = true
			} else {
				others = append(others, n)
			}
		}
		if !overlap {
			continue
		}
		l, err := lockIfaces(cfg, others)
		if err != nil {
			return fmt.Errorf("stale state %s: %w", p, err)
		}
		err = undoFile(p, st)
		l.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// undoFile replays st's journal backwards and removes the file.
func undoFile(path string, st *state) error {
	if err := checkNetns(path, st); err != nil {
		return err
	}
	h, err := openHost(st.Netns)
	if err != nil {
		if st.Netns != "" && !nsrun.Exists(st.Netns) {
			// The namespace and everything in it is gone.
			return os.Remove(path)
		}
		return err
	}
	defer h.close()
	if err := undoChanges(h, st.Changes); err != nil {
		return fmt.Errorf("state %s: %w", path, err)
	}
	return os.Remove(path)
}

func undoChanges(h *host, cs []change) error {
	var errs []error
	for i := len(cs) - 1; i >= 0; i-- {
		if err := h.undo(cs[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Applied is the routing set up by Apply.
type Applied struct {
	mu      sync.Mutex
	cfg     Config
	path    string
	st      *state
	ownLock *Lock // the lock Apply took itself, released by Undo
	undone  bool
}

// Tables returns the routing tables used for packets leaving through
// Ifaces[0] and Ifaces[1], and the priority of the policy rules.
func (a *Applied) Tables() (tables [2]int, priority int) {
	for _, c := range a.st.Changes {
		if c.Kind == kindRule {
			priority = c.Priority
			if c.Iif == a.cfg.Ifaces[0] {
				tables[1] = c.Table
			} else {
				tables[0] = c.Table
			}
		}
	}
	return tables, priority
}

// StatePath is the file that records what Apply changed.
func (a *Applied) StatePath() string { return a.path }

// applyMu serialises table and priority selection between proxies of this
// process; the flock on applyLockName does so between processes.
var applyMu sync.Mutex

const applyLockName = ".apply.lock"

// Apply steers the forwarded traffic between cfg.Ifaces through cfg.TUNs,
// which must already exist. Each change is written to the state file
// before it is made; on error, what was done is undone and a one-line
// error returned.
func Apply(cfg Config) (*Applied, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg = resolveNetns(cfg)
	a := &Applied{cfg: cfg, path: cfg.StatePath()}
	held.Lock()
	busy := held.active[a.path]
	if !busy {
		held.active[a.path] = true
	}
	held.Unlock()
	if busy {
		return nil, lockedError(fmt.Sprintf("interfaces %q and %q are already used by a proxy in this process (pid %d)", cfg.Ifaces[0], cfg.Ifaces[1], os.Getpid()))
	}
	if !holds(cfg) {
		if a.ownLock, err = Acquire(cfg); err != nil {
			a.setInactive()
			return nil, err
		}
	}
	if err := a.apply(); err != nil {
		a.ownLock.Release()
		a.setInactive()
		return nil, err
	}
	return a, nil
}

func (a *Applied) apply() error {
	cfg := a.cfg
	h, err := openHost(cfg.Netns)
	if err != nil {
		return err
	}
	defer h.close()
	h.readOnly = cfg.hooks.sysctlReadOnly
	var links [4]netlink.Link // A, B, TUN A, TUN B
	for i, n := range []string{cfg.Ifaces[0], cfg.Ifaces[1], cfg.TUNs[0], cfg.TUNs[1]} {
		if links[i], err = h.link(n); err != nil {
			if i >= 2 {
				return fmt.Errorf("TUN %w", err)
			}
			return err
		}
	}

	applyMu.Lock()
	defer applyMu.Unlock()
	gl, err := hostfile.OpenLock(filepath.Join(cfg.StateDir, applyLockName))
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	defer gl.Close()
	if err := unix.Flock(int(gl.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock: %w", err)
	}

	tables, prio, err := pickTablesAndPriority(h)
	if err != nil {
		return err
	}
	plan, err := planChanges(h, cfg, links, tables, prio)
	if err != nil {
		return err
	}
	if skipChange := cfg.hooks.skipChange; skipChange != nil {
		var kept []change
		for _, c := range plan {
			if !skipChange(c) {
				kept = append(kept, c)
			}
		}
		plan = kept
	}
	ino, _ := targetInode(cfg.Netns)
	a.st = &state{Version: stateVersion, PID: os.Getpid(), Started: time.Now().UTC(),
		Netns: cfg.Netns, NetnsInode: ino, AnonNetns: cfg.anonNetns, Ifaces: cfg.Ifaces, TUNs: cfg.TUNs}
	if err := a.st.save(a.path); err != nil {
		return err
	}
	for _, c := range plan {
		a.st.Changes = append(a.st.Changes, c)
		err := a.st.save(a.path)
		if err == nil && cfg.hooks.beforeChange != nil {
			err = cfg.hooks.beforeChange(c)
		}
		if err == nil {
			err = h.do(c)
		}
		if err != nil {
			// The failed change itself was refused as a whole (netlink
			// requests and sysctl writes are atomic): undo those before it.
			done := a.st.Changes[:len(a.st.Changes)-1]
			if errors.Is(err, os.ErrPermission) {
				err = &ihost.PrivilegeError{Err: err, Hint: "needs root or CAP_NET_ADMIN"}
			}
			if uerr := undoChanges(h, done); uerr != nil {
				return fmt.Errorf("%w (rollback failed, state kept in %s: %v)", err, a.path, uerr)
			}
			os.Remove(a.path)
			return err
		}
	}
	return nil
}

// Undo restores everything Apply changed and removes the state file. After
// a partial failure it can be called again; the state file stays until
// everything is restored.
func (a *Applied) Undo() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.undone {
		return nil
	}
	h, err := openHost(a.cfg.Netns)
	if err != nil {
		return err
	}
	defer h.close()
	h.readOnly = a.cfg.hooks.sysctlReadOnly
	if err := undoChanges(h, a.st.Changes); err != nil {
		return err
	}
	if err := os.Remove(a.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	a.undone = true
	a.ownLock.Release()
	a.setInactive()
	return nil
}

func (a *Applied) setInactive() {
	held.Lock()
	delete(held.active, a.path)
	held.Unlock()
}

// Cleanup undoes every state file in stateDir whose proxy is dead (its
// interface locks are free), as after a crash or SIGKILL, and returns the
// state files it undid. Files of live proxies are left alone.
func Cleanup(stateDir string) (undone []string, err error) {
	if stateDir == "" {
		stateDir = DefaultStateDir
	}
	files, err := stateFiles(stateDir)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, p := range files {
		st, lerr := loadState(p)
		if lerr != nil {
			errs = append(errs, lerr)
			continue
		}
		cfg := Config{Ifaces: st.Ifaces, TUNs: st.TUNs, StateDir: stateDir, Netns: st.Netns, anonNetns: st.AnonNetns}
		l, lerr := lockIfaces(cfg, st.Ifaces[:])
		if lerr != nil {
			if errors.Is(lerr, ErrInUse) {
				continue // a live proxy owns it
			}
			errs = append(errs, lerr)
			continue
		}
		uerr := undoFile(p, st)
		l.Release()
		if uerr != nil {
			errs = append(errs, uerr)
			continue
		}
		undone = append(undone, p)
	}
	if err := sweepLocks(stateDir); err != nil {
		errs = append(errs, err)
	}
	return undone, errors.Join(errs...)
}

// sweepLocks removes the lock files of proxies that are gone: a lock
// file nobody holds is taken, unlinked while held (as Release does, so a
// proxy racing for it starts over with a new file) and closed. Held ones,
// by a live proxy or by this process, stay.
func sweepLocks(stateDir string) error {
	paths, err := filepath.Glob(filepath.Join(stateDir, "*"+lockSuffix))
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range paths {
		held.Lock()
		mine := held.m[p]
		held.Unlock()
		if mine {
			continue
		}
		lk, err := hostfile.LockFile(p, true)
		if err != nil {
			if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("lock %s: %w", p, err))
			}
			continue
		}
		lk.Unlock(true) // a stale lock: nobody held it
	}
	return errors.Join(errs...)
}

// tableBase is where table numbers are searched from: above the small
// numbers people give their own tables, below the reserved 253-255 only
// when everything above is taken.
const tableBase = 4200

// preferredPriority is used when no rule other than local's sits before
// it; otherwise the proxy's rules go just before the first existing rule,
// so that they see every forwarded packet. The packets the proxy writes
// back arrive on a TUN and then meet the host's own rules unchanged.
const preferredPriority = 1000

func pickTablesAndPriority(h *host) (tables [2]int, prio int, err error) {
	usedTables := map[int]bool{unix.RT_TABLE_UNSPEC: true, unix.RT_TABLE_COMPAT: true,
		unix.RT_TABLE_DEFAULT: true, unix.RT_TABLE_MAIN: true, unix.RT_TABLE_LOCAL: true}
	usedPrio := map[int]bool{}
	minOther := 32766
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rules, err := listRules(h, fam)
		if fam == netlink.FAMILY_V6 && errors.Is(err, unix.EAFNOSUPPORT) {
			break // a kernel without IPv6
		}
		if err != nil {
			return tables, 0, err
		}
		for _, r := range rules {
			usedTables[r.Table] = true
			usedPrio[r.Priority] = true
			if r.Priority > 0 && r.Priority < minOther {
				minOther = r.Priority
			}
		}
		routes, err := listRoutes(h, fam)
		if err != nil {
			return tables, 0, err
		}
		for _, r := range routes {
			usedTables[r.Table] = true
		}
	}
	n := 0
	for t := tableBase; n < 2 && t < math.MaxInt32; t++ {
		if !usedTables[t] {
			tables[n] = t
			n++
		}
	}
	if preferredPriority < minOther && !usedPrio[preferredPriority] {
		return tables, preferredPriority, nil
	}
	for p := minOther - 1; p > 0; p-- {
		if !usedPrio[p] {
			return tables, p, nil
		}
	}
	return tables, 0, errors.New("no free rule priority before the existing policy rules")
}

// dump retries a netlink dump the kernel interrupted because the table
// changed under it.
func dump[T any](f func() ([]T, error)) ([]T, error) {
	var err error
	for range 5 {
		var v []T
		if v, err = f(); err == nil {
			return v, nil
		}
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	return nil, err
}

func listRules(h *host, fam int) ([]netlink.Rule, error) {
	r, err := dump(func() ([]netlink.Rule, error) { return h.nl.RuleList(fam) })
	if err != nil {
		return nil, fmt.Errorf("list rules: %w", err)
	}
	return r, nil
}

func listRoutes(h *host, fam int) ([]netlink.Route, error) {
	r, err := dump(func() ([]netlink.Route, error) {
		return h.nl.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	return r, nil
}

// planChanges lists, in order, the changes that steer the traffic, skipping
// settings that already have the needed value. The minimal set, found by
// testing on a client-router-server topology:
//   - IPv4 forwarding is checked on the INPUT device (ip_route_input_slow:
//     IN_DEV_FORWARD), so conf.<dev>.forwarding on both interfaces and both
//     TUNs is enough; the global ip_forward stays as it is.
//   - Packets written into a TUN carry sources reached through the other
//     interface, and the TUN has no IPv4 address: __fib_validate_source
//     then rejects them in both strict and loose mode ("no_addr ... goto
//     last_resort"), so the TUNs' effective rp_filter, max(conf.all,
//     conf.<dev>), must be 0. The TUNs get 0; a non-zero conf.all becomes 0
//     after every other interface (and default) is raised to its value, so
//     no other interface's effective setting changes.
//   - IPv6 forwarding is checked against conf.all.forwarding (ip6_forward)
//     unless the input device has force_forwarding (Linux 6.17+); with it
//     nothing global changes. Without it conf.all.forwarding is set, which
//     rewrites every interface's forwarding: those are recorded to restore.
//   - The TUNs get addr_gen_mode none before they come up, so they have no
//     link-local address and send no router solicitations or MLD reports of
//     their own into the proxy.
func planChanges(h *host, cfg Config, links [4]netlink.Link, tables [2]int, prio int) ([]change, error) {
	var plan []change
	var err error
	set := func(path, want string) {
		if err != nil {
			return
		}
		var cur string
		if cur, err = h.readSysctl(path); err == nil && cur != want {
			plan = append(plan, change{Kind: kindSysctl, Path: path, Prev: cur, Value: want})
		}
	}
	a, b, ta, tb := cfg.Ifaces[0], cfg.Ifaces[1], cfg.TUNs[0], cfg.TUNs[1]
	all4 := []string{a, b, ta, tb}
	for _, n := range all4 {
		set("net/ipv4/conf/"+n+"/forwarding", "1")
	}
	if all, rerr := h.readSysctl("net/ipv4/conf/all/rp_filter"); rerr != nil {
		return nil, rerr
	} else if all != "0" {
		// Raise every other interface (and default, for interfaces
		// created later) to conf.all's value first, so that their
		// effective max(all, dev) never changes; then clear conf.all.
		paths, gerr := h.sysctlGlob("net/ipv4/conf/*/rp_filter")
		if gerr != nil {
			return nil, gerr
		}
		// default first: writing it also rewrites every interface whose
		// value was never set explicitly (devinet_copy_dflt_conf).
		sort.SliceStable(paths, func(i, j int) bool { return strings.Contains(paths[i], "/default/") })
		for _, p := range paths {
			dev := strings.Split(p, "/")[3]
			if dev == "all" || dev == ta || dev == tb {
				continue
			}
			if v, rerr := h.readSysctl(p); rerr != nil {
				return nil, rerr
			} else if v < all { // values are single digits 0-2
				set(p, all)
			}
		}
		set("net/ipv4/conf/all/rp_filter", "0")
	}
	// Written even when already 0, so that the TUNs' values count as set
	// explicitly and a later write of default leaves them alone.
	for _, n := range []string{ta, tb} {
		if err == nil {
			p := "net/ipv4/conf/" + n + "/rp_filter"
			var cur string
			if cur, err = h.readSysctl(p); err == nil {
				plan = append(plan, change{Kind: kindSysctl, Path: p, Prev: cur, Value: "0"})
			}
		}
	}

	v6 := true
	for _, n := range []string{a, b} {
		if v, rerr := h.readSysctl("net/ipv6/conf/" + n + "/disable_ipv6"); rerr != nil || v != "0" {
			v6 = false
		}
	}
	if v6 {
		for _, n := range []string{ta, tb} {
			set("net/ipv6/conf/"+n+"/disable_ipv6", "0")
			if err != nil {
				break
			}
			var mode string
			if mode, err = h.readSysctl("net/ipv6/conf/" + n + "/addr_gen_mode"); err == nil && mode != "1" {
				prev, cerr := strconv.Atoi(mode)
				if cerr != nil {
					return nil, fmt.Errorf("addr_gen_mode of %s: %q", n, mode)
				}
				none := 1 // IN6_ADDR_GEN_MODE_NONE
				plan = append(plan, change{Kind: kindAddrGenMode, Link: n, PrevMode: &prev, Mode: &none})
			}
		}
		allFwd, rerr := h.readSysctl("net/ipv6/conf/all/forwarding")
		if rerr != nil {
			return nil, rerr
		}
		if allFwd == "1" {
			// Every interface forwards already (a router, or a
			// container started with --sysctl
			// net.ipv6.conf.all.forwarding=1): nothing to change.
		} else if _, ferr := h.readSysctl("net/ipv6/conf/" + a + "/force_forwarding"); ferr == nil && !cfg.hooks.noForceForwarding {
			for _, n := range all4 {
				set("net/ipv6/conf/"+n+"/force_forwarding", "1")
			}
		} else {
			paths, gerr := h.sysctlGlob("net/ipv6/conf/*/forwarding")
			if gerr != nil {
				return nil, gerr
			}
			for _, p := range paths {
				if p == "net/ipv6/conf/all/forwarding" {
					continue
				}
				v, rerr := h.readSysctl(p)
				if rerr != nil {
					return nil, rerr
				}
				plan = append(plan, change{Kind: kindSysctl, Path: p, Prev: v})
			}
			set("net/ipv6/conf/all/forwarding", "1")
		}
	}
	if err != nil {
		return nil, err
	}

	for i := range 2 {
		l, tun := links[i], links[2+i]
		if tun.Attrs().MTU != l.Attrs().MTU {
			plan = append(plan, change{Kind: kindMTU, Link: tun.Attrs().Name, PrevMTU: tun.Attrs().MTU, MTU: l.Attrs().MTU})
		}
		if tun.Attrs().Flags&net.FlagUp == 0 {
			plan = append(plan, change{Kind: kindUp, Link: tun.Attrs().Name})
		}
	}
	fams := []int{4}
	if v6 {
		fams = append(fams, 6)
	}
	for _, f := range fams {
		for i := range 2 {
			plan = append(plan, change{Kind: kindRoute, Family: f, Table: tables[i], Link: cfg.TUNs[i]})
		}
	}
	// Rules last: traffic is diverted only once its way back out exists.
	for _, f := range fams {
		plan = append(plan,
			change{Kind: kindRule, Family: f, Priority: prio, Iif: a, Table: tables[1]},
			change{Kind: kindRule, Family: f, Priority: prio, Iif: b, Table: tables[0]})
	}
	return plan, nil
}
