package vm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/lab"
)

// User-Mode Linux: Debian's user-mode-linux package is Linux 6.1 built to
// run as a process of this host. The guest's root is this host's / as a
// read-only hostfs, its memory an unlinked file in a tmpfs (/dev/shm), its
// processes run under ptrace, its NIC is the vector driver on a TAP that it
// opens itself, and the agent's control channel is its second console
// (con1), one end of a socket pair.

// umlBinary is Debian's user-mode-linux kernel.
const umlBinary = "/usr/bin/linux.uml"

// umlModulesRoot holds the modules of that kernel, one directory per
// release.
const umlModulesRoot = "/usr/lib/uml/modules"

// umlControlTTY is the guest's device of con1.
const umlControlTTY = "/dev/tty1"

// umlGuestModules are loaded at boot: the qdiscs, filters and actions
// wanlab's kernel path builds, dummy (the eth0 of a guest without NICs), and BBR (the UML kernel has its NIC, TUN
// and fq_codel built in or as modules: built-in ones are skipped).
var umlGuestModules = []string{
	"ipv6", "dummy", "tun", "ifb", "act_mirred", "cls_u32",
	"sch_netem", "sch_tbf", "sch_htb", "sch_ingress", "sch_prio", "sch_sfq", "sch_fq", "sch_fq_codel",
	"sch_codel", "sch_pie", "sch_red", "tcp_bbr",
}

// umlGODEBUG and umlGlibcTunables keep a UML guest's programs (wanlab's
// Go code; glibc's string functions in ip, tc, sh) off AVX. This host's
// xstate (AVX-512, AMX) is larger than the buffer UML 6.1 saves with
// PTRACE_GETREGSET, so UML is run with that regset refused
// (umlSeccompFilter) and falls back to the legacy FXSAVE area, which holds
// the x87 and SSE registers only: the vector registers beyond those do not
// survive the guest's context switches. Measured: glibc's AVX2/EVEX
// strchrnul left printf's "%s" unexpanded in ip's output, and
// `ip -6 route add` added no usable route, until turned off here.
const (
	umlGODEBUG       = "cpu.avx=off,cpu.avx2=off,cpu.fma=off,cpu.avx512f=off,cpu.avx512cd=off,cpu.avx512bw=off,cpu.avx512dq=off,cpu.avx512vl=off"
	umlGlibcTunables = "glibc.cpu.hwcaps=-AVX,-AVX2,-AVX512F,-AVX512CD,-AVX512BW,-AVX512DQ,-AVX512VL,-AVX_VNNI,-FMA,-FMA4"
)

// UMLMaxMTU is the largest MTU a UML guest's NIC takes: the vector
// driver's maximum (a larger mtu= at boot is not kept once lowered).
const UMLMaxMTU = 1500

// umlNice is the UML guest's nice value.
const umlNice = -10

// umlTapQueue is the host side TAP's transmit queue. The guest takes its
// frames from a raw socket on the TAP (umlTransport), not from the TAP's
// own queue, which fills once and then drops what it is given: the short
// queue keeps what it holds small (10,000 frames, 23 MB, with the tap
// transport).
const umlTapQueue = 64

// umlCPUEnv names the CPU `vm uml-exec` pins linux.uml (and with it the
// host processes of the guest's address spaces) to, from nextUMLCPU. The
// guest kernel hands every guest system call and context switch to a
// ptraced process and back; on one CPU those handoffs stay local. The
// empty spec's delay through the guest, `bench accuracy --kernel --engine
// uml`, idle: p50 36-37 us pinned to either CPU against 48-62 us free to
// move (2026-12-02 22:13).
const umlCPUEnv = "WANLAB_UML_CPU"

// umlCPUNext spreads the UML guests of this process over its CPUs.
var umlCPUNext atomic.Uint32

// nextUMLCPU returns the CPU for the next UML guest, round robin over the
// CPUs this process may run on, and false when there is only one or the
// set cannot be read (the guest then runs where the scheduler puts it).
func nextUMLCPU() (int, bool) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil || set.Count() < 2 {
		return 0, false
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus[int(umlCPUNext.Add(1)-1)%len(cpus)], true
}

