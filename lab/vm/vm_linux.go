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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/internal/nsrun"
)

// qemuBinary is Debian's qemu-system-x86 executable.
const qemuBinary = "qemu-system-x86_64"

// controlPortName names the virtio-serial port the agent looks for.
const controlPortName = "wanlab.ctl"

// VM is a running guest. Close stops it.
type VM struct {
	ID     string
	Engine Engine
	// BootTime is from starting qemu or linux.uml to the agent's hello.
	BootTime time.Duration
	Hello    Hello

	cfg      Config
	state    *stateFile
	cmd      *exec.Cmd
	exited   chan struct{} // closed when qemu or linux.uml has exited
	exitErr  error
	mu       sync.Mutex // one command at a time on conn
	connMu   sync.Mutex // guards conn itself: teardown may run during a command
	conn     net.Conn
	stop     func() bool
	once     sync.Once
	closeErr error
	dropsMu  sync.Mutex
	rawDrops uint64 // RawDrops' running sum
}

// RawDrops returns the frames a UML guest's NICs lost on the way in since
// the boot: the drops of the raw sockets its vector NICs receive from.
// For a qemu guest, whose NIC reads its TAP's queue, it is 0: that queue's
// drops are the TAP's tx_dropped.
func (v *VM) RawDrops() (uint64, error) {
	if v.Engine != EngineUML || len(v.cfg.NICs) == 0 || v.cmd == nil {
		return 0, nil
	}
	v.dropsMu.Lock()
	defer v.dropsMu.Unlock()
	n, err := rawSocketDrops(v.cmd.Process.Pid, len(v.cfg.NICs))
	if err != nil {
		return 0, fmt.Errorf("vm %s: %w", v.ID, err)
	}
	v.rawDrops += n
	return v.rawDrops, nil
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
	bin := cfg.Binary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("vm: own executable: %w", err)
		}
	}
	if _, err := elfInterp(bin); err != nil {
		return nil, fmt.Errorf("vm: wanlab binary: %w", err)
	}
	engine := cfg.Engine
	if engine == EngineAuto {
		if engine, _, err = ChooseEngine(ctx, cfg.CacheDir); err != nil {
			return nil, err
		}
	}
	var p *Prepared
	switch engine {
	case EngineUML:
		if err := UMLUsable(); err != nil {
			return nil, fmt.Errorf("vm (uml): %w", err)
		}
	case EngineKVM, EngineTCG:
		if p, err = LoadPrepared(cfg.CacheDir); err != nil {
			return nil, err
		}
		if _, err := exec.LookPath(qemuBinary); err != nil {
			return nil, fmt.Errorf("vm: %s not found: install Debian's qemu-system-x86 (wanlab vm prepare)", qemuBinary)
		}
	default:
		return nil, fmt.Errorf("vm: %w", fmt.Errorf("engine %q: want auto, kvm, uml or tcg", engine))
	}
	if err := checkTaps(cfg.Netns, cfg.NICs); err != nil {
		return nil, err
	}

	v := &VM{cfg: cfg, Engine: engine, exited: make(chan struct{})}
	if err := v.createState(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			v.teardown()
		}
	}()
	if engine == EngineUML && len(cfg.NICs) > 0 {
		if err := createUMLTaps(cfg.Netns, v.state.Taps); err != nil {
			return nil, fmt.Errorf("vm %s: %w", v.ID, err)
		}
	}
	var l launch
	if engine == EngineUML {
		l, err = v.umlLaunch(bin)
	} else {
		l, err = v.qemuLaunch(p, bin)
	}
	defer l.closeFiles()
	if err != nil {
		return nil, err
	}
	v.cmd = l.cmd
	start := time.Now()
	// Pdeathsig fires when the OS thread that started qemu exits, not the
	// process: a Go thread ends whenever a goroutine that locked it
	// returns (nsrun does so on every namespace switch), which would kill
	// a VM at random. The engine is started from a thread locked for the
	// VM's whole life, so only the process's death ends it. A UML guest
	// attaches to the TAPs made for it: it is started in their namespace.
	startErr := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if l.netns != "" {
			h, err := netns.GetFromName(l.netns)
			if err == nil {
				err = netns.Set(h)
				h.Close()
			}
			if err != nil {
				startErr <- fmt.Errorf("netns %s: %w", l.netns, err)
				return // the thread ends locked, in no namespace of use
			}
		}
		if err := v.cmd.Start(); err != nil {
			if l.netns == "" {
				runtime.UnlockOSThread()
			}
			startErr <- err
			return
		}
		startErr <- nil
		v.exitErr = v.cmd.Wait()
		if v.Engine == EngineUML {
			// The host processes of the guest's address spaces share
			// its file table, the control socket included: they go
			// with the kernel's.
			killAll(umlProcesses(v.cmd.Process.Pid))
		}
		close(v.exited)
		// A command waiting on the control channel learns at once.
		if c := v.control(); c != nil {
			c.SetDeadline(time.Now())
		}
		// Returning locked ends the thread, with the engine already gone.
	}()
	if err := <-startErr; err != nil {
		v.cmd = nil
		return nil, fmt.Errorf("vm %s: start %s: %w", v.ID, v.processName(), err)
	}
	l.closeFiles() // the engine holds its own copies
	v.state.QemuPID = v.cmd.Process.Pid
	v.state.QemuStart, _ = hostfile.ProcessStart(v.state.QemuPID)
	if err := v.state.save(); err != nil {
		return nil, err
	}
	hello, err := v.awaitHello(ctx, l.accept, l.cancelAccept, start, l.stderr)
	if err != nil {
		return nil, fmt.Errorf("vm %s (%s): %w", v.ID, engine, err)
	}
	if hello.NetworkError != "" && len(cfg.NICs) > 0 {
		return nil, fmt.Errorf("vm %s (%s): guest network: %s", v.ID, engine, hello.NetworkError)
	}
	if engine == EngineUML && len(cfg.NICs) > 0 {
		// Again now that the guest's driver has set the TAP up its way
		// (it may turn offloads back on as it attaches): the state the
		// guest runs with is the one tuned after its hello.
		for _, n := range cfg.NICs {
			if err := tuneUMLTap(cfg.Netns, n.Tap); err != nil {
				return nil, fmt.Errorf("vm %s: %w", v.ID, err)
			}
		}
		if err := growRawSockets(v.cmd.Process.Pid, len(cfg.NICs)); err != nil {
			return nil, fmt.Errorf("vm %s: %w", v.ID, err)
		}
	}
	v.Hello = hello
	v.BootTime = time.Since(start)
	v.stop = context.AfterFunc(ctx, func() { _ = v.Close() })
	return v, nil
}

