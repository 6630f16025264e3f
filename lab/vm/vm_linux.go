package vm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/lab"
)

// qemuBinary is Debian's qemu-system-x86 executable.
const qemuBinary = "qemu-system-x86_64"

// controlPortName names the virtio-serial port the agent looks for.
const controlPortName = "wanlab.ctl"

// VM is a running guest. Close stops it.
type VM struct {
	ID    string
	Accel Accel
	// BootTime is from starting qemu to the agent's hello.
	BootTime time.Duration
	Hello    Hello

	cfg      Config
	state    *stateFile
	cmd      *exec.Cmd
	exited   chan struct{} // closed when qemu has exited
	exitErr  error
	mu       sync.Mutex // one command at a time on conn
	connMu   sync.Mutex // guards conn itself: teardown may run during a command
	conn     net.Conn
	stop     func() bool
	once     sync.Once
	closeErr error
}

// Boot starts a VM and waits for its agent. If ctx is cancelled while the
// VM runs (Ctrl-C in the caller), the VM is stopped; the caller still calls
// Close. On error nothing of the VM is left.
func Boot(ctx context.Context, cfg Config) (_ *VM, err error) {
	if cfg.MemoryMB == 0 {
		cfg.MemoryMB = 256
	}
	if cfg.BootTimeout == 0 {
		cfg.BootTimeout = 90 * time.Second
	}
	if cfg.StateDir == "" {
		cfg.StateDir = DefaultStateDir
	}
	if cfg.Netns == "" && len(cfg.NICs) > 0 {
		return nil, errors.New("vm: TAP devices need a namespace (Config.Netns)")
	}
	for i, n := range cfg.NICs {
		if n.Tap == "" || len(n.Tap) > 15 {
			return nil, fmt.Errorf("vm: NIC %d: TAP name %q: want 1-15 bytes", i, n.Tap)
		}
	}
	p, err := LoadPrepared(cfg.CacheDir)
	if err != nil {
		return nil, err
	}
	bin := cfg.Binary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("vm: own executable: %w", err)
		}
	}
	if _, err := elfInterp(bin); err != nil {
		return nil, fmt.Errorf("vm: wanlab binary: %w", err)
	}
	if _, err := exec.LookPath(qemuBinary); err != nil {
		return nil, fmt.Errorf("vm: %s not found: install Debian's qemu-system-x86", qemuBinary)
	}
	accel := cfg.Accel
	if accel == AccelAuto {
		if accel, _, err = ProbeAccel(ctx, cfg.CacheDir); err != nil {
			return nil, err
		}
	}

	v := &VM{cfg: cfg, Accel: accel, exited: make(chan struct{})}
	if err := v.createState(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			v.teardown()
		}
	}()
	initrd := filepath.Join(v.state.dir, "initrd")
	if err := bootInitramfs(p.Initramfs, bin, initrd); err != nil {
		return nil, fmt.Errorf("vm %s: initramfs: %w", v.ID, err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: v.state.ControlSock, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("vm %s: control socket: %w", v.ID, err)
	}
	defer ln.Close()
	var taps []*os.File
	defer func() {
		for _, f := range taps {
			f.Close() // qemu holds its own copies
		}
	}()
	for _, n := range cfg.NICs {
		f, err := openTap(cfg.Netns, n.Tap)
		if err != nil {
			return nil, fmt.Errorf("vm %s: %w", v.ID, err)
		}
		taps = append(taps, f)
	}
	args := qemuArgs(p, cfg, accel, initrd, v.state.ControlSock, filepath.Join(v.state.dir, "console.log"))
	v.cmd = exec.Command(qemuBinary, args...)
	var stderr bytes.Buffer
	v.cmd.Stderr = &lockedBuffer{b: &stderr}
	v.cmd.ExtraFiles = taps // fds 3, 4, ...
	// Its own process group, so Ctrl-C reaches the owner, which stops the
	// VM in order; SIGKILL when the owner dies without doing so.
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	// Pdeathsig fires when the OS thread that started qemu exits, not the
	// process: a Go thread ends whenever a goroutine that locked it
	// returns (nsrun does so on every namespace switch), which would kill
	// a VM at random. qemu is started from a thread locked for the VM's
	// whole life, so only the process's death ends it.
	startErr := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := v.cmd.Start(); err != nil {
			runtime.UnlockOSThread()
			startErr <- err
			return
		}
		startErr <- nil
		v.exitErr = v.cmd.Wait()
		close(v.exited)
		// Returning locked ends the thread, with qemu already gone.
	}()
	if err := <-startErr; err != nil {
		return nil, fmt.Errorf("vm %s: start qemu: %w", v.ID, err)
	}
	v.state.QemuPID = v.cmd.Process.Pid
	v.state.QemuStart, _ = lab.ProcessStart(v.state.QemuPID)
	if err := v.state.save(); err != nil {
		return nil, err
	}
	hello, err := v.awaitHello(ctx, ln, start, &stderr)
	if err != nil {
		return nil, fmt.Errorf("vm %s (%s): %w", v.ID, accel, err)
	}
	v.Hello = hello
	v.BootTime = time.Since(start)
	v.stop = context.AfterFunc(ctx, func() { _ = v.Close() })
	return v, nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (v *VM) createState() error {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("vm id: %w", err)
	}
	v.ID = hex.EncodeToString(b[:])
	dir := filepath.Join(v.cfg.StateDir, v.ID)
	if err := hostfile.Dir(v.cfg.StateDir); err != nil {
		return fmt.Errorf("vm state dir: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("vm state: %w", err)
	}
	st := &stateFile{ID: v.ID, PID: os.Getpid(), Created: time.Now().UTC(), Accel: v.Accel,
		Netns: v.cfg.Netns, ControlSock: filepath.Join(dir, "ctl.sock"), dir: dir}
	for _, n := range v.cfg.NICs {
		st.Taps = append(st.Taps, n.Tap)
	}
	st.Start, _ = lab.ProcessStart(st.PID)
	v.state = st
	return st.save()
}

