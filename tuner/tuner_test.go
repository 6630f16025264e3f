package tuner

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wanlab/wanlab/units"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fixture copies testdata/name into a temporary root the test may change.
func fixture(t *testing.T, name string) ProcSys {
	t.Helper()
	dst := t.TempDir()
	src := filepath.Join("testdata", name)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return ProcSys{Root: dst}
}

func snapshot(t *testing.T, p ProcSys, netns string) *Snapshot {
	t.Helper()
	s, err := ReadSnapshot(p, netns)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tree returns every file's content below root, to prove nothing changed.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil || d.IsDir():
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			m[p] = "-> " + target
		default:
			b, _ := os.ReadFile(p)
			m[p] = string(b)
		}
		return nil
	})
	return m
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file (go test -update to accept):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol*math.Abs(want) }

func TestParseKernelVersion(t *testing.T) {
	for in, want := range map[string][2]int{
		"6.18.44-fc-v669": {6, 18}, "5.4.0-149-generic": {5, 4}, "6.6": {6, 6}, "4.19-rc1": {4, 19},
	} {
		v, err := ParseKernelVersion(in)
		if err != nil || v.Major != want[0] || v.Minor != want[1] {
			t.Errorf("ParseKernelVersion(%q) = %v, %v", in, v, err)
		}
	}
	for _, bad := range []string{"", "6", "x.y", "6.x"} {
		if _, err := ParseKernelVersion(bad); err == nil {
			t.Errorf("ParseKernelVersion(%q) accepted", bad)
		}
	}
	if !(KernelVersion{Major: 6, Minor: 6}).AtLeast(6, 6) || (KernelVersion{Major: 6, Minor: 5}).AtLeast(6, 6) {
		t.Error("AtLeast wrong around 6.6")
	}
}

func TestWindowModel(t *testing.T) {
	old := KernelVersion{Major: 5, Minor: 4}
	cur := KernelVersion{Major: 6, Minor: 18}
	const sp = 6291456
	for _, c := range []struct {
		name string
		m    WindowModel
		want units.Size
	}{
		{"5.4 adv 1", WindowModel{Kernel: old, AdvWinScale: 1}, sp / 2},
		{"5.4 adv 2", WindowModel{Kernel: old, AdvWinScale: 2}, sp - sp/4},
		{"5.4 adv 0", WindowModel{Kernel: old, AdvWinScale: 0}, sp},
		{"5.4 adv -2", WindowModel{Kernel: old, AdvWinScale: -2}, sp / 4},
		// Frames in 4 KiB pages: the grow-window stall halves the window.
		{"5.4 adv 1 ratio 0.35", WindowModel{Kernel: old, AdvWinScale: 1, PayloadRatio: 1448.0 / 4096}, sp / 4},
		{"5.4 adv 1 ratio 0.2", WindowModel{Kernel: old, AdvWinScale: 1, PayloadRatio: 0.2}, sp / 8},
		{"5.4 adv 1 ratio 0.7", WindowModel{Kernel: old, AdvWinScale: 1, PayloadRatio: 0.7}, sp / 2},
		{"6.18 default", WindowModel{Kernel: cur, AdvWinScale: 1}, sp / 2},
		{"6.18 adv ignored", WindowModel{Kernel: cur, AdvWinScale: 3}, sp / 2},
		{"6.18 ratio 0.35", WindowModel{Kernel: cur, PayloadRatio: 0.35}, 2202009},
	} {
		got := c.m.Window(sp)
		if got != c.want {
			t.Errorf("%s: Window(%d) = %d, want %d", c.name, sp, got, c.want)
		}
		if r := float64(got) / sp; !near(r, c.m.Ratio(), 1e-6) {
			t.Errorf("%s: Ratio() = %v, Window/space = %v", c.name, c.m.Ratio(), r)
		}
		if back := c.m.Space(got); !near(float64(back), sp, 1e-6) {
			t.Errorf("%s: Space(Window(x)) = %d, want %d", c.name, back, sp)
		}
	}
}