// launch is how an engine is started: its command, the files it gets
// (closed here once it runs), how the control connection is accepted,
// and the namespace it must start in.
type launch struct {
	cmd          *exec.Cmd
	files        []*os.File
	accept       func(deadline time.Time) (net.Conn, error)
	cancelAccept func()
	stderr       fmt.Stringer
	netns        string
}

func (l *launch) closeFiles() {
	for _, f := range l.files {
		f.Close()
	}
	l.files = nil
}

// qemuLaunch builds the boot initramfs, the control socket qemu connects
// to, the TAPs and qemu's command.
func (v *VM) qemuLaunch(p *Prepared, bin string) (launch, error) {
	var l launch
	initrd := filepath.Join(v.state.dir, "initrd")
	if err := bootInitramfs(p.Initramfs, bin, initrd); err != nil {
		return l, fmt.Errorf("vm %s: initramfs: %w", v.ID, err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: v.state.ControlSock, Net: "unix"})
	if err != nil {
		return l, fmt.Errorf("vm %s: control socket: %w", v.ID, err)
	}
	l.accept = func(deadline time.Time) (net.Conn, error) {
		defer ln.Close()
		ln.SetDeadline(deadline)
		c, err := ln.Accept()
		if err != nil {
			return nil, fmt.Errorf("qemu did not connect to the control socket: %w", err)
		}
		return c, nil
	}
	l.cancelAccept = func() { ln.Close() }
	for _, n := range v.cfg.NICs {
		f, err := openTap(v.cfg.Netns, n.Tap)
		if err != nil {
			ln.Close()
			return l, fmt.Errorf("vm %s: %w", v.ID, err)
		}
		l.files = append(l.files, f)
	}
	args := qemuArgs(p, v.cfg, v.Engine, initrd, v.state.ControlSock, filepath.Join(v.state.dir, "console.log"))
	l.cmd = exec.Command(qemuBinary, args...)
	stderr := &lockedBuffer{b: &bytes.Buffer{}}
	l.stderr = stderr
	l.cmd.Stderr = stderr
	l.cmd.ExtraFiles = l.files // fds 3, 4, ...
	// Its own process group, so Ctrl-C reaches the owner, which stops the
	// VM in order; SIGKILL when the owner dies without doing so.
	l.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return l, nil
}