func qemuArgs(p *Prepared, cfg Config, accel Accel, initrd, sock, console string) []string {
	cmdline := []string{"console=ttyS0", "quiet", "panic=-1", "rdinit=/init"}
	for i, n := range cfg.NICs {
		if n.Addr.IsValid() {
			cmdline = append(cmdline, fmt.Sprintf("wanlab.eth%d=%s", i, n.Addr))
		}
	}
	if cfg.Gateway.IsValid() {
		cmdline = append(cmdline, "wanlab.gw="+cfg.Gateway.String())
	}
	args := []string{"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-m", fmt.Sprint(cfg.MemoryMB), "-smp", "1",
		"-kernel", p.Kernel, "-initrd", initrd, "-append", strings.Join(cmdline, " "),
		"-serial", "file:" + console,
		"-device", "virtio-serial-pci,id=vs0",
		"-chardev", "socket,id=ctl,path=" + sock,
		"-device", "virtserialport,bus=vs0.0,chardev=ctl,name=" + controlPortName,
	}
	args = append(args, accelArgs(accel, cfg.CPU)...)
	if len(cfg.NICs) == 0 {
		return append(args, "-netdev", "hubport,id=n0,hubid=0", "-device", "virtio-net-pci,netdev=n0,mac=52:54:00:57:4c:00")
	}
	for i := range cfg.NICs {
		args = append(args, "-netdev", fmt.Sprintf("tap,id=n%d,fd=%d", i, 3+i),
			"-device", fmt.Sprintf("virtio-net-pci,netdev=n%d,mac=52:54:00:57:4c:%02x", i, i))
	}
	return args
}

func accelArgs(a Accel, cpu string) []string {
	if a == AccelKVM {
		return []string{"-accel", "kvm", "-cpu", "host"}
	}
	if cpu == "" {
		cpu = "max"
	}
	return []string{"-accel", "tcg,thread=multi", "-cpu", cpu}
}

// awaitHello waits for qemu to connect to the control socket and the
// agent to say hello, or for qemu to exit, or the boot timeout.
func (v *VM) awaitHello(ctx context.Context, ln *net.UnixListener, start time.Time, stderr *bytes.Buffer) (Hello, error) {
	deadline := start.Add(v.cfg.BootTimeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	type result struct {
		conn  net.Conn
		hello Hello
		err   error
	}
	done := make(chan result, 1)
	ln.SetDeadline(deadline)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- result{err: fmt.Errorf("qemu did not connect to the control socket: %w", err)}
			return
		}
		c.SetReadDeadline(deadline)
		f, err := readFrame(c)
		if err == nil && f.typ != frameHello {
			err = fmt.Errorf("first control frame %q, want hello", f.typ)
		}
		var h Hello
		if err == nil {
			err = json.Unmarshal(f.payload, &h)
		}
		c.SetReadDeadline(time.Time{})
		if err != nil {
			c.Close()
		}
		done <- result{c, h, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return Hello{}, fmt.Errorf("agent: %w%s", r.err, v.consoleTail())
		}
		v.connMu.Lock()
		v.conn = r.conn
		v.connMu.Unlock()
		return r.hello, nil
	case <-v.exited:
		return Hello{}, fmt.Errorf("qemu exited during boot (%v): %s%s", v.exitErr, strings.TrimSpace(stderr.String()), v.consoleTail())
	case <-ctx.Done():
		ln.Close()
		if ctx.Err() == context.DeadlineExceeded {
			return Hello{}, fmt.Errorf("no agent after %v%s", v.cfg.BootTimeout, v.consoleTail())
		}
		return Hello{}, ctx.Err()
	}
}

