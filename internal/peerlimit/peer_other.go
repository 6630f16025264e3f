//go:build !linux

package peerlimit

import "net"

// PeerOf knows only the remote host off Linux.
func PeerOf(c net.Conn) Peer {
	if r, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return Peer{Host: r.IP.String()}
	}
	return Peer{}
}

// TCPOwner cannot tell off Linux.
func TCPOwner(local, remote *net.TCPAddr) (int, bool) { return 0, false }

// UnixPeerPID cannot tell off Linux.
func UnixPeerPID(*net.UnixConn) int { return 0 }
