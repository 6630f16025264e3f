package device

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/songgao/water"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/tun"

	"github.com/wanlab/wanlab/internal/nsrun"
)

// Open creates the TUN device name (at most 15 bytes) with the given MTU
// in the current network namespace, using backend (Offload or Water). The
// device disappears when it is closed.
func Open(backend, name string, mtu int) (Device, error) {
	return OpenIn(netns.None(), backend, name, mtu)
}

// OpenIn is Open inside network namespace ns (netns.None(): the current
// one). The device is created there and stays there; the returned Device
// reads and writes from any goroutine.
func OpenIn(ns netns.NsHandle, backend, name string, mtu int) (Device, error) {
	if err := checkBackend(backend); err != nil {
		return nil, err
	}
	var d Device
	err := nsrun.Do(ns, func() error {
		var err error
		switch backend {
		case Offload:
			d, err = openOffload(name, mtu)
		case Water:
			d, err = openWater(name, mtu)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("tun %s (%s backend): %w", name, backend, classify(err))
	}
	return d, nil
}

// txQueueLen replaces the TUN default of 500 packets: the kernel drops
// what it routes into a full TUN queue, so the queue must absorb the
// moments the proxy's reader is not scheduled without such drops posing
// as impairment. 1000 is what Ethernet devices get.
const txQueueLen = 1000

func setTxQueueLen(name string) error {
	link, err := netlink.LinkByName(name)
	if err == nil {
		err = netlink.LinkSetTxQLen(link, txQueueLen)
	}
	if err != nil {
		return fmt.Errorf("set txqueuelen: %w", err)
	}
	return nil
}

// classify makes creation errors testable with errors.Is: permission
// problems wrap os.ErrPermission (through the errno), a missing
// /dev/net/tun or tun driver wraps ErrUnavailable.
func classify(err error) error {
	switch {
	case errors.Is(err, os.ErrPermission):
		return err
	case errors.Is(err, os.ErrNotExist), errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO),
		strings.Contains(err.Error(), "does not exist"):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// offloadDevice is wireguard-go's TUN with IFF_VNET_HDR. Reads return GSO
// super-packets split into MTU-sized packets (each impaired on its own, as
// netem sees them on the wire); writes coalesce TCP/UDP segments of a
// batch (GRO) so the kernel forwards few large skbs.
type offloadDevice struct {
	tun  tun.Device
	name string
	mtu  int

	// Writes go through buffers of 64 KiB capacity: coalescing appends
	// segments to the first packet of a flow in place, and pooled packet
	// buffers are only MTU-sized.
	wbufs  [][]byte
	wslice [][]byte
}

// vnetRoom is the headroom given to wireguard-go's Write: the 10-byte
// virtio-net header goes in front of each packet.
const vnetRoom = 16

// maxCoalesced is the largest packet GRO may build.
const maxCoalesced = 65535

func openOffload(name string, mtu int) (Device, error) {
	t, err := tun.CreateTUN(name, mtu)
	if err != nil {
		return nil, err
	}
	// wireguard-go reports link events on a small buffered channel; keep
	// it drained so its listener never blocks (it closes the channel on
	// Close, ending this goroutine).
	go func() {
		for range t.Events() {
		}
	}()
	real, err := t.Name()
	if err != nil {
		t.Close()
		return nil, err
	}
	if err := setTxQueueLen(real); err != nil {
		t.Close()
		return nil, err
	}
	d := &offloadDevice{tun: t, name: real, mtu: mtu}
	n := t.BatchSize()
	d.wbufs = make([][]byte, n)
	for i := range d.wbufs {
		d.wbufs[i] = make([]byte, vnetRoom+maxCoalesced)
	}
	d.wslice = make([][]byte, n)
	return d, nil
}

func (d *offloadDevice) Name() string   { return d.name }
func (d *offloadDevice) MTU() int       { return d.mtu }
func (d *offloadDevice) BatchSize() int { return d.tun.BatchSize() }
func (d *offloadDevice) Close() error   { return d.tun.Close() }

func (d *offloadDevice) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	return d.tun.Read(bufs, sizes, offset)
}

func (d *offloadDevice) Write(bufs [][]byte, offset int) (int, error) {
	written := 0
	for len(bufs) > 0 {
		k := min(len(bufs), len(d.wbufs))
		for i, b := range bufs[:k] {
			n := copy(d.wbufs[i][vnetRoom:], b[offset:])
			d.wslice[i] = d.wbufs[i][:vnetRoom+n]
		}
		if _, err := d.tun.Write(d.wslice[:k], vnetRoom); err != nil {
			return written, err
		}
		written += k
		bufs = bufs[k:]
	}
	return written, nil
}

// waterDevice is songgao/water: a plain TUN file, one packet per system
// call. Simple and portable, and about 8x slower than offload here.
type waterDevice struct {
	ifce *water.Interface
	mtu  int
}

func openWater(name string, mtu int) (Device, error) {
	ifce, err := water.New(water.Config{
		DeviceType:             water.TUN,
		PlatformSpecificParams: water.PlatformSpecificParams{Name: name},
	})
	if err != nil {
		return nil, err
	}
	// water cannot set the MTU; netlink can (this runs in the device's
	// namespace, see OpenIn).
	link, err := netlink.LinkByName(ifce.Name())
	if err == nil {
		err = netlink.LinkSetMTU(link, mtu)
	}
	if err == nil {
		err = setTxQueueLen(ifce.Name())
	}
	if err != nil {
		ifce.Close()
		return nil, fmt.Errorf("set mtu %d: %w", mtu, err)
	}
	return &waterDevice{ifce: ifce, mtu: mtu}, nil
}

func (d *waterDevice) Name() string   { return d.ifce.Name() }
func (d *waterDevice) MTU() int       { return d.mtu }
func (d *waterDevice) BatchSize() int { return 1 }
func (d *waterDevice) Close() error   { return d.ifce.Close() }

func (d *waterDevice) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	n, err := d.ifce.Read(bufs[0][offset:])
	if err != nil {
		return 0, err
	}
	sizes[0] = n
	return 1, nil
}

func (d *waterDevice) Write(bufs [][]byte, offset int) (int, error) {
	for i, b := range bufs {
		if _, err := d.ifce.Write(b[offset:]); err != nil {
			return i, err
		}
	}
	return len(bufs), nil
}