// Seed 001: 35 ms, tcp_rmem max 6 MiB on the receiver, iperf3 stuck at a
// 1.51 MiB window and 43 MB/s. With frames in 4 KiB pages (payload ratio
// 0.35) the pre-6.6 window rule gives exactly that window.
func TestSeed001ShowCeiling(t *testing.T) {
	s := snapshot(t, fixture(t, "seed001-client"), "")
	m := ModelFor(s)
	m.PayloadRatio = 1448.0 / 4096
	c := Ceilings(s, m, 35*time.Millisecond)[0]
	if c.Side != "receiver" || c.Window != 1572864 {
		t.Fatalf("receive ceiling = %+v, want a 1.5 MiB window", c)
	}
	// iperf3 reported 1.51 MiB of cwnd and 42.5 MB per second (357 Mbit/s).
	if mbps := c.Rate.BytesPerSecond() / 1e6; !near(mbps, 43, 0.06) {
		t.Errorf("predicted %.1f MB/s, seed measured about 43 MB/s", mbps)
	}
	var out bytes.Buffer
	if err := NewReport(s, m, 35*time.Millisecond).WriteText(&out); err != nil {
		t.Fatal(err)
	}
	golden(t, "show-seed001-35ms.txt", out.Bytes())
}

func TestSeed001Plan(t *testing.T) {
	s := snapshot(t, fixture(t, "seed001-client"), "")
	m := ModelFor(s)
	m.PayloadRatio = 1448.0 / 4096
	p, err := MakePlan(s, m, PlanInput{RTT: 35 * time.Millisecond, Rate: 800 * units.Mbit, Streams: 1})
	if err != nil {
		t.Fatal(err)
	}
	if p.BDP != 3500000 || p.PerStreamWindow != 3500000 {
		t.Errorf("BDP = %d, per stream %d, want 3500000", p.BDP, p.PerStreamWindow)
	}
	changes := map[string]Change{}
	for _, c := range p.Changes {
		changes[c.Key] = c
	}
	// The seed's author set tcp_rmem max to 16 MiB and reached 100 MB/s.
	if c := changes["net.ipv4.tcp_rmem"]; c.To != "4096 87380 16777216" || c.Side != "receiver" || c.Reason == "" {
		t.Errorf("tcp_rmem change = %+v, want max 16777216 on the receiver", c)
	}
	if _, ok := changes["net.ipv4.tcp_wmem"]; ok {
		t.Errorf("tcp_wmem 4 MiB holds a 3.5 MB window; plan changed it: %+v", changes["net.ipv4.tcp_wmem"])
	}
	if c := changes["net.core.rmem_max"]; c.To != "8388608" || !c.HostOnly {
		t.Errorf("rmem_max change = %+v, want 8388608, host-only", c)
	}
	if p.After < 800*units.Mbit || p.Current >= 800*units.Mbit {
		t.Errorf("current %v, after %v: want below, then at least 800 Mbit/s", p.Current, p.After)
	}
	var out bytes.Buffer
	p.WriteText(&out)
	golden(t, "plan-seed001-35ms-100MBps.txt", out.Bytes())

	// Without the NIC's ratio the model assumes the adv_win_scale share:
	// an 8 MiB buffer gives the 4 MiB window 3.5 MB needs.
	p2, _ := MakePlan(s, ModelFor(s), PlanInput{RTT: 35 * time.Millisecond, Rate: 800 * units.Mbit, Streams: 1})
	if p2.Changes[0].To != "4096 87380 8388608" {
		t.Errorf("plan without ratio: %+v", p2.Changes[0])
	}
	// Four streams need a quarter of the window each: 875 kB needs a
	// 3.5 MB buffer, which the 6 MiB max already allows.
	p4, _ := MakePlan(s, m, PlanInput{RTT: 35 * time.Millisecond, Rate: 800 * units.Mbit, Streams: 4})
	if p4.PerStreamWindow != 875000 || p4.After < 200*units.Mbit {
		t.Errorf("4 streams: window %d, after %v", p4.PerStreamWindow, p4.After)
	}
	for _, c := range p4.Changes {
		if c.Key == "net.ipv4.tcp_rmem" {
			t.Errorf("4 streams changed tcp_rmem: %+v", c)
		}
	}
}

