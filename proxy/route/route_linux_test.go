package route

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/wanlab/wanlab/internal/hostfile"

	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/internal/testenv"
)

// router is a namespace with two veth interfaces (ra, rb) whose peers are
// in the same namespace, and the two TUNs of a proxy between ra and rb.
type router struct {
	*testenv.Node
	cfg  Config
	tuns [2]*os.File
}

func newRouter(t *testing.T) *router {
	n := testenv.NewNode(t)
	n.Veth(t, "ra", "ra-peer", nil)
	n.Veth(t, "rb", "rb-peer", nil)
	n.Addr(t, "ra", "10.91.1.1/24")
	n.Addr(t, "rb", "10.91.2.1/24")
	n.Addr(t, "ra", "fd00:91:1::1/64")
	cfg := Config{Ifaces: [2]string{"ra", "rb"}, StateDir: t.TempDir(), Netns: n.Name}
	n.WaitSettled(t, "ra", "rb", "ra-peer", "rb-peer")
	return &router{Node: n, cfg: cfg}
}

func (r *router) openTUNs(t *testing.T) {
	for i, name := range TUNNames(r.cfg.Ifaces) {
		r.tuns[i] = openTUN(t, r.Node, name)
	}
}

func TestTUNNames(t *testing.T) {
	got := TUNNames([2]string{"eth0", "enp0s31f6-long1"})
	if got[0] != "wl-eth0" {
		t.Errorf("short name: %q", got[0])
	}
	if len(got[1]) > 15 || !strings.HasPrefix(got[1], "wlenp0~") {
		t.Errorf("long name: %q", got[1])
	}
	other := TUNNames([2]string{"enp0s31f6-long2", "enp0s31f6-long1"})
	if other[0] == got[1] || other[1] != got[1] {
		t.Errorf("names not unique/deterministic: %q %q", other, got)
	}
}

func TestApplyUndoRestores(t *testing.T) {
	for _, tc := range []struct {
		name        string
		strictRPF   bool
		forceFwd    bool
		wantSysctls []string
	}{
		{"force_forwarding", true, true, []string{"net/ipv6/conf/ra/force_forwarding", "net/ipv4/conf/all/rp_filter"}},
		{"all.forwarding", false, false, []string{"net/ipv6/conf/all/forwarding"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRouter(t)
			r.openTUNs(t)
			if tc.strictRPF {
				r.Sysctl(t, "net/ipv4/conf/all/rp_filter", "1")
			}
			// A per-interface value that conf.all.forwarding would overwrite.
			r.Sysctl(t, "net/ipv6/conf/rb-peer/forwarding", "1")
			r.cfg.hooks.noForceForwarding = !tc.forceFwd
			before := r.Snapshot(t)

			a, err := Apply(r.cfg)
			if err != nil {
				t.Fatal(err)
			}
			st, err := loadState(a.StatePath())
			if err != nil {
				t.Fatal(err)
			}
			if st.PID != os.Getpid() || len(st.Changes) == 0 {
				t.Fatalf("state file: pid %d, %d changes", st.PID, len(st.Changes))
			}
			during := r.Snapshot(t)
			tables, prio := a.Tables()
			for _, want := range []string{
				fmt.Sprintf("rule fam 2 %d iif \"ra\" oif \"\" table %d", prio, tables[1]),
				fmt.Sprintf("rule fam 2 %d iif \"rb\" oif \"\" table %d", prio, tables[0]),
				fmt.Sprintf("rule fam 10 %d iif \"ra\" oif \"\" table %d", prio, tables[1]),
				fmt.Sprintf("route fam 2 table %d dst 0.0.0.0/0", tables[0]),
				fmt.Sprintf("route fam 10 table %d dst ::/0", tables[1]),
				"sysctl net/ipv4/conf/ra/forwarding=1",
				"sysctl net/ipv4/conf/wl-rb/rp_filter=0",
			} {
				if !strings.Contains(during, want) {
					t.Errorf("after Apply, missing %q in\n%s", want, during)
				}
			}
			for _, p := range tc.wantSysctls {
				if strings.Contains(before, "sysctl "+p+"=") && !strings.Contains(testenv.DiffLines(before, during), p) {
					t.Errorf("sysctl %s not changed", p)
				}
			}
			if prio <= 0 || prio >= 32766 || tables[0] == tables[1] {
				t.Errorf("priority %d tables %v", prio, tables)
			}
			// The same interfaces cannot be claimed twice, and Cleanup
			// leaves a live proxy of this process alone.
			if _, err := Apply(r.cfg); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "already used") {
				t.Errorf("second Apply: %v", err)
			}
			if undone, err := Cleanup(r.cfg.StateDir); err != nil || len(undone) != 0 {
				t.Errorf("Cleanup during Apply: %v %v", undone, err)
			}
			if err := a.Undo(); err != nil {
				t.Fatal(err)
			}
			if after := r.Snapshot(t); after != before {
				t.Errorf("Undo did not restore:\n%s", testenv.DiffLines(before, after))
			}
			if _, err := os.Stat(a.StatePath()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("state file still there: %v", err)
			}
			// Undo released the lock: the interfaces can be claimed again,
			// and no lock or state file is left behind.
			l, err := Acquire(r.cfg)
			if err != nil {
				t.Fatal(err)
			}
			l.Release()
			// (.apply.lock, shared by every proxy, stays.)
			if left, _ := filepath.Glob(r.cfg.StateDir + "/[^.]*"); len(left) != 0 {
				t.Errorf("files left in the state dir: %v", left)
			}
		})
	}
}

