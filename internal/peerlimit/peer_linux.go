package peerlimit

import (
	"encoding/binary"
	"net"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// PeerOf asks the kernel who is at the other end of c: a unix socket's
// SO_PEERCRED (and SO_PEERGROUPS), or, for TCP from a loopback address, the
// uid that owns the client's socket (sock_diag, which answers for any
// uid). What it cannot learn stays unset.
func PeerOf(c net.Conn) Peer {
	switch cc := c.(type) {
	case *net.UnixConn:
		return unixPeer(cc)
	case *net.TCPConn:
		r, ok := cc.RemoteAddr().(*net.TCPAddr)
		if !ok {
			return Peer{}
		}
		p := Peer{Host: r.IP.String()}
		if !r.IP.IsLoopback() {
			return p
		}
		if uid, ok := TCPOwner(r, cc.LocalAddr().(*net.TCPAddr)); ok {
			p.HasUID, p.UID = true, uid
		}
		return p
	}
	return Peer{}
}

// TCPOwner returns the uid owning the TCP socket bound to local and
// connected to remote, in this network namespace.
func TCPOwner(local, remote *net.TCPAddr) (int, bool) {
	s, err := netlink.SocketGet(local, remote)
	if err != nil || s == nil {
		return 0, false
	}
	// The request matched by ports; make sure this is the socket asked for.
	if s.ID.SourcePort != uint16(local.Port) || s.ID.DestinationPort != uint16(remote.Port) ||
		!s.ID.Source.Equal(local.IP) || !s.ID.Destination.Equal(remote.IP) {
		return 0, false
	}
	return int(s.UID), true
}

func unixPeer(uc *net.UnixConn) Peer {
	raw, err := uc.SyscallConn()
	if err != nil {
		return Peer{}
	}
	var cred *unix.Ucred
	var groups []int
	cerr := raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err == nil {
			groups = peerGroups(int(fd))
		}
	})
	if cerr != nil || err != nil || cred == nil {
		return Peer{}
	}
	return Peer{HasUID: true, UID: int(cred.Uid), GID: int(cred.Gid), Groups: groups, Unix: true}
}

// UnixPeerPID returns the pid of the process at the other end of a unix
// socket connection (SO_PEERCRED), or 0.
func UnixPeerPID(uc *net.UnixConn) int {
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0
	}
	var cred *unix.Ucred
	_ = raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err != nil || cred == nil {
		return 0
	}
	return int(cred.Pid)
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
