// Package vm boots a small reference Linux in qemu, from Debian packages
// alone, to run what this host's kernel cannot (sch_netem above all): the
// kernel of linux-image-6.1.0-*-cloud-amd64, an initramfs of busybox,
// iproute2's ip and tc and the qdisc modules, and wanlab's own static
// binary as the agent that runs commands sent over a virtio-serial port.
//
// Prepare fetches and unpacks the kernel package into a cache and builds the
// initramfs; Boot starts a VM (KVM when a probe boot works, emulation
// otherwise), optionally with a virtio-net NIC on a TAP in a namespace the
// caller owns; VM.Run runs a command inside and returns its output and exit
// code. Each VM records itself in a state directory before qemu starts, so
// Cleanup can stop the qemu of a crashed owner and remove what it left.
package vm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/wanlab/wanlab/internal/host"
)

// DefaultCacheDir holds the unpacked kernel package and the initramfs.
const DefaultCacheDir = host.CacheDir + "/vm"

// DefaultStateDir holds one directory per live VM: its state file, control
// socket, console log and boot initramfs.
const DefaultStateDir = host.RunDir + "/vm"

// KernelPackagePattern is the Debian package family Prepare picks the
// newest of.
const KernelPackagePattern = `^linux-image-6\.1\.0-[0-9]+-cloud-amd64$`

// ErrNotPrepared means the cache holds no kernel or initramfs yet.
var ErrNotPrepared = errors.New("VM not prepared: run `wanlab vm prepare`")

// ErrNotSupported is returned on systems other than Linux.
var ErrNotSupported = errors.New("VMs are not supported on this system")

// Engine is what runs the guest: qemu with KVM, User-Mode Linux (the
// guest kernel as a process of this host, for hosts without KVM), or
// qemu's emulation.
type Engine string

const (
	EngineAuto Engine = ""    // KVM when its probe boots, else UML when it can run, else TCG
	EngineKVM  Engine = "kvm" // qemu with hardware virtualization
	EngineUML  Engine = "uml" // Debian's user-mode-linux (Linux 6.1 as a process, ptrace)
	EngineTCG  Engine = "tcg" // qemu's emulation, multi-threaded, -cpu max
)

// ParseEngine reads an --engine value: auto, kvm, uml or tcg.
func ParseEngine(s string) (Engine, error) {
	switch s {
	case "auto", "":
		return EngineAuto, nil
	case "kvm", "uml", "tcg":
		return Engine(s), nil
	}
	return "", fmt.Errorf("engine %q: want auto, kvm, uml or tcg", s)
}

// Accel is the former name of Engine.
type Accel = Engine

const (
	AccelAuto = EngineAuto
	AccelKVM  = EngineKVM
	AccelTCG  = EngineTCG
)

// Prepared describes a prepared cache (prepared.json in it).
type Prepared struct {
	Package   string    `json:"package"` // "linux-image-6.1.0-57-cloud-amd64"
	Version   string    `json:"version"` // the .deb's version
	Release   string    `json:"release"` // uname -r inside
	Kernel    string    `json:"kernel"`  // path of vmlinuz
	Initramfs string    `json:"initramfs"`
	Modules   []string  `json:"modules"` // loaded at boot, in order
	Created   time.Time `json:"created"`
}

// probeRecord is the cached result of the KVM probe boot, valid for one
// host kernel.
type probeRecord struct {
	HostRelease string `json:"host_release"`
	Accel       Engine `json:"accel"`
	Reason      string `json:"reason,omitempty"`
}

// LoadPrepared reads the cache's description, or returns ErrNotPrepared.
func LoadPrepared(cacheDir string) (*Prepared, error) {
	if cacheDir == "" {
		cacheDir = DefaultCacheDir
	}
	b, err := os.ReadFile(filepath.Join(cacheDir, "prepared.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", cacheDir, ErrNotPrepared)
	}
	if err != nil {
		return nil, fmt.Errorf("vm cache: %w", err)
	}
	var p Prepared
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("vm cache %s: %w", cacheDir, err)
	}
	for _, f := range []string{p.Kernel, p.Initramfs} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("%s: %w", f, ErrNotPrepared)
		}
	}
	return &p, nil
}

// Config chooses how a VM is built. The zero value boots the prepared
// kernel with 256 MB and a NIC that is connected to nothing.
type Config struct {
	// CacheDir is where Prepare put the kernel; empty means DefaultCacheDir.
	CacheDir string
	// Binary is the wanlab executable run as the agent inside; empty
	// means this process's own executable. Build it static
	// (CGO_ENABLED=0); a dynamically linked one is given its shared
	// libraries from this host.
	Binary string
	// MemoryMB is the guest's RAM; 0 means 256.
	MemoryMB int
	// Engine chooses KVM, UML or emulation; EngineAuto probes
	// (ChooseEngine).
	Engine Engine
	// CPU is the CPU model qemu emulates under TCG; empty means "max"
	// (every feature). A plain "qemu64" guest runs its copies and
	// checksums without AVX, which qemu emulates slowly: about twice the
	// network throughput between two emulated guests. KVM always runs
	// the host's CPU.
	CPU string
	// Netns is the named namespace, which the caller owns and configures,
	// where the TAP device of each NIC is created; the TAPs live as long
	// as the VM.
	Netns string
	// NICs are the guest's eth0, eth1, ... in order. None: one eth0
	// connected to nothing.
	NICs []NIC
	// Gateway, when valid, is the guest's default route (via eth0).
	Gateway netip.Addr
	// BootTimeout bounds the boot up to the agent's hello; 0 means 90 s
	// (emulation on a loaded machine is slow).
	BootTimeout time.Duration
	// StateDir is where the VM records itself; empty means
	// DefaultStateDir, the one directory Cleanup reads.
	StateDir string
	// ShmDir is the tmpfs a UML guest's memory file goes to (a
	// directory of the VM's own is made in it); empty means /dev/shm.
	ShmDir string
}

// NIC is a NIC of the guest (virtio-net under qemu, UML's vector driver
// under UML) on a TAP device named Tap in Config.Netns, with Addr (when valid) configured on the guest's side.
type NIC struct {
	Tap  string
	Addr netip.Prefix
}

// Result is what a command run inside the VM did.
type Result struct {
	Stdout, Stderr []byte
	ExitCode       int
}

func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