func TestApplyRollsBackAtEveryStep(t *testing.T) {
	r := newRouter(t)
	r.openTUNs(t)
	r.Sysctl(t, "net/ipv4/conf/all/rp_filter", "1")
	before := r.Snapshot(t)
	injected := errors.New("injected failure")
	for step := 0; ; step++ {
		n := 0
		cfg := r.cfg
		cfg.hooks.beforeChange = func(c change) error {
			if n == step {
				return fmt.Errorf("%s: %w", c, injected)
			}
			n++
			return nil
		}
		a, err := Apply(cfg)
		if err == nil {
			// step is past the last change: every failure point was tried.
			if step < 8 {
				t.Fatalf("only %d changes", step)
			}
			if err := a.Undo(); err != nil {
				t.Fatal(err)
			}
			break
		}
		if !errors.Is(err, injected) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("step %d: error %q", step, err)
		}
		r.RequireSnapshot(t, before, fmt.Sprintf("failure at step %d not rolled back", step))
		if _, err := os.Stat(r.cfg.StatePath()); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("step %d: state file left: %v", step, err)
		}
	}
	r.RequireSnapshot(t, before, "not restored")
}

func TestMissingInterface(t *testing.T) {
	r := newRouter(t)
	r.openTUNs(t)
	before := r.Snapshot(t)
	cfg := r.cfg
	cfg.Ifaces[1] = "eth9"
	cfg.TUNs = [2]string{"wl-ra", "wl-rb"}
	_, err := Apply(cfg)
	if err == nil || err.Error() != `interface "eth9": not found` {
		t.Fatalf("got %v", err)
	}
	cfg = r.cfg
	cfg.TUNs = TUNNames(cfg.Ifaces)
	cfg.TUNs[0] = "wl-none"
	if _, err = Apply(cfg); err == nil || err.Error() != `TUN interface "wl-none": not found` {
		t.Fatalf("got %v", err)
	}
	r.RequireSnapshot(t, before, "changed")
}

func TestNoCapNetAdmin(t *testing.T) {
	r := newRouter(t)
	r.openTUNs(t)
	before := r.Snapshot(t)
	errc := make(chan error, 1)
	go func() {
		// Capabilities are per thread: drop CAP_NET_ADMIN on this locked
		// thread only (it is never unlocked, so it dies with the goroutine).
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		data[0].Effective &^= 1 << unix.CAP_NET_ADMIN
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		_, err := Apply(r.cfg)
		errc <- err
	}()
	err := <-errc
	if err == nil || !errors.Is(err, os.ErrPermission) {
		t.Fatalf("want a permission error, got %v", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("multi-line error %q", err)
	}
	t.Logf("error: %v", err)
	r.RequireSnapshot(t, before, "changed")
}

// childEnv makes the test binary act as a proxy that applies its routing
// and waits to be killed (see TestMain).
const childEnv = "WANLAB_ROUTE_TEST_CHILD"

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		os.Exit(crashChild(v))
	}
	os.Exit(m.Run())
}

// crashChild runs in a child process: "netns statedir".
func crashChild(arg string) int {
	f := strings.Fields(arg)
	cfg := Config{Ifaces: [2]string{"ra", "rb"}, Netns: f[0], StateDir: f[1]}
	ns, err := nsrun.Open(f[0])
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	for _, name := range TUNNames(cfg.Ifaces) {
		// Closed by the kernel when the process is killed.
		if _, err := openTUNIn(ns, name); err != nil {
			fmt.Println("error", err)
			return 1
		}
	}
	if _, err := Apply(cfg); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("ready")
	select {}
}

