package vm_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/lab/vm"
	"github.com/wanlab/wanlab/lab/vm/vmtest"
)

// TestUMLCommandLine checks linux.uml's arguments: the vector NIC with
// gro=0 on the TAP, the control channel on con1, the read-only hostfs
// root, init's arguments last.
func TestUMLCommandLine(t *testing.T) {
	cfg := vm.Config{MemoryMB: 512, NICs: []vm.NIC{{Tap: "wl0-rc", Addr: mustPrefix("10.0.0.2/24")}}, Gateway: mustPrefix("10.0.0.1/32").Addr()}
	args := vm.UMLCommandLine(cfg, "/run/wanlab/vm/abc123", "abc123")
	line := strings.Join(args, " ")
	for _, want := range []string{"mem=512M", "rootfstype=hostfs rootflags=/ ro", "init=/run/wanlab/vm/abc123/bin/wanlab",
		"con0=null,fd:4 con1=fd:3", "vec0:transport=hybrid,ifname=wl0-rc,depth=128,gro=0", "wanlab.eth0=10.0.0.2/24",
		"wanlab.gw=10.0.0.1", "wanlab.ctl=/dev/tty1", "GODEBUG=cpu.avx=off"} {
		if !strings.Contains(line, want) {
			t.Errorf("command line %q lacks %q", line, want)
		}
	}
	if !strings.HasSuffix(line, " -- vm agent") {
		t.Errorf("command line %q: want init's argv (vm agent) last", line)
	}
}

// TestUMLKilledProcess boots a UML guest on a TAP, kills its linux.uml,
// and checks that a command fails with one line saying so, that Close
// then works and that nothing is left: state, memory, processes, TAP.
func TestUMLKilledProcess(t *testing.T) {
	vmtest.RequireUML(t)
	ns, h := testenv.NetNS(t)
	ctx := context.Background()
	v := vmtest.VM(t, ctx, vm.Config{Engine: vm.EngineUML, Netns: ns, NICs: []vm.NIC{{Tap: "wlvmk0"}}})
	if err := syscall.Kill(v.QemuPID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-v.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("linux.uml still runs 30 s after SIGKILL")
	}
	_, err := v.Run(ctx, "true")
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "linux.uml exited") && !strings.Contains(err.Error(), "control channel") {
		t.Errorf("command on a killed guest: %v; want one line saying linux.uml exited", err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the guest's processes to go", func() bool { return len(vm.UMLProcesses(v.QemuPID())) == 0 })
	if _, err := os.Stat(v.StateDir()); !os.IsNotExist(err) {
		t.Errorf("state dir after Close: %v", err)
	}
	if shm, _ := filepath.Glob("/dev/shm/wanlab-vm-" + v.ID); len(shm) > 0 {
		t.Errorf("memory directory %v left", shm)
	}
	testenv.WaitFor(t, "the TAP to go", func() bool {
		gone := false
		nsrun.Do(h, func() error {
			_, err := netlink.LinkByName("wlvmk0")
			gone = err != nil
			return nil
		})
		return gone
	})
}

// TestUMLShmTooSmall gives a UML guest a tmpfs smaller than its memory:
// Boot refuses in one line with the size needed, and leaves nothing.
func TestUMLShmTooSmall(t *testing.T) {
	vmtest.RequireUML(t)
	shm := t.TempDir()
	if err := unix.Mount("tmpfs", shm, "tmpfs", 0, "size=16m"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(shm, unix.MNT_DETACH)
	states := t.TempDir()
	_, err := vm.Boot(context.Background(), vm.Config{Engine: vm.EngineUML, Binary: testenv.StaticWanlab(t), MemoryMB: 64, ShmDir: shm, StateDir: states})
	if !errors.Is(err, vm.ErrShmTooSmall) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "need at least 64 MiB") || !strings.Contains(err.Error(), shm) {
		t.Fatalf("boot with a 16 MiB tmpfs for 64 MiB: %v; want one line naming %s and the 64 MiB needed", err, shm)
	}
	if ents, _ := os.ReadDir(states); len(ents) != 0 {
		t.Errorf("state left: %v", ents)
	}
	if ents, _ := os.ReadDir(shm); len(ents) != 0 {
		t.Errorf("memory directory left: %v", ents)
	}
}

// TestUMLPtraceDenied runs a child of this test under a seccomp filter
// that refuses ptrace, as a sandbox would: UML is unusable with one line
// saying why, a UML boot fails with it, and auto falls back to tcg.
func TestUMLPtraceDenied(t *testing.T) {
	vmtest.RequireUML(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPtraceDenied$", "-test.v")
	cmd.Env = append(os.Environ(), "WANLAB_VM_PTRACE_HELPER="+testenv.StaticWanlab(t), "WANLAB_VM_PTRACE_STATE="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "PASS: TestHelperPtraceDenied") && !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("helper did not run:\n%s", out)
	}
	t.Logf("%s", out)
}

func TestHelperPtraceDenied(t *testing.T) {
	bin := os.Getenv("WANLAB_VM_PTRACE_HELPER")
	if bin == "" {
		t.Skip("helper process of TestUMLPtraceDenied")
	}
	if err := vm.DenyPtrace(); err != nil {
		t.Fatal(err)
	}
	err := vm.UMLUsable()
	if !errors.Is(err, vm.ErrPtraceDenied) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("UMLUsable under a ptrace ban: %v; want ErrPtraceDenied in one line", err)
	}
	_, err = vm.Boot(context.Background(), vm.Config{Engine: vm.EngineUML, Binary: bin, StateDir: os.Getenv("WANLAB_VM_PTRACE_STATE")})
	if !errors.Is(err, vm.ErrPtraceDenied) || !strings.Contains(err.Error(), "ptrace denied") {
		t.Errorf("UML boot under a ptrace ban: %v; want the ptrace line", err)
	}
	e, reason, err := vm.ChooseEngine(context.Background(), "")
	if _, perr := vm.LoadPrepared(""); perr != nil {
		// No qemu cache: no engine at all, and the error says why UML
		// cannot run.
		if err == nil || !strings.Contains(err.Error(), "ptrace denied") {
			t.Errorf("auto without qemu under a ptrace ban: %s %q %v; want an error naming ptrace", e, reason, err)
		}
		return
	}
	if err != nil || e == vm.EngineUML || !strings.Contains(reason, "ptrace denied") {
		t.Errorf("auto under a ptrace ban: %s (%s) %v; want kvm or tcg, saying UML cannot run for ptrace", e, reason, err)
	}
	t.Logf("auto: %s (%s)", e, reason)
}