// umlTransport is the vector driver's transport. "hybrid" sends into the
// TAP and receives from a raw socket bound to it, up to depth frames a
// recvmmsg; "tap" (the TAP alone) reads one frame per wakeup of the
// guest, so a window's burst waited at the TAP for up to 20-30 ms (p90
// 9.8 ms) with the guest's CPU half idle, and seed 001 ran 16-18 % below
// its window per round trip on an idle host (docs/vm.md, 2026-12-02).
const umlTransport = "hybrid"

// umlRawRcvbuf is the receive buffer the host gives each guest NIC's raw
// socket (growRawSockets; the kernel doubles it): a window's burst (8 MiB
// with the tuner's buffers) in 2 KiB buffers. With the default 208 KiB
// the socket drops most of a burst and the guest sees holes.
const umlRawRcvbuf = 16 << 20

// ErrPtraceDenied means this process may not use ptrace, which UML needs
// for every guest process (a seccomp sandbox, Yama's ptrace_scope 3, a
// container without CAP_SYS_PTRACE).
var ErrPtraceDenied = errors.New("ptrace denied: UML runs its guest's processes under ptrace (a sandbox, seccomp or Yama ptrace_scope 3 forbids it)")

// ErrShmTooSmall means the tmpfs for a UML guest's memory has too little
// room.
var ErrShmTooSmall = errors.New("tmpfs too small for the UML guest's memory")

// UMLRelease returns the release of the installed user-mode-linux (the
// newest of its module directories), or an error naming the package.
func UMLRelease() (string, error) {
	if _, err := os.Stat(umlBinary); err != nil {
		return "", fmt.Errorf("%s missing: install Debian's user-mode-linux (wanlab vm prepare --engine uml)", umlBinary)
	}
	ents, err := os.ReadDir(umlModulesRoot)
	if err != nil {
		return "", fmt.Errorf("UML modules: %w (reinstall Debian's user-mode-linux)", err)
	}
	var rel []string
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(umlModulesRoot, e.Name(), "modules.builtin")); e.IsDir() && err == nil {
			rel = append(rel, e.Name())
		}
	}
	if len(rel) == 0 {
		return "", fmt.Errorf("UML modules: none in %s (reinstall Debian's user-mode-linux)", umlModulesRoot)
	}
	sort.Strings(rel)
	return rel[len(rel)-1], nil
}

// UMLUsable says whether a UML guest can run here: the package installed
// and ptrace allowed.
func UMLUsable() error {
	if _, err := UMLRelease(); err != nil {
		return err
	}
	return checkPtrace()
}

// checkPtrace starts /bin/true traced (PTRACE_TRACEME, as UML's own
// processes do) and kills it.
func checkPtrace() error {
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if err := cmd.Start(); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENOSYS) {
			return fmt.Errorf("%w: %v", ErrPtraceDenied, err)
		}
		return fmt.Errorf("ptrace check: %w", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	return nil
}

// checkShm makes sure dir's file system has room for a guest of memMB.
func checkShm(dir string, memMB int) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("UML memory: %s: %w", dir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize) >> 20
	if free < int64(memMB) {
		return fmt.Errorf("%w: %s has %d MiB free, the guest's %d MiB of memory is a file there: need at least %d MiB (mount -o remount,size=%dM %s, or less --mem)",
			ErrShmTooSmall, dir, free, memMB, memMB, memMB+(int(st.Blocks)*int(st.Bsize)>>20)-int(free), dir)
	}
	return nil
}

// umlGuestBin is where a UML guest runs wanlab from: the state
// directory's bin/, bound under the guest's own tmpfs /run (umlInit).
const umlGuestBin = "/run/wanlab/bin"

