package device

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/songgao/water"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/tun"

	"github.com/wanlab/wanlab/internal/header"
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
	return OpenQueuesIn(ns, backend, name, mtu, 1)
}

// OpenQueuesIn is OpenIn with queues queues: more than one opens a
// multi-queue TUN (IFF_MULTI_QUEUE) and returns a *Multi of them; one is
// the single-queue device OpenIn returns.
func OpenQueuesIn(ns netns.NsHandle, backend, name string, mtu, queues int) (Device, error) {
	if err := checkBackend(backend); err != nil {
		return nil, err
	}
	if queues < 1 || queues > MaxQueues {
		return nil, fmt.Errorf("tun %s: %d queues: want 1-%d", name, queues, MaxQueues)
	}
	var d Device
	err := nsrun.Do(ns, func() error {
		var err error
		switch {
		case queues > 1:
			d, err = openQueues(backend, name, mtu, queues)
		case backend == Offload:
			d, err = openOffload(name, mtu)
		case backend == Water:
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
// /dev/net/tun or tun driver wraps ErrUnavailable. wireguard-go's
// CreateTUN reports a missing clone device as text only, so that case is
// told by looking at the device, not at the message.
func classify(err error) error {
	switch {
	case errors.Is(err, os.ErrPermission):
		return err
	case errors.Is(err, os.ErrNotExist), errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO), !tunPresent():
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// tunPresent reports whether the TUN clone device exists.
func tunPresent() bool {
	_, err := os.Stat(TUNPath)
	return err == nil
}

// offloadDevice is wireguard-go's TUN with IFF_VNET_HDR. Reads return GSO
// super-packets split into MTU-sized packets (each impaired on its own, as
// netem sees them on the wire); writes coalesce TCP/UDP segments of a
// batch (GRO) so the kernel forwards few large skbs.
type offloadDevice struct {
	tun  tun.Device
	name string
	mtu  int
	poll *pollFD  // Pending
	raw  *rawFile // RawOf

	// Writes of packets that may head a coalesced super-packet go
	// through buffers of 64 KiB capacity: coalescing appends segments to
	// the first packet of a flow in a batch, in place, and pooled packet
	// buffers are only MTU-sized. The flow's other packets are only read
	// from, and go from the caller's buffers as they are.
	wbufs  [][]byte
	wslice [][]byte
	flows  []flowHead // TCP/UDP flows with a head in the batch being written
}

// flowKey names a TCP or UDP flow for write's choice of heads: version,
// protocol, addresses and ports, as wireguard-go's GRO groups packets.
type flowKey [1 + 1 + 16 + 16 + 4]byte

// flowHead is a flow's current head in the batch being written: the room
// its buffer has left for the payloads coalesced into it (-1: none can
// join, after a PSH).
type flowHead struct {
	key  flowKey
	left int
}

// maxHeads bounds the flows one write tracks; packets of flows past it
// are copied, as every packet once was.
const maxHeads = 16

// mayHead reports whether pkt may be the head of a coalesced
// super-packet in this batch, so it needs a buffer with room to grow. It
// follows wireguard-go's GRO: a flow's packets join the first one until its
// buffer is full (cap - 2 × the offset: 65519 bytes here) or after a PSH,
// when the next one heads a new super-packet; packets that are not TCP or
// UDP never coalesce. A packet of a flow past maxHeads, or one whose
// header does not read, is taken as a head: copying is always safe.
func (d *offloadDevice) mayHead(pkt []byte) bool {
	var ip header.IP
	if ip.Parse(pkt) != nil || ip.Proto != header.ProtoTCP && ip.Proto != header.ProtoUDP {
		return false // GRO coalesces TCP and UDP only
	}
	l4 := ip.Transport(pkt)
	hdr := ip.HeaderLen + 8
	if ip.Proto == header.ProtoTCP && len(l4) >= 20 {
		hdr = ip.HeaderLen + int(l4[12]>>4)*4
	}
	if len(l4) < 20 && ip.Proto == header.ProtoTCP || len(l4) < 8 || hdr > len(pkt) {
		return true
	}
	psh := ip.Proto == header.ProtoTCP && l4[13]&0x08 != 0
	var k flowKey
	k[0], k[1] = ip.Version, ip.Proto
	src, dst := ip.Src.As16(), ip.Dst.As16()
	copy(k[2:18], src[:])
	copy(k[18:34], dst[:])
	copy(k[34:38], l4[:4])
	room := headRoom - len(pkt)
	for i := range d.flows {
		f := &d.flows[i]
		if f.key != k {
			continue
		}
		if p := len(pkt) - hdr; f.left >= p {
			f.left -= p
			if psh {
				f.left = -1
			}
			return false
		}
		f.left = room // a new head
		if psh {
			f.left = -1
		}
		return true
	}
	if len(d.flows) == maxHeads {
		return true
	}
	if psh {
		room = -1
	}
	d.flows = append(d.flows, flowHead{key: k, left: room})
	return true
}

// vnetRoom is the headroom given to wireguard-go's Write: the 10-byte
// virtio-net header goes in front of each packet.
const vnetRoom = 16

// maxCoalesced is the largest packet GRO may build.
const maxCoalesced = 65535

// headRoom is what a head's buffer holds for GRO (wireguard-go coalesces
// while cap(buf) - 2 × offset covers the result).
const headRoom = vnetRoom + maxCoalesced - 2*vnetRoom

func openOffload(name string, mtu int) (Device, error) {
	t, err := tun.CreateTUN(name, mtu)
	if err != nil {
		return nil, err
	}
	return newOffload(t, mtu)
}

// newOffload wraps one wireguard-go TUN (one queue).
func newOffload(t tun.Device, mtu int) (Device, error) {
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
	d := &offloadDevice{tun: t, name: real, mtu: mtu, poll: newPollFD(t.File()), raw: newRawFile(t.File())}
	n := t.BatchSize()
	// A write buffer is 64 KiB (a coalesced super-packet): made the first
	// time a slot holds a flow's head, not up front, since a queue per CPU
	// times a batch of 128 would be 8 MiB per queue, most never used.
	d.wbufs = make([][]byte, n)
	d.wslice = make([][]byte, n)
	d.flows = make([]flowHead, 0, maxHeads)
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
		d.flows = d.flows[:0]
		for i, b := range bufs[:k] {
			if offset < vnetRoom || d.mayHead(b[offset:]) {
				if d.wbufs[i] == nil {
					d.wbufs[i] = make([]byte, vnetRoom+maxCoalesced)
				}
				n := copy(d.wbufs[i][vnetRoom:], b[offset:])
				d.wslice[i] = d.wbufs[i][:vnetRoom+n]
			} else {
				// Read only: the virtio-net header goes in the
				// caller's headroom.
				d.wslice[i] = b[offset-vnetRoom:]
			}
		}
		if _, err := d.tun.Write(d.wslice[:k], vnetRoom); err != nil {
			return written, err
		}
		written += k
		bufs = bufs[k:]
	}
	return written, nil
}

// openQueues opens a multi-queue TUN as n queues: each queue is an fd of
// /dev/net/tun attached to the same name with IFF_MULTI_QUEUE, wrapped as
// the backend wraps a single one (wireguard-go's TUN from the fd, with its
// virtio-net offloads, or a plain file for water).
func openQueues(backend, name string, mtu, n int) (Device, error) {
	var qs []Device
	fail := func(err error) (Device, error) {
		for _, q := range qs {
			q.Close()
		}
		return nil, err
	}
	flags := uint16(unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_MULTI_QUEUE)
	if backend == Offload {
		flags |= unix.IFF_VNET_HDR
	}
	for range n {
		f, err := openTUNQueue(name, flags)
		if err != nil {
			return fail(err)
		}
		var q Device
		if backend == Offload {
			t, terr := tun.CreateTUNFromFile(f, mtu)
			if terr != nil {
				f.Close()
				return fail(terr)
			}
			q, err = newOffload(t, mtu)
		} else {
			q, err = newWaterQueue(f, name, mtu, len(qs) == 0)
		}
		if err != nil {
			return fail(err)
		}
		qs = append(qs, q)
	}
	m, err := NewMulti(qs)
	if err != nil {
		return fail(err)
	}
	return m, nil
}

// openTUNQueue attaches one fd to TUN name with flags (TUNSETIFF), as
// wireguard-go's CreateTUN does for one, non-blocking for the runtime's
// poller.
func openTUNQueue(name string, flags uint16) (*os.File, error) {
	fd, err := unix.Open(TUNPath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", TUNPath, err)
	}
	ifr, err := unix.NewIfreq(name)
	if err == nil {
		ifr.SetUint16(flags)
		err = unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
	}
	if err == nil {
		err = unix.SetNonblock(fd, true)
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF %s (multi-queue): %w", name, err)
	}
	return os.NewFile(uintptr(fd), TUNPath), nil
}

// MaxQueues bounds the queues of one TUN (the kernel's MAX_TAP_QUEUES is
// 256; more readers than CPUs only add wake-ups).
const MaxQueues = 64

// setMTU sets a water TUN's MTU and queue length (setTxQueueLen), which
// water itself cannot: the one set-up of a single-queue device and of a
// multi-queue one's first queue.
func setMTU(name string, mtu int) error {
	link, err := netlink.LinkByName(name)
	if err == nil {
		err = netlink.LinkSetMTU(link, mtu)
	}
	if err == nil {
		err = setTxQueueLen(name)
	}
	if err != nil {
		return fmt.Errorf("set mtu %d: %w", mtu, err)
	}
	return nil
}

// newWaterQueue is one queue of a multi-queue TUN for the water backend: a
// plain file, one packet per call. The first queue sets the MTU and queue
// length, as openWater does.
func newWaterQueue(f *os.File, name string, mtu int, first bool) (Device, error) {
	if first {
		if err := setMTU(name, mtu); err != nil {
			f.Close()
			return nil, err
		}
	}
	return &waterDevice{rw: f, name: name, mtu: mtu}, nil
}

// waterDevice is songgao/water: a plain TUN file, one packet per system
// call. Simple and portable, and about 8x slower than offload here.
type waterDevice struct {
	rw   io.ReadWriteCloser // a *water.Interface, or one queue's file
	name string
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
	if err := setMTU(ifce.Name(), mtu); err != nil {
		ifce.Close()
		return nil, err
	}
	return &waterDevice{rw: ifce, name: ifce.Name(), mtu: mtu}, nil
}

func (d *waterDevice) Name() string   { return d.name }
func (d *waterDevice) MTU() int       { return d.mtu }
func (d *waterDevice) BatchSize() int { return 1 }
func (d *waterDevice) Close() error   { return d.rw.Close() }

func (d *waterDevice) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	n, err := d.rw.Read(bufs[0][offset:])
	if err != nil {
		return 0, err
	}
	sizes[0] = n
	return 1, nil
}

func (d *waterDevice) Write(bufs [][]byte, offset int) (int, error) {
	for i, b := range bufs {
		if _, err := d.rw.Write(b[offset:]); err != nil {
			return i, err
		}
	}
	return len(bufs), nil
}