func TestCleanupAfterSIGKILL(t *testing.T) {
	r := newRouter(t)
	r.Sysctl(t, "net/ipv4/conf/all/rp_filter", "1")
	before := r.Snapshot(t)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+r.Name+" "+r.cfg.StateDir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("child: %q %v", line, err)
	}
	// A live proxy holds the interfaces: refused, naming its pid; Cleanup
	// leaves it alone.
	_, err = Acquire(r.cfg)
	if err == nil || !strings.Contains(err.Error(), "pid "+strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("Acquire while child runs: %v", err)
	}
	if undone, err := Cleanup(r.cfg.StateDir); err != nil || len(undone) != 0 {
		t.Fatalf("Cleanup with a live proxy: %v %v", undone, err)
	}
	if r.Snapshot(t) == before {
		t.Fatal("child changed nothing")
	}

	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	// The TUNs vanish with the process; the rules and sysctls stay.
	testenv.WaitFor(t, "the TUNs to vanish", func() bool {
		_, e1 := r.NL.LinkByName("wl-ra")
		_, e2 := r.NL.LinkByName("wl-rb")
		return e1 != nil && e2 != nil
	})
	if r.Snapshot(t) == before {
		t.Fatal("nothing left behind to clean up")
	}
	undone, err := Cleanup(r.cfg.StateDir)
	if err != nil || len(undone) != 1 || undone[0] != r.cfg.StatePath() {
		t.Fatalf("Cleanup: %v %v", undone, err)
	}
	r.RequireSnapshot(t, before, "Cleanup did not restore")
	if undone, err := Cleanup(r.cfg.StateDir); err != nil || len(undone) != 0 {
		t.Fatalf("second Cleanup: %v %v", undone, err)
	}
	// The dead proxy's lock files go too.
	if locks, _ := filepath.Glob(filepath.Join(r.cfg.StateDir, "*"+lockSuffix)); len(locks) != 0 {
		t.Errorf("lock files left after Cleanup: %v", locks)
	}
}

// TestCleanupDeadPIDStateFile: a state file whose proxy is gone (dead pid,
// locks free) is undone by Cleanup, and by Acquire on the same interfaces.
func TestCleanupDeadPIDStateFile(t *testing.T) {
	for _, via := range []string{"Cleanup", "Acquire"} {
		t.Run(via, func(t *testing.T) {
			r := newRouter(t)
			r.openTUNs(t)
			before := r.Snapshot(t)
			a, err := Apply(r.cfg)
			if err != nil {
				t.Fatal(err)
			}
			// Simulate the crash: the locks go, the pid is one that has exited.
			a.ownLock.Release()
			st, _ := loadState(a.StatePath())
			dead := exec.Command("true")
			dead.Run()
			st.PID = dead.Process.Pid
			if err := st.save(a.StatePath()); err != nil {
				t.Fatal(err)
			}
			if via == "Cleanup" {
				undone, err := Cleanup(r.cfg.StateDir)
				if err != nil || len(undone) != 1 {
					t.Fatalf("Cleanup: %v %v", undone, err)
				}
			} else {
				l, err := Acquire(r.cfg)
				if err != nil {
					t.Fatal(err)
				}
				l.Release()
			}
			r.RequireSnapshot(t, before, "not restored")
			if _, err := os.Stat(a.StatePath()); !errors.Is(err, os.ErrNotExist) {
				t.Fatal("state file left")
			}
		})
	}
}

func TestAcquireRefusesSecond(t *testing.T) {
	testenv.RequireRoot(t)
	cfg := Config{Ifaces: [2]string{"x0", "x1"}, StateDir: t.TempDir(), Netns: "n"}
	l, err := Acquire(cfg)
	if err != nil {
		t.Fatal(err)
	}
	other := cfg
	other.Ifaces = [2]string{"x2", "x1"}
	if _, err := Acquire(other); err == nil || !strings.Contains(err.Error(), `interface "x1" is already used`) {
		t.Fatalf("second Acquire: %v", err)
	}
	// A failed claim releases the part it got (x2).
	third := cfg
	third.Ifaces = [2]string{"x2", "x3"}
	l3, err := Acquire(third)
	if err != nil {
		t.Fatal(err)
	}
	l3.Release()
	l.Release()
	if l, err = Acquire(other); err != nil {
		t.Fatal(err)
	}
	l.Release()
}