// umlInit is a UML guest's init, the wanlab binary of the VM's state
// directory (which the guest sees through its hostfs root) run as PID 1:
// it mounts the pseudo file systems, loads the modules the host listed, puts
// a tmpfs of the guest's own on /tmp and /run with the state's bin/
// bound on umlGuestBin, and executes the agent from there. It uses no program of
// this host (busybox-static, a static glibc program, dies in its TLS setup
// under UML here).
func umlInit(state string) error {
	// /proc is mounted already (cmdlineValueFile).
	if err := unix.Mount("sysfs", "/sys", "sysfs", 0, ""); err != nil {
		return fmt.Errorf("mount /sys: %w", err)
	}
	list, err := os.ReadFile(filepath.Join(state, "modules"))
	if err != nil {
		return err
	}
	for _, m := range strings.Fields(string(list)) {
		if err := loadModule(m); err != nil {
			fmt.Fprintf(os.Stderr, "init: %s: %v\n", m, err)
		}
	}
	// The state directory may be below /tmp or /run: held open, it
	// stays reachable through /proc/self/fd once they are covered.
	bin, err := unix.Open(filepath.Join(state, "bin"), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("init: %s/bin: %w", state, err)
	}
	steps := []struct {
		what string
		do   func() error
	}{
		{"tmpfs on /tmp", func() error { return unix.Mount("tmpfs", "/tmp", "tmpfs", 0, "mode=1777") }},
		{"tmpfs on /run", func() error { return unix.Mount("tmpfs", "/run", "tmpfs", 0, "mode=755") }},
		{umlGuestBin, func() error { return os.MkdirAll(umlGuestBin, 0o755) }},
		{"bind " + umlGuestBin, func() error {
			return unix.Mount(fmt.Sprintf("/proc/self/fd/%d", bin), umlGuestBin, "", unix.MS_BIND, "")
		}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			return fmt.Errorf("init: %s: %w", st.what, err)
		}
	}
	unix.Close(bin)
	exe := filepath.Join(umlGuestBin, "wanlab")
	return syscall.Exec(exe, []string{exe, "vm", "agent"}, append(os.Environ(), "PATH="+umlGuestBin+":/usr/sbin:/usr/bin:/sbin:/bin"))
}

// loadModule inserts a module file (finit_module; one already loaded is
// fine).
func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.FinitModule(int(f.Fd()), "", 0); err != nil && !errors.Is(err, unix.EEXIST) {
		return err
	}
	return nil
}

// umlCommandLine is linux.uml's command line for a VM whose state is in
// dir.
func umlCommandLine(cfg Config, dir, id string) []string {
	args := []string{
		"mem=" + strconv.Itoa(cfg.MemoryMB) + "M",
		"root=/dev/root", "rootfstype=hostfs", "rootflags=/", "ro",
		"init=" + filepath.Join(dir, "bin", "wanlab"),
		"uml_dir=" + dir, "umid=" + id,
		// con0 (the kernel's console) to console.log (fd 4), con1
		// the control channel (fd 3), every other line to nothing.
		"con=null", "ssl=null", "con0=null,fd:4", "con1=fd:3",
		"quiet", "panic=-1",
		// Boot work no guest here uses, 1.2-2 s of a 1.5-2.4 s boot
		// to the agent (0.5-0.8 s without, measured with `wanlab vm
		// run --engine uml -- true`): the speed tests of software
		// RAID6 and XOR (btrfs and md are built in; 0.85 s at HZ=100),
		// 256 legacy BSD pty pairs (the console and Unix98 ptys stay)
		// and zswap (the guest has no swap).
		"initcall_blacklist=raid6_select_algo,calibrate_xor_blocks", "pty.legacy_count=0", "zswap.enabled=0",
		"wanlab.ctl=" + umlControlTTY, "wanlab.state=" + dir,
		"GODEBUG=" + umlGODEBUG, "GLIBC_TUNABLES=" + umlGlibcTunables,
	}
	for i, n := range cfg.NICs {
		args = append(args, fmt.Sprintf("vec%d:transport=%s,ifname=%s,depth=128,gro=0", i, umlTransport, n.Tap))
		if n.Addr.IsValid() {
			args = append(args, fmt.Sprintf("wanlab.eth%d=%s", i, n.Addr))
		}
	}
	if cfg.Gateway.IsValid() {
		args = append(args, "wanlab.gw="+cfg.Gateway.String())
	}
	// What follows "--" is init's argv.
	return append(args, "--", "vm", "agent")
}

