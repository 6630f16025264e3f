package vm

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/host"
)

// guestEnv is the environment of every command the agent runs. iproute2's
// directory comes first so that "tc" and "ip" are never busybox's.
var guestEnv = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "TERM=dumb"}

// Agent is the guest side, run as `wanlab vm agent` by the initramfs's
// /init (so as PID 1): it brings the network up, says hello on the control
// port and runs the commands the host sends until told to power off.
func Agent() error {
	if os.Getpid() == 1 {
		exe, _ := os.Executable()
		if state := cmdlineValueFile("wanlab.state"); state != "" && filepath.Dir(exe) != umlGuestBin {
			// A UML guest's init, before the mounts.
			return umlInit(state)
		}
	}
	cmdline, _ := os.ReadFile("/proc/cmdline")
	var f *os.File
	if tty := cmdlineValue(string(cmdline), "wanlab.ctl"); tty != "" {
		// A UML guest: the control channel is a console line, made
		// raw so that frames pass as they are.
		var err error
		if f, err = openRawTTY(tty); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	} else {
		port, err := findControlPort(10 * time.Second)
		if err != nil {
			return err
		}
		if f, err = os.OpenFile(port, os.O_RDWR, 0); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	}
	guestEnv = agentEnv(guestEnv)
	netErr := setupGuestNetwork()
	if netErr != nil {
		fmt.Fprintf(os.Stderr, "agent: %v\n", netErr)
	}
	h := guestHello()
	if netErr != nil {
		h.NetworkError = strings.ReplaceAll(netErr.Error(), "\n", "; ")
	}
	b, _ := json.Marshal(h)
	w := &frameWriter{w: f}
	if err := w.write(frameHello, b); err != nil {
		return fmt.Errorf("agent: hello: %w", err)
	}
	r := bufio.NewReader(f)
	for {
		fr, err := readFrame(r)
		if err != nil {
			// The host went away or the stream broke: nothing more can
			// be asked, so stop the VM.
			fmt.Fprintf(os.Stderr, "agent: control port: %v\n", err)
			powerOff()
		}
		switch fr.typ {
		case frameRun:
			var req runRequest
			x := runExit{Code: -1}
			if err := json.Unmarshal(fr.payload, &req); err != nil || len(req.Argv) == 0 {
				x.Error = fmt.Sprintf("bad run request: %v", err)
			} else {
				x = runCommand(w, req.Argv)
			}
			b, _ := json.Marshal(x)
			if err := w.write(frameExit, b); err != nil {
				powerOff()
			}
		case framePowerOff:
			powerOff()
		}
	}
}

// cmdlineValueFile reads key's value from the kernel command line, as
// init, before anything is mounted: /proc is mounted first unless it is a
// procfs already (a UML guest's root is this host's / as hostfs, whose
// /proc/cmdline is the host's).
func cmdlineValueFile(key string) string {
	var st unix.Statfs_t
	if unix.Statfs("/proc", &st) != nil || st.Type != unix.PROC_SUPER_MAGIC {
		if unix.Mount("proc", "/proc", "proc", 0, "") != nil {
			return ""
		}
	}
	b, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return ""
	}
	return cmdlineValue(string(b), key)
}

