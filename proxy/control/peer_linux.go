package control

import (
	"encoding/binary"
	"net"
	"unsafe"

	"golang.org/x/sys/unix"
)

// peerPID returns the pid of the process on the other end of a unix socket
// connection (SO_PEERCRED), or 0 when it cannot tell.
func peerPID(c net.Conn) int {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0
	}
	p, ok := peerUcred(uc)
	if !ok {
		return 0
	}
	return int(p.Pid)
}

func peerUcred(uc *net.UnixConn) (*unix.Ucred, bool) {
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, false
	}
	var cred *unix.Ucred
	_ = raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	return cred, err == nil && cred != nil
}

// peerCred reads the credentials the peer had when it connected: uid and
// gid (SO_PEERCRED) and its supplementary groups (SO_PEERGROUPS).
func peerCred(uc *net.UnixConn) (peer, bool) {
	cred, ok := peerUcred(uc)
	if !ok {
		return peer{}, false
	}
	p := peer{unix: true, uid: int(cred.Uid), gid: int(cred.Gid)}
	if raw, err := uc.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) { p.groups = peerGroups(int(fd)) })
	}
	return p, true
}

// peerGroups returns SO_PEERGROUPS: an array of gid_t, whose size the
// kernel reports with ERANGE when the buffer is short.
func peerGroups(fd int) []int {
	buf := make([]byte, 64*4)
	for range 3 {
		n := uint32(len(buf))
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		if errno == unix.ERANGE && int(n) > len(buf) {
			buf = make([]byte, n)
			continue
		}
		if errno != 0 {
			return nil
		}
		gs := make([]int, 0, n/4)
		for i := 0; i+4 <= int(n); i += 4 {
			gs = append(gs, int(binary.NativeEndian.Uint32(buf[i:])))
		}
		return gs
	}
	return nil
}
