package control

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/peerlimit"
)

// verifyServer checks, before anything is sent on c, that the process at
// its other end is the proxy: on a unix socket the server's SO_PEERCRED; on
// loopback TCP the owner of the server's end of this very connection
// (sock_diag answers for any uid), and that the listener on that address is
// a socket the proxy's pid holds. With no endpoint known (an address given
// with --token-file only), the owner must be root or this user.
func verifyServer(c net.Conn, ep *Endpoint) error {
	self := os.Geteuid()
	switch cc := c.(type) {
	case *net.UnixConn:
		raw, err := cc.SyscallConn()
		if err != nil {
			return err
		}
		var cred *unix.Ucred
		if cerr := raw.Control(func(fd uintptr) {
			cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		}); cerr != nil {
			return cerr
		}
		if err != nil || cred == nil {
			return fmt.Errorf("cannot read the server's credentials: %v", err)
		}
		uid, pid := int(cred.Uid), int(cred.Pid)
		if ep != nil {
			if uid != ep.UID || pid != ep.PID {
				return ownerError(cc.RemoteAddr().String(), uid, pid, ep)
			}
			return nil
		}
		if uid != 0 && uid != self && !ownsSocketFile(cc, uid) {
			return ownerError(cc.RemoteAddr().String(), uid, pid, nil)
		}
		return nil
	case *net.TCPConn:
		remote, _ := cc.RemoteAddr().(*net.TCPAddr)
		local, _ := cc.LocalAddr().(*net.TCPAddr)
		if remote == nil || local == nil {
			return fmt.Errorf("not a TCP connection")
		}
		uid, ok := peerlimit.TCPOwner(remote, local)
		if !ok {
			return fmt.Errorf("the kernel does not say who owns the socket at %s (sock_diag): nothing sent", remote)
		}
		if ep == nil {
			if uid != 0 && uid != self {
				return ownerError(remote.String(), uid, 0, nil)
			}
			return nil
		}
		if uid != ep.UID {
			return ownerError(remote.String(), uid, 0, ep)
		}
		ino, ok := listenerInode(remote)
		if !ok {
			return fmt.Errorf("no listening socket at %s: nothing sent", remote)
		}
		if held, known := pidHoldsSocket(ep.PID, ino); known && !held {
			return fmt.Errorf("the listener at %s (socket %d, uid %d) is not held by the proxy (pid %d): nothing sent", remote, ino, uid, ep.PID)
		}
		return nil
	}
	return fmt.Errorf("connection of type %T: cannot check who answers", c)
}

// ownsSocketFile reports whether uid owns the socket file c reached, in a
// directory no one else may write to: a proxy running as its own user
// (with CAP_NET_ADMIN) serves its control group's members from there.
func ownsSocketFile(c *net.UnixConn, uid int) bool {
	a, ok := c.RemoteAddr().(*net.UnixAddr)
	if !ok || a.Name == "" {
		return false
	}
	fi, err := os.Lstat(a.Name)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) != uid {
		return false
	}
	di, err := os.Stat(filepath.Dir(a.Name))
	return err == nil && di.Mode().Perm()&0o022 == 0
}

func ownerError(addr string, uid, pid int, ep *Endpoint) error {
	found := "uid " + strconv.Itoa(uid)
	if pid > 0 {
		found += ", pid " + strconv.Itoa(pid)
	}
	want := "root or uid " + strconv.Itoa(os.Geteuid())
	if ep != nil {
		want = fmt.Sprintf("the proxy: uid %d, pid %d", ep.UID, ep.PID)
	}
	return fmt.Errorf("the socket at %s belongs to %s, not to %s: nothing sent", addr, found, want)
}

// listenerInode finds the listening TCP socket bound to a (or to the
// wildcard address on its port) and returns its inode.
func listenerInode(a *net.TCPAddr) (uint32, bool) {
	family := uint8(unix.AF_INET6)
	if a.IP.To4() != nil {
		family = unix.AF_INET
	}
	socks, err := netlink.SocketDiagTCP(family)
	if err != nil {
		return 0, false
	}
	for _, s := range socks {
		if s.State != netlink.TCP_LISTEN || s.ID.SourcePort != uint16(a.Port) {
			continue
		}
		if s.ID.Source.Equal(a.IP) || s.ID.Source.IsUnspecified() {
			return s.INode, true
		}
	}
	return 0, false
}

// pidHoldsSocket reports whether pid has the socket inode ino among its
// file descriptors; known is false when /proc does not let us look.
func pidHoldsSocket(pid int, ino uint32) (held, known bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, false
	}
	want := "socket:[" + strconv.FormatUint(uint64(ino), 10) + "]"
	for _, e := range ents {
		if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && l == want {
			return true, true
		}
	}
	return false, true
}
