package device

import (
	"fmt"
	"os"
	"sync"
)

// Fake is an in-memory Device for tests: what a test Injects comes out of
// Read as if the kernel had routed it into the TUN, and what the proxy
// Writes is delivered to the channel returned by Written.
type Fake struct {
	name  string
	mtu   int
	batch int

	in      chan []byte
	out     chan []byte
	closed  chan struct{}
	closeMu sync.Once
}

// NewFake returns a fake device with the given name, MTU and batch size.
// Its queues hold up to depth packets each; Inject and Write block when
// they are full.
func NewFake(name string, mtu, batch, depth int) *Fake {
	return &Fake{name: name, mtu: mtu, batch: max(batch, 1),
		in: make(chan []byte, depth), out: make(chan []byte, depth), closed: make(chan struct{})}
}

// Inject queues a copy of pkt for Read. It reports false after Close.
func (f *Fake) Inject(pkt []byte) bool {
	c := append([]byte(nil), pkt...)
	select {
	case f.in <- c:
		return true
	case <-f.closed:
		return false
	}
}

// Written delivers copies of the packets written to the device, in order.
func (f *Fake) Written() <-chan []byte { return f.out }

func (f *Fake) Name() string   { return f.name }
func (f *Fake) MTU() int       { return f.mtu }
func (f *Fake) BatchSize() int { return f.batch }

// Read returns up to BatchSize queued packets, blocking for the first.
// After Close it fails, even with packets still queued.
func (f *Fake) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	n := 0
	select {
	case <-f.closed:
		return 0, fmt.Errorf("fake %s: %w", f.name, os.ErrClosed)
	default:
	}
	select {
	case p := <-f.in:
		if err := f.put(bufs[0], sizes, 0, offset, p); err != nil {
			return 0, err
		}
		n = 1
	case <-f.closed:
		return 0, fmt.Errorf("fake %s: %w", f.name, os.ErrClosed)
	}
	for n < len(bufs) && n < f.batch {
		select {
		case p := <-f.in:
			if err := f.put(bufs[n], sizes, n, offset, p); err != nil {
				return n, err
			}
			n++
		default:
			return n, nil
		}
	}
	return n, nil
}

func (f *Fake) put(buf []byte, sizes []int, i, offset int, p []byte) error {
	if len(p) > len(buf)-offset {
		return fmt.Errorf("fake %s: packet of %d bytes overflows buffer of %d", f.name, len(p), len(buf)-offset)
	}
	sizes[i] = copy(buf[offset:], p)
	return nil
}

// Write delivers copies of the packets to Written.
func (f *Fake) Write(bufs [][]byte, offset int) (int, error) {
	for i, b := range bufs {
		c := append([]byte(nil), b[offset:]...)
		select {
		case f.out <- c:
		case <-f.closed:
			return i, fmt.Errorf("fake %s: %w", f.name, os.ErrClosed)
		}
	}
	return len(bufs), nil
}

// Close unblocks pending Reads and Writes.
func (f *Fake) Close() error {
	f.closeMu.Do(func() { close(f.closed) })
	return nil
}
