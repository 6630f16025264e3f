package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/internal/nsrun"
)

// retireTimeout is how long the kernel keeps a partly filled ring block
// before handing it over (tpacket_req3.tp_retire_blk_tov, ms): the
// capture's latency, and how long Stop waits for the last packets.
const retireTimeout = 8 // ms

// Capture is a running capture. Stop ends it.
type Capture struct {
	ifname string
	fd     int
	stopFd int // eventfd that wakes the reader for Stop
	ring   []byte
	nblk   int
	sink   *sink
	closer io.Closer // the file StartFile opened, or nil

	done     chan struct{}
	mu       sync.Mutex // guards stopFd against Stop racing release
	stopOnce sync.Once
	stopping atomic.Bool
	err      error
}

// htons converts a 16-bit value to network byte order.
func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Start captures the frames of interface ifname in namespace ns into w as
// pcapng until Stop (or a bound). Both directions are recorded. Packets
// are in the ring from the moment Start returns.
func Start(ns netns.NsHandle, ifname string, w io.Writer, cfg Config) (*Capture, error) {
	return start(ns, ifname, w, nil, cfg)
}

// start is Start; closer, if not nil, is closed when the capture ends.
func start(ns netns.NsHandle, ifname string, w io.Writer, closer io.Closer, cfg Config) (*Capture, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Capture{ifname: ifname, fd: -1, stopFd: -1, done: make(chan struct{}), closer: closer}
	if err := nsrun.Do(ns, func() error { return c.open(cfg) }); err != nil {
		c.release()
		return nil, fmt.Errorf("capture %s: %w", ifname, err)
	}
	if c.sink, err = newSink(w, ifname, cfg); err != nil {
		c.release()
		return nil, err
	}
	go c.run()
	return c, nil
}

// StartFile is Start writing to a new file at path, mode 0600 (a capture
// holds payloads), never through a link (hostfile.CreateOutput).
func StartFile(ns netns.NsHandle, ifname, path string, cfg Config) (*Capture, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("capture %s: %w", ifname, err)
	}
	f, err := hostfile.CreateOutput(path, 0o600, cfg.Replace)
	if err != nil {
		return nil, fmt.Errorf("capture %s: %w", ifname, err)
	}
	c, err := start(ns, ifname, f, f, cfg)
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return c, nil
}

// open creates the socket and its ring inside the namespace. The socket is
// created with protocol 0, which receives nothing, and only bound to
// ETH_P_ALL on ifname once the ring exists, so no frame of another
// interface ever reaches it.
func (c *Capture) open(cfg Config) error {
	iface, err := net.InterfaceByName(c.ifname)
	if err != nil {
		return err
	}
	c.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("AF_PACKET socket: %w", err)
	}
	if err := unix.SetsockoptInt(c.fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
		return fmt.Errorf("PACKET_VERSION 3: %w", err)
	}
	// The snaplen is applied by the kernel with a one-instruction classic
	// BPF program that only says how many bytes to keep (tcpdump does the
	// same): without it the kernel would copy whole 64 KB GSO segments into
	// the ring. Which packets to keep is decided in userspace (IsTCP).
	prog := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: uint32(cfg.Snaplen)}}
	if err := unix.SetsockoptSockFprog(c.fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
		&unix.SockFprog{Len: 1, Filter: &prog[0]}); err != nil {
		return fmt.Errorf("snaplen filter: %w", err)
	}
	c.nblk = int(cfg.RingSize / blockSize)
	req := unix.TpacketReq3{
		Block_size:     blockSize,
		Block_nr:       uint32(c.nblk),
		Frame_size:     1 << 11,
		Frame_nr:       uint32(c.nblk) * (blockSize >> 11),
		Retire_blk_tov: retireTimeout,
	}
	if err := unix.SetsockoptTpacketReq3(c.fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return fmt.Errorf("PACKET_RX_RING of %d blocks: %w", c.nblk, err)
	}
	c.ring, err = unix.Mmap(c.fd, 0, c.nblk*blockSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap ring: %w", err)
	}
	if err := unix.Bind(c.fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: iface.Index}); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	c.stopFd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	return nil
}

func (c *Capture) release() {
	if c.ring != nil {
		_ = unix.Munmap(c.ring)
		c.ring = nil
	}
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
	c.mu.Lock()
	if c.stopFd >= 0 {
		unix.Close(c.stopFd)
		c.stopFd = -1
	}
	c.mu.Unlock()
}

