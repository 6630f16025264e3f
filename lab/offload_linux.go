package lab

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/nsrun"
)

// Offload is a segmentation or receive offload of a network device, as
// `ethtool -K` names them.
type Offload uint32

// The ethtool "set" commands of the legacy SIOCETHTOOL interface
// (include/uapi/linux/ethtool.h), which every kernel since 2.6.30 keeps.
const (
	OffloadTSO Offload = 0x1f // ETHTOOL_STSO
	OffloadGSO Offload = 0x24 // ETHTOOL_SGSO
	OffloadGRO Offload = 0x2c // ETHTOOL_SGRO
)

func (o Offload) String() string {
	switch o {
	case OffloadTSO:
		return "tso"
	case OffloadGSO:
		return "gso"
	case OffloadGRO:
		return "gro"
	}
	return fmt.Sprintf("offload(%#x)", uint32(o))
}

// Offloaded reports whether an offload of the interface is on, like the
// corresponding line of `ethtool -k`.
func Offloaded(ns netns.NsHandle, ifname string, o Offload) (bool, error) {
	var on bool
	err := nsrun.Do(ns, func() error {
		// Each ETHTOOL_Gxxx command is its ETHTOOL_Sxxx counterpart minus one.
		v, err := ethtool(ifname, uint32(o)-1, 0)
		on = v != 0
		return err
	})
	if err != nil {
		return false, fmt.Errorf("ethtool -k %s (%s): %w", ifname, o, err)
	}
	return on, nil
}

// ethtoolValue is struct ethtool_value.
type ethtoolValue struct {
	cmd  uint32
	data uint32
}

// ifreqData is struct ifreq with ifr_data: the name, then a pointer in the
// 24-byte union.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data uintptr
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// SetOffload turns one offload of the interface ifname in namespace ns on or
// off, like `ip netns exec NS ethtool -K IFNAME tso off`.
func SetOffload(ns netns.NsHandle, ifname string, o Offload, on bool) error {
	var data uint32
	state := "off"
	if on {
		data, state = 1, "on"
	}
	return nsrun.Do(ns, func() error {
		if _, err := ethtool(ifname, uint32(o), data); err != nil {
			return fmt.Errorf("ethtool -K %s %s %s: %w", ifname, o, state, err)
		}
		return nil
	})
}

// ethtool runs one SIOCETHTOOL command with a struct ethtool_value in the
// calling thread's namespace and returns the value the kernel left in it.
func ethtool(ifname string, cmd, data uint32) (uint32, error) {
	if len(ifname) >= unix.IFNAMSIZ {
		return 0, fmt.Errorf("interface name %q longer than %d bytes", ifname, unix.IFNAMSIZ-1)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	// The value lives on the heap (new) so its address, passed to the
	// kernel through a uintptr, cannot move while the ioctl runs.
	val := new(ethtoolValue)
	val.cmd, val.data = cmd, data
	var req ifreqData
	copy(req.name[:], ifname)
	req.data = uintptr(unsafe.Pointer(val))
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&req)))
	runtime.KeepAlive(val)
	if errno != 0 {
		return 0, errno
	}
	return val.data, nil
}