// TestCleanupLeftTapAndMemory fakes what a crashed UML VM can leave: a TAP
// kept alive (here a persistent one) in its namespace and its memory's
// directory; Cleanup of the dead owner's state removes both.
func TestCleanupLeftTapAndMemory(t *testing.T) {
	testenv.RequireRoot(t)
	ns, h := testenv.NetNS(t)
	err := nsrun.Do(h, func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var req struct {
			name  [unix.IFNAMSIZ]byte
			flags uint16
			_     [22]byte
		}
		copy(req.name[:], "wlvmleft0")
		req.flags = unix.IFF_TAP | unix.IFF_NO_PI
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(&req))); e != 0 {
			return e
		}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETPERSIST, 1); e != 0 {
			return e
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	shm, err := os.MkdirTemp("/dev/shm", "wanlab-vm-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(shm)
	os.WriteFile(filepath.Join(shm, "mem"), []byte("x"), 0o600)
	dir := filepath.Join(root, "00000c")
	os.Mkdir(dir, 0o700)
	if err := vm.WriteState(dir, "00000c", dead.Process.Pid, vm.EngineUML, ns, []string{"wlvmleft0"}, shm); err != nil {
		t.Fatal(err)
	}
	// A TAP of that name blocks a new VM, in one line that names it.
	_, err = vm.Boot(context.Background(), vm.Config{Engine: vm.EngineUML, Binary: "/bin/true", Netns: ns, NICs: []vm.NIC{{Tap: "wlvmleft0"}}, StateDir: t.TempDir()})
	if vm.UMLUsable() == nil && (err == nil || !strings.Contains(err.Error(), "TAP wlvmleft0") || !strings.Contains(err.Error(), "wanlab cleanup")) {
		t.Errorf("boot on a leftover TAP: %v; want one line naming the TAP and wanlab cleanup", err)
	}
	removed, err := vm.CleanupIn(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"memory " + shm, "state " + dir, "tap wlvmleft0 in " + ns + " of vm 00000c"}
	for _, w := range want {
		if !contains(removed, w) {
			t.Errorf("Cleanup removed %q, not %q", removed, w)
		}
	}
	nsrun.Do(h, func() error {
		if _, err := netlink.LinkByName("wlvmleft0"); err == nil {
			t.Error("the leftover TAP is still there")
		}
		return nil
	})
	if _, err := os.Stat(shm); !os.IsNotExist(err) {
		t.Errorf("memory directory after Cleanup: %v", err)
	}
}

// TestSweepMemoryDirs: a memory directory whose VM's state is gone (a
// Cleanup that did not know it removed the state) is swept once a minute
// old; one with a state directory, or new, is kept.
func TestSweepMemoryDirs(t *testing.T) {
	states, shm := t.TempDir(), t.TempDir()
	old := time.Now().Add(-2 * time.Minute)
	for _, id := range []string{"00000d", "00000e", "00000f"} {
		d := filepath.Join(shm, "wanlab-vm-"+id)
		os.Mkdir(d, 0o700)
		if id != "00000f" {
			os.Chtimes(d, old, old)
		}
	}
	os.Mkdir(filepath.Join(states, "00000e"), 0o700)
	os.Mkdir(filepath.Join(shm, "wanlab-vm-notanid"), 0o700)
	removed := vm.SweepMemoryDirs(states, shm)
	if len(removed) != 1 || removed[0] != "memory "+filepath.Join(shm, "wanlab-vm-00000d") {
		t.Errorf("swept %q, want only 00000d", removed)
	}
	for name, want := range map[string]bool{"wanlab-vm-00000d": false, "wanlab-vm-00000e": true, "wanlab-vm-00000f": true, "wanlab-vm-notanid": true} {
		if _, err := os.Stat(filepath.Join(shm, name)); (err == nil) != want {
			t.Errorf("%s exists = %v, want %v", name, err == nil, want)
		}
	}
}

// TestPacketInodes reads the inodes of /proc/net/packet's sockets and
// refuses a table it cannot read.
func TestPacketInodes(t *testing.T) {
	table := "sk               RefCnt Type Proto  Iface R Rmem   User   Inode\n" +
		"ffff8a0c4b2e0000 3      3    0003   5     1 0      0      41237\n" +
		"ffff8a0c4b2e4000 3      3    0003   7     1 2304   0      41240\n"
	got, err := vm.PacketInodes([]byte(table))
	if err != nil || len(got) != 2 || !got["41237"] || !got["41240"] {
		t.Fatalf("packetInodes = %v, %v; want 41237 and 41240", got, err)
	}
	if got, err := vm.PacketInodes([]byte(table[:strings.Index(table, "\n")+1])); err != nil || len(got) != 0 {
		t.Errorf("header alone: %v, %v; want none", got, err)
	}
	for _, bad := range []string{"", "sk RefCnt\n", table + "ffff 3 3 0003 5 1 0 0 x41\n"} {
		if _, err := vm.PacketInodes([]byte(bad)); err == nil {
			t.Errorf("packetInodes(%q): no error", bad)
		}
	}
}

// FuzzPacketInodes: any table gives inodes or an error, never a panic,
// and every inode given is a number.
func FuzzPacketInodes(f *testing.F) {
	f.Add([]byte("sk RefCnt Type Proto Iface R Rmem User Inode\nffff 3 3 0003 5 1 0 0 41237\n"))
	f.Add([]byte("Inode\n\n 7\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := vm.PacketInodes(b)
		if err != nil {
			return
		}
		for ino := range got {
			if _, perr := strconv.ParseUint(ino, 10, 64); perr != nil {
				t.Fatalf("inode %q", ino)
			}
		}
	})
}

// TestGrowRawSocketsCounts: a process whose raw sockets are not one a NIC
// is refused with a line that says so (this test's own process has none).
func TestGrowRawSocketsCounts(t *testing.T) {
	err := vm.GrowRawSockets(os.Getpid(), 1)
	if err == nil || !strings.Contains(err.Error(), "0 raw sockets for 1 NICs") {
		t.Fatalf("growRawSockets(self, 1) = %v, want 0 raw sockets for 1 NICs", err)
	}
}

// TestNextUMLCPU: guests are spread round robin over this process's
// CPUs, each one a CPU it may run on; with one CPU none is pinned.
func TestNextUMLCPU(t *testing.T) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	n := set.Count()
	seen := map[int]bool{}
	for i := 0; i < 2*n; i++ {
		cpu, ok := vm.NextUMLCPU()
		if n < 2 {
			if ok {
				t.Fatalf("one CPU: pinned to %d", cpu)
			}
			return
		}
		if !ok || !set.IsSet(cpu) {
			t.Fatalf("NextUMLCPU = %d, %v: want one of this process's %d CPUs", cpu, ok, n)
		}
		seen[cpu] = true
	}
	if len(seen) != n {
		t.Errorf("%d calls used CPUs %v, want all %d", 2*n, seen, n)
	}
}