// TestAvoidsExistingRulesAndTables: with a user rule at priority 100 into
// table 4200, the proxy's rules go before it (99) and its tables skip 4200.
func TestAvoidsExistingRulesAndTables(t *testing.T) {
	r := newRouter(t)
	r.openTUNs(t)
	for _, fam := range []int{4, 6} {
		rule := ruleOf(change{Family: fam, Priority: 100, Iif: "lo", Table: 4200})
		if err := r.NL.RuleAdd(rule); err != nil {
			t.Fatal(err)
		}
	}
	before := r.Snapshot(t)
	a, err := Apply(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	tables, prio := a.Tables()
	if prio != 99 || tables[0] == 4200 || tables[1] == 4200 {
		t.Errorf("priority %d tables %v: want 99 and not 4200", prio, tables)
	}
	if err := a.Undo(); err != nil {
		t.Fatal(err)
	}
	r.RequireSnapshot(t, before, "not restored")
}

// BenchmarkApplyUndo measures setting up and tearing down the routing of
// one proxy (both families, starting from forwarding off and strict
// rp_filter): what a proxy adds to its start and stop.
func BenchmarkApplyUndo(b *testing.B) {
	testenv.RequireRoot(b)
	n := testenv.NewNode(b)
	name, ns := n.Name, n.NS
	n.Veth(b, "ra", "ra-peer", nil)
	n.Veth(b, "rb", "rb-peer", nil)
	cfg := Config{Ifaces: [2]string{"ra", "rb"}, StateDir: b.TempDir(), Netns: name}
	var files []*os.File
	for _, tn := range TUNNames(cfg.Ifaces) {
		f, err := openTUNIn(ns, tn)
		if err != nil {
			b.Fatal(err)
		}
		files = append(files, f)
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	b.ResetTimer()
	for range b.N {
		a, err := Apply(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Undo(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCurrentNamespace runs Apply, Undo and Cleanup with Netns "" from a
// thread inside the router namespace: what `wanlab proxy` does on a router
// host without --netns.
func TestCurrentNamespace(t *testing.T) {
	r := newRouter(t)
	r.openTUNs(t)
	r.Sysctl(t, "net/ipv4/conf/all/rp_filter", "1")
	before := r.Snapshot(t)
	cfg := r.cfg
	cfg.Netns = ""
	var during string
	err := nsrun.Do(r.NS, func() error {
		a, err := Apply(cfg)
		if err != nil {
			return err
		}
		// The current namespace has a name: the files carry it, as if
		// Netns had been given.
		if !strings.HasSuffix(a.StatePath(), "/"+r.Name+"@ra-rb.route.json") {
			return fmt.Errorf("state path %s", a.StatePath())
		}
		during = r.Snapshot(t)
		// Crash: locks released, nothing undone; Cleanup from the same
		// namespace restores.
		a.ownLock.Release()
		a.setInactive()
		undone, err := Cleanup(cfg.StateDir)
		if err != nil || len(undone) != 1 {
			return fmt.Errorf("cleanup: %v %v", undone, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if during == before || !strings.Contains(during, `iif "ra"`) {
		t.Fatal("Apply in the current namespace changed nothing there")
	}
	r.RequireSnapshot(t, before, "not restored")
}

// TestCleanupRefusesOtherNamespace: a state made in an unnamed namespace
// is not undone from another one (its sysctls would land on the wrong
// host), and is undone from inside its own.
func TestCleanupRefusesOtherNamespace(t *testing.T) {
	r := newRouter(t)
	r.openTUNs(t)
	r.Sysctl(t, "net/ipv4/conf/all/rp_filter", "1")
	before := r.Snapshot(t)
	a, err := Apply(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.ownLock.Release()
	a.setInactive()
	// Make it the state of a proxy that ran, without a name, in the
	// router namespace.
	st, err := loadState(a.StatePath())
	if err != nil {
		t.Fatal(err)
	}
	if st.NetnsInode == 0 {
		t.Fatal("namespace inode not recorded")
	}
	os.Remove(a.StatePath())
	st.Netns = ""
	anon := r.cfg
	anon.Netns = ""
	if err := st.save(anon.StatePath()); err != nil {
		t.Fatal(err)
	}
	undone, err := Cleanup(r.cfg.StateDir)
	if err == nil || len(undone) != 0 || !strings.Contains(err.Error(), "belongs to network namespace") {
		t.Fatalf("Cleanup from another namespace: %v %v", undone, err)
	}
	if r.Snapshot(t) == before {
		t.Fatal("the refused Cleanup restored the router anyway?")
	}
	err = nsrun.Do(r.NS, func() error {
		undone, err := Cleanup(r.cfg.StateDir)
		if err != nil || len(undone) != 1 {
			return fmt.Errorf("Cleanup inside: %v %v", undone, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r.RequireSnapshot(t, before, "not restored")
}

// TestCleanupSweepsStaleLocks: a lock file nobody holds (its proxy died
// before writing state) is removed; one a live holder has flocked stays.
func TestCleanupSweepsStaleLocks(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "ra-rb.ra"+lockSuffix)
	live := filepath.Join(dir, "xa-xb.xa"+lockSuffix)
	if err := os.WriteFile(stale, []byte("999999999\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lk, err := hostfile.LockFile(live, true)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(false)
	if undone, err := Cleanup(dir); err != nil || len(undone) != 0 {
		t.Fatalf("Cleanup: %v %v", undone, err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale lock %s still there (%v)", stale, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("held lock %s removed: %v", live, err)
	}
}