// prepareUML writes what the guest's init needs into the state
// directory: the module list and the wanlab binary.
func prepareUML(dir, bin string) error {
	release, err := UMLRelease()
	if err != nil {
		return err
	}
	modDir := filepath.Join(umlModulesRoot, release)
	mods, err := moduleOrder(modDir, umlGuestModules)
	if err != nil {
		return err
	}
	var list strings.Builder
	for _, m := range mods {
		list.WriteString(filepath.Join(modDir, m) + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "modules"), []byte(list.String()), 0o644); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		return err
	}
	return copyFile(bin, filepath.Join(dir, "bin", "wanlab"), 0o755)
}

func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// growRawSockets gives each packet socket of the UML process pid (the
// hybrid transport's receive side, one a NIC) a receive buffer of
// umlRawRcvbuf. UML makes them with the host's default buffer, which only
// net.core.rmem_default (not kept per namespace) would change for every
// socket of the host; instead the host takes a copy of each descriptor
// (pidfd_getfd, which the ptrace that UML needs allows) and sets the
// buffer on the shared socket.
func growRawSockets(pid, want int) error {
	return eachRawSocket(pid, want, func(fd int) error {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, umlRawRcvbuf); err != nil {
			return fmt.Errorf("SO_RCVBUFFORCE %d: %w", umlRawRcvbuf, err)
		}
		return nil
	})
}

// rawSocketDrops returns the frames the raw sockets of the UML process
// pid dropped since the last call (PACKET_STATISTICS, which the kernel
// resets on each read): where a hybrid guest NIC loses what it is sent.
// (The TAP's own queue, which nobody reads, drops everything it is given
// once full: its tx_dropped says nothing.)
func rawSocketDrops(pid, want int) (uint64, error) {
	var drops uint64
	err := eachRawSocket(pid, want, func(fd int) error {
		st, err := unix.GetsockoptTpacketStats(fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
		if err != nil {
			return fmt.Errorf("PACKET_STATISTICS: %w", err)
		}
		drops += uint64(st.Drops)
		return nil
	})
	return drops, err
}

// eachRawSocket calls fn with a copy of each packet socket descriptor of
// the UML process pid, of which there must be want.
func eachRawSocket(pid, want int, fn func(fd int) error) error {
	table, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/packet", pid))
	if err != nil {
		return fmt.Errorf("uml %d: packet sockets: %w", pid, err)
	}
	inodes, err := packetInodes(table)
	if err != nil {
		return fmt.Errorf("uml %d: /proc/net/packet: %w", pid, err)
	}
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		return fmt.Errorf("uml %d: %w", pid, err)
	}
	var fds []int
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join(fdDir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		ino, ok := strings.CutPrefix(link, "socket:[")
		if !ok || !inodes[strings.TrimSuffix(ino, "]")] {
			continue
		}
		if fd, err := strconv.Atoi(e.Name()); err == nil {
			fds = append(fds, fd)
		}
	}
	if len(fds) != want {
		return fmt.Errorf("uml %d: %d raw sockets for %d NICs", pid, len(fds), want)
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("uml %d: pidfd_open: %w", pid, err)
	}
	defer unix.Close(pidfd)
	for _, fd := range fds {
		dup, err := unix.PidfdGetfd(pidfd, fd, 0)
		if err != nil {
			return fmt.Errorf("uml %d: raw socket %d: pidfd_getfd: %w", pid, fd, err)
		}
		err = fn(dup)
		unix.Close(dup)
		if err != nil {
			return fmt.Errorf("uml %d: raw socket %d: %w", pid, fd, err)
		}
	}
	return nil
}

// packetInodes returns the inodes of the sockets /proc/net/packet lists
// (its last column; the first line names the columns).
func packetInodes(table []byte) (map[string]bool, error) {
	lines := strings.Split(strings.TrimSpace(string(table)), "\n")
	if len(lines) == 0 || !strings.HasSuffix(strings.TrimSpace(lines[0]), "Inode") {
		return nil, errors.New("no Inode column in the first line")
	}
	out := map[string]bool{}
	for i, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		ino := f[len(f)-1]
		if _, err := strconv.ParseUint(ino, 10, 64); err != nil || len(f) < 2 {
			return nil, fmt.Errorf("line %d: inode %q", i+2, ino)
		}
		out[ino] = true
	}
	return out, nil
}

