package device

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// rawFile is Raw over a TUN file with IFF_VNET_HDR. ReadRaw and WriteRaw
// are each called by one goroutine at a time (a queue's reader; the
// direction's writers hold its write lock): the frame and the result of
// the call in progress live in the rawFile, and the poller's callbacks
// are bound once, so that a frame costs no allocation.
type rawFile struct {
	f  *os.File
	rc syscall.RawConn
	// stop is set by Interrupt: a read woken by the deadline, or by a
	// frame that came at the same moment, reads nothing.
	stop atomic.Bool

	rframe, wframe []byte
	rn             int
	rerr, werr     error
	readFn         func(fd uintptr) bool
	writeFn        func(fd uintptr) bool
}

func newRawFile(f *os.File) *rawFile {
	if f == nil {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	r := &rawFile{f: f, rc: rc}
	r.readFn = r.read
	r.writeFn = r.write
	return r
}

func (r *rawFile) read(fd uintptr) bool {
	if r.stop.Load() {
		r.rn, r.rerr = 0, os.ErrDeadlineExceeded
		return true
	}
	r.rn, r.rerr = unix.Read(int(fd), r.rframe)
	return r.rerr != unix.EAGAIN
}

func (r *rawFile) write(fd uintptr) bool {
	_, r.werr = unix.Write(int(fd), r.wframe)
	return r.werr != unix.EAGAIN
}

func (r *rawFile) ReadRaw(frame []byte) (n int, err error) {
	r.rframe = frame
	err = r.rc.Read(r.readFn)
	r.rframe = nil
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, err
		}
		// The poller refuses a file being closed.
		return 0, errors.Join(os.ErrClosed, err)
	}
	return r.rn, r.rerr
}

func (r *rawFile) WriteRaw(frame []byte) error {
	r.wframe = frame
	err := r.rc.Write(r.writeFn)
	r.wframe = nil
	if err != nil {
		return errors.Join(os.ErrClosed, err)
	}
	return r.werr
}

// Interrupt stops reads first, then wakes one that waits (the poller
// wakes it on the deadline and the read then takes nothing).
func (r *rawFile) Interrupt() {
	r.stop.Store(true)
	_ = r.f.SetReadDeadline(time.Unix(1, 0))
}

func (r *rawFile) Resume() {
	_ = r.f.SetReadDeadline(time.Time{})
	r.stop.Store(false)
}

// RawOf returns d's Raw (nil when d cannot pass frames whole: the water
// backend, a fake).
func RawOf(d Device) Raw {
	if o, ok := d.(*offloadDevice); ok && o.raw != nil {
		return o.raw
	}
	return nil
}
