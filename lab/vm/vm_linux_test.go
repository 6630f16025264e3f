package vm_test

import (
	"bufio"
	"context"
	"debug/elf"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/lab/vm"
	"github.com/wanlab/wanlab/lab/vm/vmtest"
)

// TestBootRunTap boots one VM with the auto engine (UML where KVM is
// missing) with its NIC on a TAP in a fresh namespace and checks commands,
// output, exit codes, the network, and that cancelling the context stops
// it and removes all it made.
func TestBootRunTap(t *testing.T) {
	vmtest.RequireVM(t)
	bootRunTap(t, vmtest.Engine(t), testenv.StaticWanlab(t))
}

// TestBootRunTapTCG is the same on qemu's emulation, the qemu path's test
// (virtio NIC and control port, initramfs), with a default (cgo,
// dynamically linked) build, which boots with this host's shared
// libraries.
func TestBootRunTapTCG(t *testing.T) {
	vmtest.RequireQemu(t)
	bootRunTap(t, vm.EngineTCG, defaultBuild(t))
}

func bootRunTap(t *testing.T, engine vm.Engine, bin string) {
	ns, h := testenv.NetNS(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v := vmtest.VM(t, ctx, vm.Config{Binary: bin, Engine: engine, Netns: ns,
		NICs: []vm.NIC{{Tap: "wlvm0", Addr: mustPrefix("10.203.0.2/24")}}})
	if engine != vm.EngineAuto && v.Engine != engine {
		t.Errorf("engine %s, want %s", v.Engine, engine)
	}
	if !strings.HasPrefix(v.Hello.Release, "6.1.") || !contains(v.Hello.Qdiscs, "netem") || !contains(v.Hello.Qdiscs, "fq_codel") {
		t.Errorf("hello %+v: want a 6.1 kernel with netem and fq_codel", v.Hello)
	}
	if st, err := os.Stat(filepath.Join(v.StateDir(), "state.json")); err != nil || st.Size() == 0 {
		t.Errorf("state file: %v", err)
	}
	wantWanlab := "/bin/wanlab\n"
	if v.Engine == vm.EngineUML {
		wantWanlab = "/run/wanlab/bin/wanlab\n"
		// The host side of the TAP as the vector driver needs it.
		nsrun.Do(h, func() error {
			l, err := netlink.LinkByName("wlvm0")
			if err != nil || l.Attrs().TxQLen != vm.UMLTapQueue || l.Attrs().Flags&net.FlagUp == 0 {
				t.Errorf("TAP of the UML guest: %v, %v; want up with txqueuelen %d", l, err, vm.UMLTapQueue)
			}
			return nil
		})
	}

	r, err := v.Run(ctx, "sh", "-c", "echo out; echo err >&2; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Stdout) != "out\n" || string(r.Stderr) != "err\n" || r.ExitCode != 3 {
		t.Errorf("sh: stdout %q stderr %q exit %d; want out, err, 3", r.Stdout, r.Stderr, r.ExitCode)
	}
	if _, err := v.Run(ctx, "/no/such/command"); err == nil {
		t.Error("a missing command ran")
	}
	r, err = v.Run(ctx, "sh", "-c", "kill -9 $$")
	if err != nil || r.ExitCode != 128+9 {
		t.Errorf("killed shell: exit %d, %v; want 137", r.ExitCode, err)
	}
	// wanlab is on the PATH, and a command run by name finds iproute2's
	// tc, not busybox's (inside "sh -c" busybox's applets come first).
	r, err = v.Run(ctx, "sh", "-c", "command -v wanlab")
	if err != nil || string(r.Stdout) != wantWanlab {
		t.Errorf("wanlab on the PATH: %q %q %v", r.Stdout, r.Stderr, err)
	}
	r, err = v.Run(ctx, "tc", "-V")
	if err != nil || r.ExitCode != 0 || !strings.Contains(string(r.Stdout), "iproute2") {
		t.Errorf("tc -V: %q %q %v", r.Stdout, r.Stderr, err)
	}

	err = nsrun.Do(h, func() error {
		l, err := netlink.LinkByName("wlvm0")
		if err != nil {
			return err
		}
		return netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(10, 203, 0, 1), Mask: net.CIDRMask(24, 32)}})
	})
	if err != nil {
		t.Fatalf("address on the TAP: %v", err)
	}
	r, err = v.Run(ctx, "ping", "-c", "3", "-W", "10", "10.203.0.1")
	if err != nil || r.ExitCode != 0 {
		t.Errorf("ping from the guest to the TAP: exit %d %v\n%s%s", r.ExitCode, err, r.Stdout, r.Stderr)
	}

	// Cancelling Boot's context (Ctrl-C in the CLI) stops the VM.
	cancel()
	select {
	case <-v.Exited():
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still runs 30 s after its context was cancelled", v.Engine)
	}
	testenv.WaitFor(t, "the state dir to go", func() bool {
		_, err := os.Stat(v.StateDir())
		return os.IsNotExist(err)
	})
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if v.Engine == vm.EngineUML {
		if left := vm.UMLProcesses(v.QemuPID()); len(left) > 0 {
			t.Errorf("UML processes %v left after Close", left)
		}
		if shm, _ := filepath.Glob("/dev/shm/wanlab-vm-" + v.ID); len(shm) > 0 {
			t.Errorf("memory directory %v left after Close", shm)
		}
	}
	testenv.WaitFor(t, "the TAP to go with the VM", func() bool {
		gone := false
		nsrun.Do(h, func() error {
			_, err := netlink.LinkByName("wlvm0")
			gone = err != nil
			return nil
		})
		return gone
	})
}