// tuneUMLTap sets the host side of a UML guest's TAP as the vector driver
// with gro=0 needs it: TSO and GSO off (with them on, the guest receives
// at a fraction of a megabit), a long transmit queue, up.
func tuneUMLTap(nsName, name string) error {
	return nsrun.DoNamed(nsName, func() error { return tuneTapHere(nsName, name) })
}

// tuneTapHere is tuneUMLTap on a thread already in the TAP's namespace
// (nsName names it in errors).
func tuneTapHere(nsName, name string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("tap %s in %s: %w", name, nsName, err)
	}
	for _, o := range []lab.Offload{lab.OffloadTSO, lab.OffloadGSO} {
		// netns.None(): in the namespace the caller entered.
		if err := lab.SetOffload(netns.None(), name, o, false); err != nil {
			return fmt.Errorf("tap %s: %w", name, err)
		}
	}
	if err := netlink.LinkSetTxQLen(l, umlTapQueue); err != nil {
		return fmt.Errorf("tap %s: txqueuelen: %w", name, err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return fmt.Errorf("tap %s: up: %w", name, err)
	}
	return nil
}

// createUMLTaps makes each TAP of a UML guest before the guest starts:
// persistent, tuned (tuneTapHere) and up, so that the vector driver
// attaches to a TAP that is up from its first frame. A guest NIC that
// transmits into its TAP while the TAP is down gets EIO, and the vector
// driver then stops its queue for good (seen here: TX 0 packets, 1
// dropped, the router's ARP unanswered); with the TAPs tuned by a 2 ms poll
// once the guest had made them, that still happened in a loaded CI run
// (every download "no route to host"). The TAPs are the VM's to remove
// (removeUMLTaps; `wanlab cleanup` after a crash, from the state's names).
func createUMLTaps(nsName string, taps []string) error {
	return nsrun.DoNamed(nsName, func() error {
		for i, name := range taps {
			t := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: name}, Mode: netlink.TUNTAP_MODE_TAP, Flags: netlink.TUNTAP_NO_PI}
			err := netlink.LinkAdd(t)
			if err != nil {
				err = fmt.Errorf("tap %s in %s: %w", name, nsName, err)
			} else {
				err = tuneTapHere(nsName, name)
			}
			if err != nil {
				_, derr := deleteTapsHere(nsName, taps[:i+1])
				return errors.Join(err, derr)
			}
		}
		return nil
	})
}

// removeUMLTaps removes the TAPs createUMLTaps made (those of the names
// that are still TAPs in the namespace).
func removeUMLTaps(nsName string, taps []string) error {
	if !nsrun.Exists(nsName) {
		return nil
	}
	return nsrun.DoNamed(nsName, func() error {
		_, err := deleteTapsHere(nsName, taps)
		return err
	})
}

// deleteTapsHere removes the TAPs of the names given that exist, on a
// thread already in namespace nsName, and returns the names it removed.
func deleteTapsHere(nsName string, taps []string) ([]string, error) {
	var removed []string
	var errs []error
	for _, name := range taps {
		l, err := netlink.LinkByName(name)
		if err != nil || l.Type() != "tuntap" {
			continue
		}
		if err := netlink.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("tap %s in %s: %w", name, nsName, err))
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}

