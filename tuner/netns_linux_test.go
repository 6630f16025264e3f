package tuner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/internal/testenv"
)

// nsTuner is a tuner on the live /proc/sys of a fresh namespace.
func nsTuner(t *testing.T, root string) (*Tuner, netns.NsHandle) {
	t.Helper()
	name, h := testenv.NetNS(t)
	return &Tuner{
		FS:        ProcSys{Root: root},
		Netns:     name,
		Enter:     func(fn func() error) error { return nsrun.Do(h, fn) },
		BackupDir: t.TempDir(),
	}, h
}

// rawIn reads keys' bytes inside h (netns.None() = this namespace).
func rawIn(t *testing.T, h netns.NsHandle, keys ...string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := nsrun.Do(h, func() error {
		for _, k := range keys {
			b, err := Host.ReadRaw(k)
			if err != nil {
				return err
			}
			m[k] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var nsKeys = []string{"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_congestion_control",
	"net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat"}

func sameRaw(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got[k], v)
		}
	}
}

func TestNetnsApplyRevertRoundTrip(t *testing.T) {
	tu, h := nsTuner(t, Host.Root)
	hostBefore := rawIn(t, netns.None(), nsKeys...)
	before := rawIn(t, h, nsKeys...)
	set := []Assignment{
		{"net.ipv4.tcp_rmem", "4096 87380 6291456"},
		{"net.ipv4.tcp_wmem", "4096 4096 4096"},
		{"net.ipv4.tcp_congestion_control", "reno"},
		{"net.ipv4.tcp_slow_start_after_idle", "0"},
		{"net.ipv4.tcp_notsent_lowat", "131072"},
	}
	res, err := tu.Apply(set, false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Written != len(set) {
		t.Errorf("written %d of %d", res.Written, len(set))
	}
	after := rawIn(t, h, nsKeys...)
	for _, a := range set {
		if normalize(after[a.Key]) != a.Value {
			t.Errorf("in the namespace %s = %q, want %q", a.Key, after[a.Key], a.Value)
		}
	}
	// The namespace's values are its own: the host did not move.
	sameRaw(t, "host during apply", rawIn(t, netns.None(), nsKeys...), hostBefore)
	// The show report inside the namespace sees the new values and notes
	// the host-wide keys.
	var s *Snapshot
	if err := tu.Enter(func() error { var err error; s, err = ReadSnapshot(Host, tu.Netns); return err }); err != nil {
		t.Fatal(err)
	}
	if s.TCPWmem.Max != 4096 || s.CC != "reno" || s.TCPMem != nil {
		t.Errorf("snapshot in netns: wmem %v cc %s tcp_mem %v", s.TCPWmem, s.CC, s.TCPMem)
	}

	if _, err := tu.Revert(false); err != nil {
		t.Fatal(err)
	}
	sameRaw(t, "after revert", rawIn(t, h, nsKeys...), before)
	sameRaw(t, "host after revert", rawIn(t, netns.None(), nsKeys...), hostBefore)
}

func TestNetnsDryRunChangesNothing(t *testing.T) {
	tu, h := nsTuner(t, Host.Root)
	before := rawIn(t, h, nsKeys...)
	res, err := tu.Apply([]Assignment{{"net.ipv4.tcp_rmem", "4096 131072 67108864"}, {"net.ipv4.tcp_congestion_control", "reno"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != 2 || res.Written != 0 {
		t.Errorf("dry run = %+v", res)
	}
	sameRaw(t, "after dry run", rawIn(t, h, nsKeys...), before)
	if _, err := os.Stat(tu.BackupPath()); err == nil {
		t.Error("dry run wrote a backup")
	}
}

// The failure is injected through the fs root: a tree of links to the
// namespace's real sysctls in which tcp_wmem points at a read-only one.
func TestNetnsFailingWriteRollsBack(t *testing.T) {
	root := t.TempDir()
	link := func(key, target string) {
		p := ProcSys{Root: root}.Path(key)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"kernel.osrelease", "net.ipv4.tcp_rmem", "net.ipv4.tcp_notsent_lowat", "net.ipv4.tcp_available_congestion_control"} {
		link(k, Host.Path(k)) // resolved when opened, on the namespace's thread
	}
	link("net.ipv4.tcp_wmem", readOnlyFile)
	tu, h := nsTuner(t, root)
	before := rawIn(t, h, nsKeys...)
	_, err := tu.Apply([]Assignment{
		{"net.ipv4.tcp_rmem", "4096 131072 67108864"},
		{"net.ipv4.tcp_notsent_lowat", "16384"},
		{"net.ipv4.tcp_wmem", "4096 16384 67108864"},
	}, false)
	if err == nil || !strings.Contains(err.Error(), "write net.ipv4.tcp_wmem") || !strings.Contains(err.Error(), "2 key(s) written before it were restored") {
		t.Fatalf("Apply = %v, want the tcp_wmem write to fail and 2 keys restored", err)
	}
	sameRaw(t, "after rollback", rawIn(t, h, nsKeys...), before)
	if _, err := os.Stat(tu.BackupPath()); !os.IsNotExist(err) {
		t.Errorf("backup left after rollback: %v", err)
	}
}

// net.core.rmem_max is host-wide: the tuner refuses it inside a namespace,
// and the kernel would too (the file is read-only there).
func TestNetnsRefusesHostWideKeys(t *testing.T) {
	tu, h := nsTuner(t, Host.Root)
	hostBefore := rawIn(t, netns.None(), "net.core.rmem_max")
	_, err := tu.Apply([]Assignment{{"net.ipv4.tcp_rmem", "4096 131072 67108864"}, {"net.core.rmem_max", "67108864"}}, false)
	if !errors.Is(err, ErrHostWide) || !strings.Contains(err.Error(), "net.core.rmem_max") {
		t.Fatalf("Apply = %v, want ErrHostWide naming net.core.rmem_max", err)
	}
	kerr := nsrun.Do(h, func() error { return Host.Write("net.core.rmem_max", []byte("67108864\n")) })
	if kerr == nil {
		t.Error("the kernel accepted net.core.rmem_max inside a namespace; the refusal is stale")
	}
	t.Logf("kernel inside the namespace: %v", kerr)

	// A default congestion control outside the allowed list: refused by
	// the tuner, and by the kernel with EPERM.
	allowed := rawIn(t, h, "net.ipv4.tcp_allowed_congestion_control")["net.ipv4.tcp_allowed_congestion_control"]
	avail := strings.Fields(rawIn(t, h, "net.ipv4.tcp_available_congestion_control")["net.ipv4.tcp_available_congestion_control"])
	for _, cc := range avail {
		if strings.Contains(" "+normalize(allowed)+" ", " "+cc+" ") {
			continue
		}
		if _, err := tu.Apply([]Assignment{{"net.ipv4.tcp_congestion_control", cc}}, false); !errors.Is(err, ErrInvalid) {
			t.Errorf("default cc %s outside the allowed list (%s): Apply = %v", cc, allowed, err)
		}
		kerr := nsrun.Do(h, func() error { return Host.Write("net.ipv4.tcp_congestion_control", []byte(cc+"\n")) })
		if !errors.Is(kerr, os.ErrPermission) {
			t.Errorf("kernel on default cc %s in a namespace: %v, want EPERM", cc, kerr)
		}
	}
	sameRaw(t, "host rmem_max", rawIn(t, netns.None(), "net.core.rmem_max"), hostBefore)
	if v := rawIn(t, h, "net.ipv4.tcp_rmem")["net.ipv4.tcp_rmem"]; strings.Contains(v, "67108864") {
		t.Error("a refused set wrote tcp_rmem")
	}
}
