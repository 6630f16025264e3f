//go:build !linux

package sockopt

import (
	"net"
	"syscall"
)

func (o Options) setFD(int) error { return ErrUnsupported }

// Read returns ErrUnsupported outside Linux.
func Read(syscall.Conn) (Effective, error) { return Effective{}, ErrUnsupported }

// Info returns ErrUnsupported outside Linux.
func Info(syscall.Conn) (TCPInfo, error) { return TCPInfo{}, ErrUnsupported }

// ArmQuickAck returns ErrUnsupported outside Linux.
func ArmQuickAck(syscall.Conn) error { return ErrUnsupported }

// QuickAckConn is conn unchanged outside Linux.
func QuickAckConn(c *net.TCPConn) net.Conn { return c }
