// Package device is the proxy's packet I/O: TUN devices that read and
// write whole IP packets in batches, with two Linux backends (wireguard-go's
// TUN with virtio-net offloads, and songgao/water, one packet per call) and
// an in-memory pair for tests.
package device

import (
	"errors"
	"fmt"
)

// Device moves IP packets (no link-layer header) between the kernel and
// the proxy.
//
// Buffers: the caller owns bufs. Read fills bufs[i][offset:] with one IP
// packet each and its length in sizes[i]; every buffer must hold offset +
// MTU() bytes. Write sends bufs[i][offset:] (the slice's length is the end
// of the packet) and does not keep the slices after it returns; it may use
// the bytes in front of offset as scratch space.
//
// One goroutine may Read while another Writes; neither is safe for
// concurrent use by several goroutines. Close unblocks a pending Read,
// which then returns an error wrapping os.ErrClosed.
type Device interface {
	Name() string
	MTU() int
	// BatchSize is the most packets one Read returns and one Write call
	// takes at a time efficiently (Write splits larger batches itself).
	BatchSize() int
	Read(bufs [][]byte, sizes []int, offset int) (n int, err error)
	// Write returns how many packets it handed to the kernel; with an
	// error, some packets of the batch may be lost.
	Write(bufs [][]byte, offset int) (int, error)
	Close() error
}

// Backend names.
const (
	Offload = "offload" // wireguard-go TUN, IFF_VNET_HDR: GSO split on read, GRO on write, batches
	Water   = "water"   // songgao/water: one packet per read and write
)

// Backends lists the valid backend names, default first.
var Backends = []string{Offload, Water}

// ErrUnavailable wraps failures to create a TUN device because the kernel
// or the system lacks it (no /dev/net/tun, tun module missing).
var ErrUnavailable = errors.New("TUN unavailable")

// TUNPath is the TUN clone device both backends open.
const TUNPath = "/dev/net/tun"

// ErrUnknownBackend is returned for a backend name not in Backends.
var ErrUnknownBackend = errors.New("unknown backend")

func checkBackend(backend string) error {
	for _, b := range Backends {
		if backend == b {
			return nil
		}
	}
	return fmt.Errorf("backend %q: %w (want offload or water)", backend, ErrUnknownBackend)
}