// TestKilledOwnerLeavesNothingCleanupMisses boots a VM (auto: UML where
// KVM is missing) from a child process, kills that process with SIGKILL,
// and checks that its engine dies with it and that Cleanup removes the
// state it left.
func TestKilledOwnerLeavesNothingCleanupMisses(t *testing.T) {
	vmtest.RequireVM(t)
	bin := testenv.StaticWanlab(t)
	// The VM records itself in a state directory of this test's: a
	// Cleanup of the default one, which other packages' tests run
	// meanwhile (experiment cleanup, bench cleanup), would rightly remove
	// the killed owner's VM before this test looks for it.
	stateRoot := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperVMOwner$")
	cmd.Env = append(os.Environ(), "WANLAB_VM_OWNER_HELPER="+bin, "WANLAB_VM_OWNER_STATE="+stateRoot)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var dir string
	var qemu int
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(3 * time.Minute)
	for dir == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("helper ended before booting a VM")
			}
			if f := strings.Fields(l); len(f) == 4 && f[0] == "VM" {
				dir, qemu = f[1], atoi(f[3])
			}
		case <-timeout:
			t.Fatal("helper booted no VM within 3 minutes")
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	testenv.WaitFor(t, "the engine to die with its owner", func() bool { return syscall.Kill(qemu, 0) != nil })
	testenv.WaitFor(t, "the UML processes to die with their owner", func() bool { return len(vm.UMLProcesses(qemu)) == 0 })
	if _, err := os.Stat(filepath.Join(dir, "state.json")); err != nil {
		t.Fatalf("state of the killed owner's VM: %v; want it left for Cleanup", err)
	}
	removed, err := vm.CleanupIn(stateRoot)
	if err != nil {
		t.Fatal(err)
	}
	if !contains(removed, "state "+dir) {
		t.Errorf("Cleanup removed %q, not the state %s", removed, dir)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state dir after Cleanup: %v", err)
	}
	if shm, _ := filepath.Glob("/dev/shm/wanlab-vm-" + filepath.Base(dir)); len(shm) > 0 {
		t.Errorf("memory directory %v left after Cleanup", shm)
	}
}

// TestHelperVMOwner is the child of the test above: it boots a VM, prints
// its state dir and qemu's PID, and waits to be killed.
func TestHelperVMOwner(t *testing.T) {
	bin := os.Getenv("WANLAB_VM_OWNER_HELPER")
	if bin == "" {
		t.Skip("helper process of TestKilledOwnerLeavesNothingCleanupMisses")
	}
	v, err := vm.Boot(context.Background(), vm.Config{Binary: bin, StateDir: os.Getenv("WANLAB_VM_OWNER_STATE")})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("VM %s QEMU %d\n", v.StateDir(), v.QemuPID())
	select {}
}

// defaultBuild builds cmd/wanlab as "go build" does by default.
func defaultBuild(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "wanlab")
	cmd := exec.Command("go", "build", "-o", out, "github.com/wanlab/wanlab/cmd/wanlab")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, b)
	}
	if f, err := elf.Open(out); err == nil {
		dynamic := false
		for _, p := range f.Progs {
			dynamic = dynamic || p.Type == elf.PT_INTERP
		}
		f.Close()
		if !dynamic {
			t.Log("the default build is static here (no cgo): the dynamic case is not exercised")
		}
	}
	return out
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