// umlLaunch prepares a UML guest's state directory, its memory's
// directory, the control socket pair and the console, and the command:
// linux.uml started through `wanlab vm uml-exec` (umlSeccompFilter).
func (v *VM) umlLaunch(bin string) (launch, error) {
	var l launch
	shm := v.cfg.ShmDir
	if shm == "" {
		shm = "/dev/shm"
	}
	if err := checkShm(shm, v.cfg.MemoryMB); err != nil {
		return l, fmt.Errorf("vm %s (uml): %w", v.ID, err)
	}
	v.state.ShmDir = filepath.Join(shm, "wanlab-vm-"+v.ID)
	if err := v.state.save(); err != nil {
		return l, err
	}
	if err := os.Mkdir(v.state.ShmDir, 0o700); err != nil {
		return l, fmt.Errorf("vm %s: %w", v.ID, err)
	}
	if err := prepareUML(v.state.dir, bin); err != nil {
		return l, fmt.Errorf("vm %s (uml): %w", v.ID, err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return l, fmt.Errorf("vm %s: control socket pair: %w", v.ID, err)
	}
	hostEnd := os.NewFile(uintptr(fds[0]), "control")
	guestEnd := os.NewFile(uintptr(fds[1]), "control-guest")
	conn, err := net.FileConn(hostEnd)
	hostEnd.Close()
	if err != nil {
		guestEnd.Close()
		return l, fmt.Errorf("vm %s: control socket: %w", v.ID, err)
	}
	console, err := os.OpenFile(filepath.Join(v.state.dir, "console.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		guestEnd.Close()
		conn.Close()
		return l, fmt.Errorf("vm %s: console: %w", v.ID, err)
	}
	l.files = []*os.File{guestEnd, console}
	l.accept = func(time.Time) (net.Conn, error) { return conn, nil }
	l.cancelAccept = func() { conn.Close() }
	l.stderr = &strings.Builder{}
	l.netns = v.cfg.Netns
	args := append([]string{"vm", "uml-exec", "--"}, umlCommandLine(v.cfg, v.state.dir, v.ID)...)
	l.cmd = exec.Command(bin, args...)
	l.cmd.Env = append(os.Environ(), "TMPDIR="+v.state.ShmDir)
	if cpu, ok := nextUMLCPU(); ok {
		l.cmd.Env = append(l.cmd.Env, umlCPUEnv+"="+strconv.Itoa(cpu))
	}
	l.cmd.Stdout, l.cmd.Stderr = console, console
	l.cmd.ExtraFiles = l.files // fd 3: con1, the control channel; fd 4: con0
	// linux.uml is the init of a PID namespace of its own: when it dies
	// (Pdeathsig when its owner does), the kernel kills the host
	// processes of the guest's address spaces with it.
	l.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Cloneflags: syscall.CLONE_NEWPID}
	return l, nil
}

// checkTaps refuses a TAP name that is taken in the namespace (a crash's
// leftover is removed by `wanlab cleanup`).
func checkTaps(ns string, nics []NIC) error {
	if len(nics) == 0 {
		return nil
	}
	return nsrun.DoNamed(ns, func() error {
		for _, n := range nics {
			if l, err := netlink.LinkByName(n.Tap); err == nil {
				return fmt.Errorf("vm: TAP %s: a %s device of that name exists in %s (left by a crash? `wanlab cleanup` removes those of dead VMs)", n.Tap, l.Type(), ns)
			}
		}
		return nil
	})
}

// processName names the engine's process in messages.
func (v *VM) processName() string {
	if v.Engine == EngineUML {
		return "linux.uml"
	}
	return "qemu"
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
	st := &stateFile{ID: v.ID, PID: os.Getpid(), Created: time.Now().UTC(), Accel: v.Engine,
		Netns: v.cfg.Netns, ControlSock: filepath.Join(dir, "ctl.sock"), dir: dir}
	for _, n := range v.cfg.NICs {
		st.Taps = append(st.Taps, n.Tap)
	}
	st.Start, _ = hostfile.ProcessStart(st.PID)
	v.state = st
	return st.save()
}

func qemuArgs(p *Prepared, cfg Config, accel Engine, initrd, sock, console string) []string {
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

func accelArgs(a Engine, cpu string) []string {
	if a == AccelKVM {
		return []string{"-accel", "kvm", "-cpu", "host"}
	}
	if cpu == "" {
		cpu = "max"
	}
	return []string{"-accel", "tcg,thread=multi", "-cpu", cpu}
}

// awaitHello waits for the control connection (qemu connecting to the
// control socket; a UML guest's is there from the start) and the agent's
// hello, or for the engine to exit, or the boot timeout.
func (v *VM) awaitHello(ctx context.Context, accept func(time.Time) (net.Conn, error), cancelAccept func(), start time.Time, stderr fmt.Stringer) (Hello, error) {
	deadline := start.Add(v.cfg.BootTimeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	type result struct {
		conn  net.Conn
		hello Hello
		err   error
	}
	done := make(chan result, 1)
	go func() {
		c, err := accept(deadline)
		if err != nil {
			done <- result{err: err}
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
		cancelAccept()
		return Hello{}, fmt.Errorf("%s exited during boot (%v): %s%s", v.processName(), v.exitErr, strings.TrimSpace(stderr.String()), v.consoleTail())
	case <-ctx.Done():
		cancelAccept()
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
		return fmt.Errorf("vm %s: %s exited (%v)%s", v.ID, v.processName(), v.exitErr, v.consoleTail())
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

// Exited is closed when qemu or linux.uml has exited.
func (v *VM) Exited() <-chan struct{} { return v.exited }

// QemuPID is the PID of the VM's qemu or linux.uml process.
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
		if v.Engine == EngineUML {
			// The host processes of the guest's address spaces, should
			// any outlive the kernel's.
			killAll(umlProcesses(v.cmd.Process.Pid))
		}
	} else if c := v.control(); c != nil {
		c.Close()
	}
	if v.state != nil {
		var errs []error
		if v.Engine == EngineUML && len(v.state.Taps) > 0 {
			// Made persistent before the boot (createUMLTaps): they
			// outlive the guest.
			if err := removeUMLTaps(v.state.Netns, v.state.Taps); err != nil {
				errs = append(errs, fmt.Errorf("vm %s: %w", v.ID, err))
			}
		}
		if v.state.ShmDir != "" {
			if err := os.RemoveAll(v.state.ShmDir); err != nil {
				errs = append(errs, fmt.Errorf("vm %s: %w", v.ID, err))
			}
		}
		if err := os.RemoveAll(v.state.dir); err != nil {
			errs = append(errs, fmt.Errorf("vm %s: %w", v.ID, err))
		}
		return errors.Join(errs...)
	}
	return nil
}

func killAll(pids []int) {
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGKILL)
	}
}

// ProbeAccel chooses the accelerator: KVM when /dev/kvm exists and a probe
// boot under it reaches /init and powers off, emulation otherwise. The
// answer is cached in cacheDir for this host kernel; reason says why.
func ProbeAccel(ctx context.Context, cacheDir string) (Engine, string, error) {
	if cacheDir == "" {
		cacheDir = DefaultCacheDir
	}
	host := host.KernelRelease()
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

// ChooseEngine picks the engine EngineAuto means: KVM when its probe boot
// works (ProbeAccel, cached), else UML when it can run here (UMLUsable),
// else qemu's emulation. reason says which and why, in one line.
func ChooseEngine(ctx context.Context, cacheDir string) (Engine, string, error) {
	var kvm string
	_, qerr := exec.LookPath(qemuBinary)
	_, perr := LoadPrepared(cacheDir)
	switch {
	case !fileExists("/dev/kvm"):
		kvm = "no /dev/kvm"
	case qerr != nil:
		kvm = "KVM not probed: " + qemuBinary + " not installed"
	case perr != nil:
		kvm = "KVM not probed: " + perr.Error()
	default:
		a, r, err := ProbeAccel(ctx, cacheDir)
		if err != nil {
			return "", "", err
		}
		if a == EngineKVM {
			return EngineKVM, "kvm: " + r, nil
		}
		kvm = r
	}
	uerr := UMLUsable()
	if uerr == nil {
		return EngineUML, "uml: " + kvm + ", and UML runs here", nil
	}
	if qerr != nil || perr != nil {
		return "", "", fmt.Errorf("vm: no engine can run: %s; UML: %v; tcg: %v", kvm, uerr, errors.Join(qerr, perr))
	}
	return EngineTCG, fmt.Sprintf("tcg: %s, and UML cannot run (%v)", kvm, uerr), nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
