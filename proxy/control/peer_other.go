//go:build !linux

package control

import "net"

// peerPID cannot tell the peer's pid outside Linux.
func peerPID(net.Conn) int { return 0 }
