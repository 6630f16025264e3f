//go:build !linux

package control

import "net"

// peerPID cannot tell the peer's pid outside Linux.
func peerPID(net.Conn) int { return 0 }

// peerCred cannot read peer credentials outside Linux: unix sockets then
// need the token as TCP does.
func peerCred(*net.UnixConn) (peer, bool) { return peer{}, false }