// Offsets into struct tpacket_block_desc (its tpacket_hdr_v1 starts at 8)
// and struct tpacket3_hdr, followed by struct sockaddr_ll at
// TPACKET_ALIGN(sizeof(struct tpacket3_hdr)).
const (
	blkStatusOff  = 8
	blkNumPktsOff = 12
	blkFirstOff   = 16
	sllPkttypeOff = 48 + 10
)

func (c *Capture) blockStatus(i int) *uint32 {
	return (*uint32)(unsafe.Pointer(&c.ring[i*blockSize+blkStatusOff]))
}

// run is the reader: it hands every block the kernel has filled to the
// sink, then returns the block, in ring order.
func (c *Capture) run() {
	defer close(c.done)
	err := c.loop()
	if st, serr := unix.GetsockoptTpacketStatsV3(c.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS); serr == nil {
		// The kernel counts drops inside tp_packets.
		c.sink.stats.KernelPackets = uint64(st.Packets)
		c.sink.stats.KernelDrops = uint64(st.Drops)
	} else if err == nil {
		err = fmt.Errorf("PACKET_STATISTICS: %w", serr)
	}
	c.release()
	if cerr := c.sink.close(); err == nil && cerr != nil {
		err = fmt.Errorf("write: %w", cerr)
	}
	if c.closer != nil {
		if cerr := c.closer.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}
	if err != nil {
		c.err = fmt.Errorf("capture %s: %w", c.ifname, err)
	}
}

func (c *Capture) loop() error {
	pfd := []unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLIN | unix.POLLERR}, {Fd: int32(c.stopFd), Events: unix.POLLIN}}
	var drainUntil time.Time
	blk := 0
	for {
		status := c.blockStatus(blk)
		if atomic.LoadUint32(status)&unix.TP_STATUS_USER != 0 {
			more, err := c.readBlock(blk)
			atomic.StoreUint32(status, unix.TP_STATUS_KERNEL)
			if err != nil || !more {
				return err
			}
			blk = (blk + 1) % c.nblk
			continue
		}
		timeout := -1
		if c.stopping.Load() {
			// After Stop, wait until the kernel has retired the block that
			// was being filled, then end.
			if drainUntil.IsZero() {
				drainUntil = time.Now().Add(3 * retireTimeout * time.Millisecond)
			}
			left := time.Until(drainUntil)
			if left <= 0 {
				return nil
			}
			timeout = int(left/time.Millisecond) + 1
			pfd = pfd[:1]
		}
		if _, err := unix.Poll(pfd, timeout); err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("poll: %w", err)
		}
		if pfd[0].Revents&unix.POLLERR != 0 {
			return fmt.Errorf("socket error on %s (interface gone?)", c.ifname)
		}
	}
}

// readBlock passes the packets of ring block i to the sink. It reports
// false when the sink reached a bound.
func (c *Capture) readBlock(i int) (bool, error) {
	b := c.ring[i*blockSize : (i+1)*blockSize]
	n := int(*(*uint32)(unsafe.Pointer(&b[blkNumPktsOff])))
	off := int(*(*uint32)(unsafe.Pointer(&b[blkFirstOff])))
	for range n {
		if off <= 0 || off+unix.SizeofTpacket3Hdr > len(b) {
			return false, fmt.Errorf("ring block %d: packet offset %d out of range", i, off)
		}
		h := (*unix.Tpacket3Hdr)(unsafe.Pointer(&b[off]))
		start, end := off+int(h.Mac), off+int(h.Mac)+int(h.Snaplen)
		if end > len(b) || start < off {
			return false, fmt.Errorf("ring block %d: frame [%d, %d) out of range", i, start, end)
		}
		ts := time.Unix(int64(h.Sec), int64(h.Nsec))
		outgoing := b[off+sllPkttypeOff] == unix.PACKET_OUTGOING
		more, err := c.sink.add(ts, b[start:end], int(h.Len), outgoing)
		if err != nil || !more {
			return false, err
		}
		off += int(h.Next_offset)
	}
	return true, nil
}

// Done is closed when the capture has ended, by Stop or at a bound.
func (c *Capture) Done() <-chan struct{} { return c.done }

// Stop ends the capture after the packets already in the ring, flushes the
// output (and closes the file StartFile opened) and returns the counts.
func (c *Capture) Stop() (Stats, error) {
	c.stopOnce.Do(func() {
		c.stopping.Store(true)
		var one [8]byte
		binary.NativeEndian.PutUint64(one[:], 1) // eventfd counter increment
		c.mu.Lock()
		if c.stopFd >= 0 {
			_, _ = unix.Write(c.stopFd, one[:])
		}
		c.mu.Unlock()
	})
	<-c.done
	return c.sink.stats, c.err
}
