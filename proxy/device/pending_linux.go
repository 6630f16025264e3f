package device

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// pollFD answers Pending for a TUN file: a poll of its descriptor that
// does not wait.
type pollFD struct {
	pfd [1]unix.PollFd
}

// newPollFD returns the poller of f's descriptor, taken without changing
// its mode (os.File.Fd would make it blocking, away from the runtime's
// poller); nil if f has no descriptor.
func newPollFD(f any) *pollFD {
	sc, ok := f.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	fd := -1
	if rc.Control(func(u uintptr) { fd = int(u) }) != nil || fd < 0 {
		return nil
	}
	return &pollFD{pfd: [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}}
}

// pending says whether the descriptor is readable now (or in error, which
// the Read that follows reports).
func (p *pollFD) pending() bool {
	if p == nil {
		return false
	}
	p.pfd[0].Revents = 0
	n, _ := unix.Poll(p.pfd[:], 0)
	return n > 0
}

// Pender is a device that can tell whether a Read would return at once.
type Pender interface {
	Pending() bool
}

// Pending says whether a Read of d (one queue) would return packets at
// once; false when d cannot tell.
func Pending(d Device) bool {
	p, ok := d.(Pender)
	return ok && p.Pending()
}

func (d *offloadDevice) Pending() bool { return d.poll.pending() }