// consoleTail returns the last lines of the guest's console, for errors.
func (v *VM) consoleTail() string {
	b, err := os.ReadFile(filepath.Join(v.state.dir, "console.log"))
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return "; console: " + strings.Join(lines, " | ")
}

// bootInitramfs writes the prepared initramfs followed by a second cpio
// archive holding bin as /bin/wanlab and, when bin is dynamically linked,
// the shared libraries it needs from this host (a static build, with
// CGO_ENABLED=0, needs none and does not depend on the host's libc).
func bootInitramfs(base, bin, out string) error {
	var libs []string
	if interp, err := elfInterp(bin); err != nil {
		return err
	} else if interp != "" {
		if libs, err = sharedLibs(bin); err != nil {
			return err
		}
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	src, err := os.Open(base)
	if err != nil {
		return err
	}
	defer src.Close()
	n, err := io.Copy(f, src)
	if err != nil {
		return err
	}
	// The kernel looks for the next archive at a 4-byte boundary.
	if r := n % 4; r != 0 {
		f.Write(make([]byte, 4-r))
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	a := &archive{c: cpioWriter{w: f}, dirs: map[string]bool{"": true, ".": true, "bin": true}}
	a.file("bin/wanlab", 0o755, b)
	for _, l := range libs {
		a.copyFile(l, libPath(l), 0o755)
	}
	if a.err != nil {
		return a.err
	}
	if err := a.c.close(); err != nil {
		return err
	}
	return f.Close()
}

// openTap creates a TAP device name in the named namespace and returns its
// file; the device goes away when the last copy of the file is closed.
func openTap(netns, name string) (*os.File, error) {
	var f *os.File
	err := nsrun.DoNamed(netns, func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("tap %s: /dev/net/tun: %w", name, err)
		}
		var req struct {
			name  [unix.IFNAMSIZ]byte
			flags uint16
			_     [22]byte
		}
		copy(req.name[:], name)
		req.flags = unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(&req))); e != 0 {
			unix.Close(fd)
			return fmt.Errorf("tap %s in %s: %w", name, netns, e)
		}
		f = os.NewFile(uintptr(fd), "/dev/net/tun")
		l, err := netlink.LinkByName(name)
		if err == nil {
			err = netlink.LinkSetUp(l)
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("tap %s in %s: up: %w", name, netns, err)
		}
		return nil
	})
	return f, err
}

// Run runs argv inside the VM and returns its output and exit code. An
// error means the command could not be run (not found, VM gone, ctx done).
func (v *VM) Run(ctx context.Context, argv ...string) (Result, error) {
	var out, errb bytes.Buffer
	code, err := v.Stream(ctx, &out, &errb, argv...)
	return Result{Stdout: out.Bytes(), Stderr: errb.Bytes(), ExitCode: code}, err
}

// Stream is Run that copies the command's output to stdout and stderr as
// it arrives.
func (v *VM) Stream(ctx context.Context, stdout, stderr io.Writer, argv ...string) (int, error) {
	if len(argv) == 0 {
		return -1, errors.New("vm run: no command")
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	conn := v.control()
	if conn == nil {
		return -1, fmt.Errorf("vm %s: stopped", v.ID)
	}
	req, _ := json.Marshal(runRequest{Argv: argv})
	stopDeadline := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer func() {
		if stopDeadline() {
			return
		}
		conn.SetDeadline(time.Time{})
	}()
	if err := writeFrame(conn, frameRun, req); err != nil {
		return -1, v.connError(ctx, err)
	}
	for {
		f, err := readFrame(conn)
		if err != nil {
			return -1, v.connError(ctx, err)
		}
		switch f.typ {
		case frameStdout:
			stdout.Write(f.payload)
		case frameStderr:
			stderr.Write(f.payload)
		case frameExit:
			var x runExit
			if err := json.Unmarshal(f.payload, &x); err != nil {
				return -1, fmt.Errorf("vm %s: exit frame: %w", v.ID, err)
			}
			if x.Error != "" {
				return -1, fmt.Errorf("vm %s: %s: %s", v.ID, argv[0], x.Error)
			}
			return x.Code, nil
		default:
			return -1, fmt.Errorf("vm %s: unexpected control frame %q", v.ID, f.typ)
		}
	}
}

// connError makes a broken control channel one line: the context's error
// when it was cancelled (the command may still run inside, so the channel
// is closed for good), or what happened to qemu.
func (v *VM) connError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		v.connMu.Lock()
		if v.conn != nil {
			v.conn.Close()
			v.conn = nil
		}
		v.connMu.Unlock()
		return fmt.Errorf("vm %s: %w", v.ID, ctx.Err())
	}
	select {
	case <-v.exited:
		return fmt.Errorf("vm %s: qemu exited (%v)%s", v.ID, v.exitErr, v.consoleTail())
	default:
	}
	return fmt.Errorf("vm %s: control channel: %w", v.ID, err)
}