// Seed 000: the server pinned tcp_wmem to 4096. The sender then keeps one
// skb of at most the size goal (65160 bytes at MSS 1448) in flight, so the
// rate falls as 1/RTT.
func TestSeed000SendCeiling(t *testing.T) {
	s := snapshot(t, fixture(t, "seed000-server"), "")
	m := ModelFor(s)
	for _, c := range []struct {
		rtt  time.Duration
		mbps float64
	}{{10 * time.Millisecond, 6.516}, {100 * time.Millisecond, 0.6516}, {200 * time.Millisecond, 0.3258}} {
		var send *Ceiling
		cs := Ceilings(s, m, c.rtt)
		for i := range cs {
			if cs[i].Limit == "sender, autotuned sockets" {
				send = &cs[i]
			}
		}
		if send == nil || send.Buffer != 4096 || send.Window != 65160 {
			t.Fatalf("send ceiling = %+v, want buffer 4096, window 65160", send)
		}
		if got := send.Rate.BytesPerSecond() / 1e6; !near(got, c.mbps, 0.001) {
			t.Errorf("at %v: %.4f MB/s, want %.4f", c.rtt, got, c.mbps)
		}
		if minCeiling(s, m, c.rtt) != send.Rate {
			t.Errorf("at %v the send buffer should be the lowest ceiling", c.rtt)
		}
	}
	var out bytes.Buffer
	NewReport(s, m, 100*time.Millisecond).WriteText(&out)
	golden(t, "show-seed000-100ms.txt", out.Bytes())

	p, err := MakePlan(s, m, PlanInput{RTT: 100 * time.Millisecond, Rate: 400 * units.Mbit, Streams: 1})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range p.Changes {
		if c.Key == "net.ipv4.tcp_wmem" {
			found = true
			if c.To != "4096 4096 8388608" || c.Side != "sender" {
				t.Errorf("tcp_wmem change = %+v, want max 8 MiB on the sender", c)
			}
		}
	}
	if !found {
		t.Error("plan for a 4096-byte send buffer did not change tcp_wmem")
	}
}

func TestShowObsoleteAdvWinScaleAndNetnsNotes(t *testing.T) {
	s := snapshot(t, fixture(t, "linux618"), "")
	if n := noteOf(s, "net.ipv4.tcp_adv_win_scale"); !strings.Contains(n, "obsolete since Linux 6.6") {
		t.Errorf("6.18 adv_win_scale note = %q", n)
	}
	old := snapshot(t, fixture(t, "seed001-client"), "")
	if n := noteOf(old, "net.ipv4.tcp_adv_win_scale"); n != "" {
		t.Errorf("5.4 adv_win_scale note = %q, want none", n)
	}
	// Inside a namespace tcp_mem is absent and net.core is read-only.
	p := fixture(t, "linux618")
	os.Remove(p.Path("net.ipv4.tcp_mem"))
	ns := snapshot(t, p, "blue")
	if n := noteOf(ns, "net.ipv4.tcp_mem"); !strings.Contains(n, "not visible inside a network namespace") {
		t.Errorf("tcp_mem note = %q", n)
	}
	if n := noteOf(ns, "net.core.rmem_max"); !strings.Contains(n, "read-only") {
		t.Errorf("rmem_max note = %q", n)
	}
	if ns.TCPMem != nil {
		t.Error("TCPMem parsed from an absent key")
	}
	var out bytes.Buffer
	NewReport(s, ModelFor(s), 35*time.Millisecond).WriteText(&out)
	golden(t, "show-linux618-35ms.txt", out.Bytes())
}

func noteOf(s *Snapshot, key string) string {
	for _, st := range s.Settings {
		if st.Key == key {
			return st.Note
		}
	}
	return "missing"
}

