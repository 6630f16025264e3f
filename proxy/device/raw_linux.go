package device

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// rawFile is Raw over a TUN file with IFF_VNET_HDR.
type rawFile struct {
	f  *os.File
	rc syscall.RawConn
	// stop is set by Interrupt: a read woken by the deadline, or by a
	// frame that came at the same moment, reads nothing.
	stop atomic.Bool
}

func newRawFile(f *os.File) *rawFile {
	if f == nil {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	return &rawFile{f: f, rc: rc}
}

func (r *rawFile) ReadRaw(frame []byte) (n int, err error) {
	var rerr error
	err = r.rc.Read(func(fd uintptr) bool {
		if r.stop.Load() {
			rerr = os.ErrDeadlineExceeded
			return true
		}
		n, rerr = unix.Read(int(fd), frame)
		return rerr != unix.EAGAIN
	})
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, err
		}
		// The poller refuses a file being closed.
		return 0, errors.Join(os.ErrClosed, err)
	}
	return n, rerr
}

func (r *rawFile) WriteRaw(frame []byte) error {
	var werr error
	err := r.rc.Write(func(fd uintptr) bool {
		_, werr = unix.Write(int(fd), frame)
		return werr != unix.EAGAIN
	})
	if err != nil {
		return errors.Join(os.ErrClosed, err)
	}
	return werr
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