// umlSeccompFilter refuses ptrace(PTRACE_GETREGSET/SETREGSET,
// NT_X86_XSTATE) with EIO, so that UML 6.1 uses PTRACE_GETFPREGS and
// SETFPREGS: it passes a 832-byte xstate buffer, which a host kernel whose
// xstate is larger (AVX-512, AMX) rejects on every context switch
// ("ptrace set fp regs failed, errno = 14", and the guest's init dies).
// With denyPtrace every ptrace is refused (the tests' stand-in for a
// sandbox). Everything else is allowed.
func umlSeccompFilter(denyPtrace bool) []unix.SockFilter {
	const auditArchX8664 = 0xc000003e
	const ntX86Xstate = 0x202
	ld := func(off uint32) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off}
	}
	jeq := func(k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: k, Jt: jt, Jf: jf}
	}
	ret := func(k uint32) unix.SockFilter { return unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k} }
	errno := func(e syscall.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(e) }
	// struct seccomp_data: nr at 0, arch at 4, args[i] at 16+8i (the
	// low word first on x86-64).
	if denyPtrace {
		return []unix.SockFilter{
			ld(4), jeq(auditArchX8664, 0, 3),
			ld(0), jeq(unix.SYS_PTRACE, 0, 1),
			ret(errno(unix.EPERM)),
			ret(unix.SECCOMP_RET_ALLOW),
		}
	}
	return []unix.SockFilter{
		/* 0 */ ld(4), jeq(auditArchX8664, 0, 8),
		/* 2 */ ld(0), jeq(unix.SYS_PTRACE, 0, 6),
		/* 4 */ ld(16), jeq(unix.PTRACE_GETREGSET, 1, 0), jeq(unix.PTRACE_SETREGSET, 0, 3),
		/* 7 */ ld(32), jeq(ntX86Xstate, 0, 1),
		/* 9 */ ret(errno(unix.EIO)),
		/* 10 */ ret(unix.SECCOMP_RET_ALLOW),
	}
}

// installSeccomp applies a filter to every thread of this process.
func installSeccomp(f []unix.SockFilter) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return fmt.Errorf("seccomp: %w", e)
	}
	runtime.KeepAlive(f)
	return nil
}

// ExecUML replaces this process with linux.uml and args under
// umlSeccompFilter; `wanlab vm uml-exec` runs it, as Boot starts each UML
// guest. It returns only on error.
func ExecUML(args []string) error {
	runtime.LockOSThread()
	// Niced up, so that the guest's timers and packets keep time beside
	// other work (netem's delay error inside: p50 +2 µs against +46 to
	// +125 µs at nice 0 on a loaded machine); inherited by its processes.
	_ = unix.Setpriority(unix.PRIO_PROCESS, 0, umlNice)
	env := os.Environ()
	if c := os.Getenv(umlCPUEnv); c != "" {
		cpu, err := strconv.Atoi(c)
		if err != nil || cpu < 0 {
			return fmt.Errorf("vm uml-exec: %s=%q: want a CPU number", umlCPUEnv, c)
		}
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return fmt.Errorf("vm uml-exec: CPU %d: %w", cpu, err)
		}
		env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, umlCPUEnv+"=") })
	}
	if err := installSeccomp(umlSeccompFilter(false)); err != nil {
		return fmt.Errorf("vm uml-exec: %w", err)
	}
	return fmt.Errorf("vm uml-exec: %w", syscall.Exec(umlBinary, append([]string{umlBinary}, args...), env))
}

// DenyPtrace makes every later ptrace of this process and its children
// fail with EPERM, as a sandbox would: for tests of the ptrace fault,
// run in a child process of their own.
func DenyPtrace() error { return installSeccomp(umlSeccompFilter(true)) }

// umlProcesses lists the linux.uml processes of process group pgid (a UML
// guest's kernel and the host processes of its address spaces).
func umlProcesses(pgid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := hostfile.ProcStat(e.Name()) // state ppid pgrp ...
		if err != nil || len(f) < 3 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && strings.TrimSuffix(exe, " (deleted)") == umlBinary {
			out = append(out, pid)
		}
	}
	return out
}