func TestValidateRefusesNonsenseBeforeWriting(t *testing.T) {
	p := fixture(t, "linux618")
	before := tree(t, p.Root)
	host := &Tuner{FS: p, BackupDir: t.TempDir()}
	ns := &Tuner{FS: p, Netns: "blue", BackupDir: t.TempDir()}
	for _, c := range []struct {
		tu   *Tuner
		set  []Assignment
		want string
	}{
		{host, []Assignment{{"net.ipv4.tcp_rmem", "4096 131072 65536"}}, "default 131072 is larger than max 65536"},
		{host, []Assignment{{"net.ipv4.tcp_rmem", "8192 4096 65536"}}, "min 8192 is larger than default 4096"},
		{host, []Assignment{{"net.ipv4.tcp_rmem", "0 4096 65536"}}, "outside the kernel's range"},
		{host, []Assignment{{"net.ipv4.tcp_rmem", "4096 65536"}}, "want three integers"},
		{host, []Assignment{{"net.ipv4.tcp_wmem", "4096 16384 4294967296"}}, "outside the kernel's range"},
		{host, []Assignment{{"net.core.rmem_max", "1000"}}, "outside the kernel's range 2304"},
		{host, []Assignment{{"net.ipv4.tcp_window_scaling", "2"}}, "outside the kernel's range 0..1"},
		{host, []Assignment{{"net.ipv4.tcp_adv_win_scale", "40"}}, "-31..31"},
		{host, []Assignment{{"net.ipv4.tcp_congestion_control", "vegas"}}, "not available in this kernel (available: reno bbr cubic)"},
		{host, []Assignment{{"net.ipv4.tcp_avalable_cc", "1"}}, "unknown key"},
		{host, []Assignment{{"net.ipv4.tcp_available_congestion_control", "bbr"}}, "read-only"},
		{host, []Assignment{{"net.core.default_qdisc", "fq; rm"}}, "not a kernel object name"},
		{host, []Assignment{{"net.ipv4.tcp_mtu_probing", "1"}, {"net.ipv4.tcp_mtu_probing", "2"}}, "given twice"},
		{ns, []Assignment{{"net.core.rmem_max", "16777216"}}, "does not let netns blue change it"},
		{ns, []Assignment{{"net.ipv4.tcp_mem", "1 2 3"}}, "host-wide key"},
		{ns, []Assignment{{"net.ipv4.tcp_congestion_control", "cubic"}}, "must be one of net.ipv4.tcp_allowed_congestion_control (reno bbr)"},
		{host, []Assignment{{"net.ipv4.tcp_allowed_congestion_control", "reno vegas"}}, "vegas is not available"},
		// One bad key spoils the whole set: the good one is not written.
		{host, []Assignment{{"net.ipv4.tcp_rmem", "4096 131072 16777216"}, {"net.ipv4.tcp_wmem", "1 2 x"}}, `"x" is not an integer`},
	} {
		_, err := c.tu.Apply(c.set, false)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Apply(%v) = %v, want error containing %q", c.set, err, c.want)
		}
	}
	_, err := ns.Apply([]Assignment{{"net.core.wmem_max", "1"}}, false)
	if !errors.Is(err, ErrHostWide) || !errors.Is(err, ErrInvalid) {
		t.Errorf("netns net.core error does not wrap ErrHostWide: %v", err)
	}
	after := tree(t, p.Root)
	if len(before) != len(after) {
		t.Fatalf("tree changed: %d files before, %d after", len(before), len(after))
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed from %q to %q by a refused apply", k, v, after[k])
		}
	}
	for _, d := range []string{host.BackupPath(), ns.BackupPath()} {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("backup %s written by a refused apply", d)
		}
	}
}