// cmdlineValue returns the value of key=value on the kernel command line.
func cmdlineValue(cmdline, key string) string {
	for _, kv := range strings.Fields(cmdline) {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// openRawTTY opens a terminal line and turns off everything the line
// discipline would do to bytes (echo, line editing, CR/NL mapping, flow
// control), as cfmakeraw does.
func openRawTTY(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	t, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON | unix.IXOFF
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(int(f.Fd()), unix.TCSETS, t); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: raw mode: %w", path, err)
	}
	return f, nil
}

// agentEnv is the commands' environment: the agent's own directory first
// on the PATH when wanlab is not /bin/wanlab (a UML guest runs it from
// /run/wanlab/bin), and the agent's GODEBUG and GLIBC_TUNABLES (a UML
// guest's keep Go and glibc off AVX: see umlGODEBUG).
func agentEnv(env []string) []string {
	out := append([]string{}, env...)
	if exe, err := os.Executable(); err == nil && filepath.Dir(exe) != "/bin" {
		for i, kv := range out {
			if p, ok := strings.CutPrefix(kv, "PATH="); ok {
				out[i] = "PATH=" + filepath.Dir(exe) + ":" + p
			}
		}
	}
	for _, k := range []string{"GODEBUG", "GLIBC_TUNABLES"} {
		if v := os.Getenv(k); v != "" {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// findControlPort waits for the virtio-serial port named controlPortName
// and returns its device node.
func findControlPort(within time.Duration) (string, error) {
	deadline := time.Now().Add(within)
	for {
		names, _ := filepath.Glob("/sys/class/virtio-ports/*/name")
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err == nil && strings.TrimSpace(string(b)) == controlPortName {
				dev := "/dev/" + filepath.Base(filepath.Dir(n))
				if _, err := os.Stat(dev); err == nil {
					return dev, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("agent: no virtio-serial port %q after %v", controlPortName, within)
		}
		time.Sleep(20 * time.Millisecond) // devtmpfs has no event to wait on here
	}
}

type frameWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (fw *frameWriter) write(typ byte, b []byte) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return writeFrame(fw.w, typ, b)
}

// streamWriter sends what a command writes as frames of one type.
type streamWriter struct {
	fw  *frameWriter
	typ byte
}

func (s streamWriter) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += maxFrame {
		end := min(off+maxFrame, len(p))
		if err := s.fw.write(s.typ, p[off:end]); err != nil {
			return off, err
		}
	}
	return len(p), nil
}

func runCommand(w *frameWriter, argv []string) runExit {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = guestEnv
	cmd.Dir = "/root"
	cmd.Stdout = streamWriter{w, frameStdout}
	cmd.Stderr = streamWriter{w, frameStderr}
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(interface{ Signal() unix.Signal }); ok && ee.ExitCode() < 0 {
				return runExit{Code: 128 + int(ws.Signal())}
			}
			return runExit{Code: ee.ExitCode()}
		}
		return runExit{Code: -1, Error: err.Error()}
	}
	return runExit{Code: 0}
}

func powerOff() {
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	os.Exit(1)
}

// setupGuestNetwork brings lo and every ethN up and configures the
// addresses ("wanlab.eth0=10.0.0.2/24") and gateway the host put on the
// kernel command line.
func setupGuestNetwork() error {
	cmdline, _ := os.ReadFile("/proc/cmdline")
	var errs []error
	uml := cmdlineValue(string(cmdline), "wanlab.ctl") != ""
	if uml {
		if err := awaitVectorNICs(string(cmdline), 10*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	links, err := netlink.LinkList()
	if err != nil {
		return err
	}
	for _, l := range links {
		// UML's vector NICs are vec0, vec1, ...: named as qemu's
		// virtio NICs are, so that everything else sees eth0.
		if n, ok := strings.CutPrefix(l.Attrs().Name, "vec"); ok {
			if err := netlink.LinkSetName(l, "eth"+n); err != nil {
				errs = append(errs, fmt.Errorf("rename vec%s: %w", n, err))
			} else {
				l.Attrs().Name = "eth" + n
			}
		}
		if n := l.Attrs().Name; n == "lo" || strings.HasPrefix(n, "eth") {
			if err := netlink.LinkSetUp(l); err != nil {
				errs = append(errs, fmt.Errorf("%s up: %w", n, err))
			}
		}
	}
	if uml && len(vectorNICs(string(cmdline))) == 0 {
		// A UML guest without NICs gets an eth0 connected to nothing,
		// as qemu's guests do: a dummy device.
		if _, err := netlink.LinkByName("eth0"); err != nil {
			d := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}}
			if err := netlink.LinkAdd(d); err == nil {
				err = netlink.LinkSetUp(d)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("eth0 (dummy): %w", err))
			}
		}
	}
	for _, kv := range strings.Fields(string(cmdline)) {
		k, val, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "wanlab.eth"):
			link := strings.TrimPrefix(k, "wanlab.")
			p, err := netip.ParsePrefix(val)
			if err == nil {
				err = addAddr(link, p)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s address %s: %w", link, val, err))
			}
		case k == "wanlab.gw":
			gw, err := netip.ParseAddr(val)
			if err == nil {
				err = addDefaultRoute("eth0", gw)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("default route via %s: %w", val, err))
			}
		}
	}
	return errors.Join(errs...)
}

// vectorNICs returns the names (vec0, vec1, ...) of the UML vector NICs
// the kernel command line asks for ("vec0:transport=hybrid,...").
func vectorNICs(cmdline string) []string {
	var out []string
	for _, kv := range strings.Fields(cmdline) {
		if name, _, ok := strings.Cut(kv, ":"); ok && strings.HasPrefix(name, "vec") && !strings.Contains(name, "=") {
			out = append(out, name)
		}
	}
	return out
}

// awaitVectorNICs waits until every vector NIC of the command line is
// registered (as vecN, or already renamed ethN), so that none is missed by
// the renaming and its addresses go to the right device.
func awaitVectorNICs(cmdline string, within time.Duration) error {
	want := vectorNICs(cmdline)
	deadline := time.Now().Add(within)
	for {
		missing := ""
		for _, n := range want {
			_, err := netlink.LinkByName(n)
			if err != nil {
				_, err = netlink.LinkByName("eth" + strings.TrimPrefix(n, "vec"))
			}
			if err != nil {
				missing = n
				break
			}
		}
		if missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("NIC %s not registered after %v", missing, within)
		}
		time.Sleep(10 * time.Millisecond) // no netlink subscription this early in a guest
	}
}

func addAddr(link string, p netip.Prefix) error {
	l, err := netlink.LinkByName(link)
	if err != nil {
		return err
	}
	return netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}})
}

func addDefaultRoute(link string, gw netip.Addr) error {
	l, err := netlink.LinkByName(link)
	if err != nil {
		return err
	}
	return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: gw.AsSlice()})
}

// coreQdiscs are part of the scheduler core (sch_generic.c, sch_fifo.c,
// sch_mq.c), not modules.
var coreQdiscs = []string{"bfifo", "mq", "noqueue", "pfifo", "pfifo_fast", "pfifo_head_drop"}

func guestHello() Hello {
	h := Hello{Release: host.KernelRelease()}
	if b, err := os.ReadFile("/proc/uptime"); err == nil {
		f := strings.Fields(string(b))
		if len(f) > 0 {
			h.Uptime, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	seen := map[string]bool{}
	for _, q := range coreQdiscs {
		seen[q] = true
	}
	builtin, err := os.ReadFile("/lib/modules/" + h.Release + "/modules.builtin")
	if err != nil {
		builtin, err = os.ReadFile(umlModulesRoot + "/" + h.Release + "/modules.builtin")
	}
	if b := builtin; err == nil {
		for _, l := range strings.Fields(string(b)) {
			if n := modName(l); strings.HasPrefix(n, "sch_") {
				seen[strings.TrimPrefix(n, "sch_")] = true
			}
		}
	}
	if b, err := os.ReadFile("/proc/modules"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if n, _, _ := strings.Cut(l, " "); strings.HasPrefix(n, "sch_") {
				seen[strings.TrimPrefix(n, "sch_")] = true
			}
		}
	}
	for q := range seen {
		h.Qdiscs = append(h.Qdiscs, q)
	}
	sort.Strings(h.Qdiscs)
	return h
}