// control returns the control connection, nil once it is closed.
func (v *VM) control() net.Conn {
	v.connMu.Lock()
	defer v.connMu.Unlock()
	return v.conn
}

// Exited is closed when qemu has exited.
func (v *VM) Exited() <-chan struct{} { return v.exited }

// QemuPID is the PID of the VM's qemu process.
func (v *VM) QemuPID() int { return v.state.QemuPID }

// StateDir is the VM's state directory.
func (v *VM) StateDir() string { return v.state.dir }

// Close powers the VM off (qemu is killed when the guest does not stop
// within 10 s) and removes its state directory. It is safe to call more
// than once and from several goroutines.
func (v *VM) Close() error {
	v.once.Do(func() {
		if v.stop != nil {
			v.stop()
		}
		v.closeErr = v.teardown()
	})
	return v.closeErr
}

func (v *VM) teardown() error {
	if v.cmd != nil && v.cmd.Process != nil {
		// Without the command lock: a command still running is cut off.
		if c := v.control(); c != nil {
			c.SetWriteDeadline(time.Now().Add(time.Second))
			writeFrame(c, framePowerOff, nil)
		}
		select {
		case <-v.exited:
		case <-time.After(10 * time.Second):
			v.cmd.Process.Kill()
			<-v.exited
		}
		if c := v.control(); c != nil {
			c.Close()
		}
	}
	if v.state != nil {
		if err := os.RemoveAll(v.state.dir); err != nil {
			return fmt.Errorf("vm %s: %w", v.ID, err)
		}
	}
	return nil
}

// ProbeAccel chooses the accelerator: KVM when /dev/kvm exists and a probe
// boot under it reaches /init and powers off, emulation otherwise. The
// answer is cached in cacheDir for this host kernel; reason says why.
func ProbeAccel(ctx context.Context, cacheDir string) (Accel, string, error) {
	if cacheDir == "" {
		cacheDir = DefaultCacheDir
	}
	var uts unix.Utsname
	unix.Uname(&uts)
	host := unix.ByteSliceToString(uts.Release[:])
	recPath := filepath.Join(cacheDir, "accel.json")
	if b, err := os.ReadFile(recPath); err == nil {
		var r probeRecord
		if json.Unmarshal(b, &r) == nil && r.HostRelease == host && (r.Accel == AccelKVM || r.Accel == AccelTCG) {
			return r.Accel, r.Reason, nil
		}
	}
	p, err := LoadPrepared(cacheDir)
	if err != nil {
		return "", "", err
	}
	accel, reason := AccelTCG, ""
	if _, err := os.Stat("/dev/kvm"); err != nil {
		reason = "no /dev/kvm"
	} else if err := probeKVM(ctx, p); err != nil {
		if ctx.Err() != nil {
			return "", "", ctx.Err()
		}
		reason = "KVM probe boot failed: " + err.Error()
	} else {
		accel, reason = AccelKVM, "KVM probe boot succeeded"
	}
	b, _ := json.MarshalIndent(probeRecord{HostRelease: host, Accel: accel, Reason: reason}, "", "  ")
	writeAtomic(recPath, append(b, '\n'))
	return accel, reason, nil
}

// probeKVM boots the prepared kernel under KVM with an /init that powers
// off at once.
func probeKVM(ctx context.Context, p *Prepared) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemuBinary, "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-m", "256", "-smp", "1", "-accel", "kvm", "-cpu", "host",
		"-kernel", p.Kernel, "-initrd", p.Initramfs, "-append", "console=ttyS0 panic=-1 rdinit=/init wanlab.probe",
		"-serial", "stdio")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out lockedBuffer
	out.b = &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// A KVM that cannot run the guest stops it with "KVM internal error"
	// and leaves qemu paused: watch for that instead of waiting it out.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("qemu: %v: %s", err, lastLine([]byte(out.String())))
			}
			if !strings.Contains(out.String(), "Run /init") && !strings.Contains(out.String(), "reboot: Power down") {
				return fmt.Errorf("guest did not reach /init: %s", lastLine([]byte(out.String())))
			}
			return nil
		case <-tick.C:
			if s := out.String(); strings.Contains(s, "KVM internal error") || strings.Contains(s, "emulation failure") {
				cmd.Process.Kill()
				<-done
				return errors.New("KVM internal error (emulation failure)")
			}
		case <-ctx.Done():
			<-done
			return errors.New("no power-off within 20 s")
		}
	}
}