func TestApplyStackedAndRevertByteForByte(t *testing.T) {
	p := fixture(t, "linux618")
	orig := tree(t, p.Root)
	now := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	tu := &Tuner{FS: p, BackupDir: t.TempDir(), Now: func() time.Time { return now }}

	res, err := tu.Apply([]Assignment{
		{"net.ipv4.tcp_rmem", "4096 131072 67108864"},
		{"net.ipv4.tcp_congestion_control", "bbr"}, // already bbr
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Written != 1 || !res.Steps[1].Unchanged {
		t.Errorf("result = %+v, want 1 written and cc unchanged", res)
	}
	if v, _ := p.Read("net.ipv4.tcp_rmem"); v != "4096 131072 67108864" {
		t.Errorf("tcp_rmem = %q after apply", v)
	}
	// A second apply changes tcp_rmem again and adds wmem_max: the backup
	// must still hold the first original of tcp_rmem.
	if _, err := tu.Apply([]Assignment{
		{"net.ipv4.tcp_rmem", "4096 262144 134217728"},
		{"net.core.wmem_max", "16777216"},
	}, false); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(tu.BackupPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"raw": "4096\t131072\t33554432\n"`) || strings.Contains(string(b), "67108864") {
		t.Errorf("backup lost the oldest original:\n%s", b)
	}
	res, err = tu.Revert(false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Written != 2 {
		t.Errorf("revert wrote %d keys, want 2", res.Written)
	}
	got := tree(t, p.Root)
	for k, v := range orig {
		if got[k] != v {
			t.Errorf("%s = %q after revert, want %q byte for byte", k, got[k], v)
		}
	}
	if _, err := os.Stat(tu.BackupPath()); !os.IsNotExist(err) {
		t.Errorf("backup still there after revert: %v", err)
	}
	if _, err := tu.Revert(false); !errors.Is(err, ErrNoBackup) {
		t.Errorf("second revert = %v, want ErrNoBackup", err)
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	p := fixture(t, "linux618")
	before := tree(t, p.Root)
	tu := &Tuner{FS: p, BackupDir: t.TempDir()}
	res, err := tu.Apply([]Assignment{{"net.ipv4.tcp_rmem", "4096 131072 67108864"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	if !res.DryRun || res.Written != 0 || len(res.Steps) != 1 || res.Steps[0].From != "4096 131072 33554432" {
		t.Errorf("dry run result = %+v", res)
	}
	var out bytes.Buffer
	res.WriteText(&out, "apply")
	if !strings.Contains(out.String(), "net.ipv4.tcp_rmem: 4096 131072 33554432 -> 4096 131072 67108864") {
		t.Errorf("dry run text:\n%s", out.String())
	}
	after := tree(t, p.Root)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("dry run changed %s", k)
		}
	}
	if _, err := os.Stat(tu.BackupPath()); err == nil {
		t.Error("dry run wrote a backup")
	}
}

// readOnlyFile is a file that reads fine and refuses every write, even
// root's: procfs checks a sysctl's mode bits for root too.
const readOnlyFile = "/proc/sys/kernel/osrelease"

// A write that fails mid-set (here tcp_wmem is a link to a read-only
// sysctl) rolls back the keys written before it and removes the backup it
// created.
func TestFailingWriteRollsBack(t *testing.T) {
	p := fixture(t, "linux618")
	if _, err := os.Stat(readOnlyFile); err != nil {
		t.Skipf("no %s", readOnlyFile)
	}
	wmem := p.Path("net.ipv4.tcp_wmem")
	os.Remove(wmem)
	if err := os.Symlink(readOnlyFile, wmem); err != nil {
		t.Fatal(err)
	}
	before := tree(t, p.Root)
	tu := &Tuner{FS: p, BackupDir: t.TempDir()}
	_, err := tu.Apply([]Assignment{
		{"net.ipv4.tcp_rmem", "4096 131072 67108864"},
		{"net.core.rmem_max", "67108864"},
		{"net.ipv4.tcp_wmem", "4096 16384 67108864"},
	}, false)
	if err == nil || !strings.Contains(err.Error(), "write net.ipv4.tcp_wmem") || !strings.Contains(err.Error(), "restored") {
		t.Fatalf("Apply = %v, want a tcp_wmem write error and a rollback", err)
	}
	after := tree(t, p.Root)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s = %q after rollback, want %q", k, after[k], v)
		}
	}
	if _, err := os.Stat(tu.BackupPath()); !os.IsNotExist(err) {
		t.Errorf("backup left after a rolled-back apply: %v", err)
	}
}

func TestParseAssignment(t *testing.T) {
	a, err := ParseAssignment("net/ipv4/tcp_rmem= 4096 131072 16777216 ")
	if err != nil || a.Key != "net.ipv4.tcp_rmem" || a.Value != "4096 131072 16777216" {
		t.Errorf("got %+v, %v", a, err)
	}
	for _, bad := range []string{"", "net.ipv4.tcp_rmem", "=1", "net.ipv4.tcp_rmem="} {
		if _, err := ParseAssignment(bad); err == nil {
			t.Errorf("ParseAssignment(%q) accepted", bad)
		}
	}
}

func TestPlanInputValidate(t *testing.T) {
	s := snapshot(t, fixture(t, "linux618"), "")
	_, err := MakePlan(s, ModelFor(s), PlanInput{Streams: 0})
	for _, want := range []string{"--rtt", "--rate", "--streams 0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %s", err, want)
		}
	}
}

func FuzzParseTriple(f *testing.F) {
	for _, s := range []string{"4096 131072 6291456", "4096\t87380\t6291456\n", "1 2", "-1 0 1", "a b c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tr, err := ParseTriple(s)
		if err != nil {
			return
		}
		back, err := ParseTriple(tr.String())
		if err != nil || back != tr {
			t.Fatalf("%q -> %v -> %v, %v", s, tr, back, err)
		}
	})
}

func FuzzCheckValue(f *testing.F) {
	f.Add("net.ipv4.tcp_rmem", "4096 131072 6291456")
	f.Add("net.core.rmem_max", "212992")
	f.Add("net.ipv4.tcp_congestion_control", "bbr")
	f.Add("net.core.default_qdisc", "fq")
	f.Fuzz(func(t *testing.T, key, value string) {
		k, ok := LookupKey(key)
		if !ok {
			return
		}
		v, err := checkValue(k, value, []string{"reno", "cubic", "bbr"})
		if err != nil {
			return
		}
		// What validation accepts is canonical and accepted again unchanged.
		v2, err := checkValue(k, v, []string{"reno", "cubic", "bbr"})
		if err != nil || v2 != v {
			t.Fatalf("%s=%q -> %q -> %q, %v", key, value, v, v2, err)
		}
	})
}

func FuzzParseKernelVersion(f *testing.F) {
	for _, s := range []string{"6.18.44-fc-v669", "5.4.0-149-generic", "6.6", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseKernelVersion(s)
		if err == nil && (v.Major < 0 || v.Minor < 0) && !strings.Contains(s, "-") {
			t.Fatalf("%q -> %v", s, v)
		}
	})
}

func FuzzParseAssignment(f *testing.F) {
	for _, s := range []string{"net.ipv4.tcp_rmem=4096 131072 16777216", "net/core/rmem_max=1", "=", "a==b", "k="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAssignment(s)
		if err != nil {
			return
		}
		if a.Key == "" || a.Value == "" || strings.Contains(a.Key, "/") || strings.Contains(a.Key, "=") {
			t.Fatalf("%q -> %+v", s, a)
		}
	})
}

// Concurrent applies serialize on the backup lock: whatever order they
// run in, the backup keeps the value found before the first, and revert
// restores it.
func TestConcurrentAppliesKeepTheOriginal(t *testing.T) {
	p := fixture(t, "linux618")
	orig, _ := p.ReadRaw("net.ipv4.tcp_rmem")
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			tu := &Tuner{FS: p, BackupDir: dir}
			_, err := tu.Apply([]Assignment{{"net.ipv4.tcp_rmem", fmt.Sprintf("4096 131072 %d", 67108864+i*4096)}}, false)
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := (&Tuner{FS: p, BackupDir: dir}).Revert(false); err != nil {
		t.Fatal(err)
	}
	if got, _ := p.ReadRaw("net.ipv4.tcp_rmem"); !bytes.Equal(got, orig) {
		t.Errorf("after concurrent applies and a revert: %q, want %q", got, orig)
	}
}
