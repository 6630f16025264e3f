//go:build !linux

package capture

import (
	"io"

	"github.com/vishvananda/netns"
)

// Capture is a running capture; it does not exist outside Linux.
type Capture struct{}

// Start is not supported outside Linux.
func Start(netns.NsHandle, string, io.Writer, Config) (*Capture, error) { return nil, ErrUnsupported }

// StartFile is not supported outside Linux.
func StartFile(netns.NsHandle, string, string, Config) (*Capture, error) {
	return nil, ErrUnsupported
}

// Done is closed when the capture has ended.
func (c *Capture) Done() <-chan struct{} { ch := make(chan struct{}); close(ch); return ch }

// Stop returns ErrUnsupported.
func (c *Capture) Stop() (Stats, error) { return Stats{}, ErrUnsupported }