// cleanupLeftovers removes what a dead VM may leave beside its state
// directory: the host processes of a UML guest's address spaces (in its
// kernel's process group), its memory's directory, and TAP devices of
// its names still in its namespace (kept by a process that outlived it).
func cleanupLeftovers(st *stateFile) ([]string, error) {
	var removed []string
	var errs []error
	if st.Accel == EngineUML && st.QemuPID > 0 {
		for _, pid := range umlProcesses(st.QemuPID) {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				removed = append(removed, fmt.Sprintf("linux.uml %d of vm %s", pid, st.ID))
			}
		}
	}
	if st.ShmDir != "" && strings.HasPrefix(filepath.Base(st.ShmDir), "wanlab-vm-") && onTmpfs(filepath.Dir(st.ShmDir)) {
		if _, err := os.Stat(st.ShmDir); err == nil {
			if err := os.RemoveAll(st.ShmDir); err != nil {
				errs = append(errs, fmt.Errorf("vm cleanup: %w", err))
			} else {
				removed = append(removed, "memory "+st.ShmDir)
			}
		}
	}
	if st.Netns != "" && len(st.Taps) > 0 && nsrun.Exists(st.Netns) {
		err := nsrun.DoNamed(st.Netns, func() error {
			gone, err := deleteTapsHere(st.Netns, st.Taps)
			for _, name := range gone {
				removed = append(removed, fmt.Sprintf("tap %s in %s of vm %s", name, st.Netns, st.ID))
			}
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("vm cleanup: %w", err))
		}
	}
	return removed, errors.Join(errs...)
}

// EngineCPU is the CPU time the VM's engine has used so far: qemu's
// process, or a UML guest's kernel process with the host processes of its
// address spaces (live ones, and the reaped ones in the kernel's children
// times).
func (v *VM) EngineCPU() (time.Duration, error) {
	pid := v.state.QemuPID
	self, children, err := procCPU(pid)
	if err != nil {
		return 0, fmt.Errorf("vm %s: %w", v.ID, err)
	}
	if v.Engine != EngineUML {
		return self, nil
	}
	total := self + children
	for _, p := range umlProcesses(pid) {
		if p == pid {
			continue
		}
		if c, _, err := procCPU(p); err == nil {
			total += c
		}
	}
	return total, nil
}

// procCPU reads a process's user and system time, and its reaped
// children's, from /proc/PID/stat.
func procCPU(pid int) (self, children time.Duration, err error) {
	f, err := hostfile.ProcStat(strconv.Itoa(pid))
	if err != nil {
		return 0, 0, err
	}
	if len(f) < 15 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	tick := func(i int) time.Duration {
		n, _ := strconv.ParseUint(f[i], 10, 64)
		return time.Duration(n) * time.Second / 100 // USER_HZ
	}
	return tick(11) + tick(12), tick(13) + tick(14), nil
}

// onTmpfs reports whether dir is on a tmpfs (where a UML guest's memory
// directory is made): Cleanup removes nothing named in a state file
// elsewhere.
func onTmpfs(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.TMPFS_MAGIC
}

// sweepMemoryDirs removes the UML memory directories in shm
// (wanlab-vm-<id>) whose VM has no state directory left in stateDir (one
// removed by a Cleanup that did not know them) and that are over a minute
// old (not one being made). They hold no data once their guest is gone:
// the memory file is unlinked.
func sweepMemoryDirs(stateDir, shm string) []string {
	dirs, _ := filepath.Glob(filepath.Join(shm, "wanlab-vm-*"))
	var removed []string
	for _, d := range dirs {
		id := strings.TrimPrefix(filepath.Base(d), "wanlab-vm-")
		if !idPattern.MatchString(id) {
			continue
		}
		if _, err := os.Stat(filepath.Join(stateDir, id)); err == nil {
			continue
		}
		if st, err := os.Stat(d); err != nil || !st.IsDir() || time.Since(st.ModTime()) < time.Minute {
			continue
		}
		if umlUsesTmpdir(d) {
			continue // a live guest whose state is in another directory
		}
		if os.RemoveAll(d) == nil {
			removed = append(removed, "memory "+d)
		}
	}
	return removed
}

// umlUsesTmpdir reports whether a running linux.uml has dir as its
// TMPDIR (its memory's directory).
func umlUsesTmpdir(dir string) bool {
	ents, _ := os.ReadDir("/proc")
	want := []byte("TMPDIR=" + dir + "\x00")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || strings.TrimSuffix(exe, " (deleted)") != umlBinary {
			continue
		}
		if env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ")); err == nil && bytes.Contains(env, want) {
			return true
		}
	}
	return false
}
