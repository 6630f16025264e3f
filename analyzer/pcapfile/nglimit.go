package pcapfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MaxInterfaces bounds the interface description blocks a pcapng file may
// hold. pcapgo keeps each description (about 900 bytes with its options)
// and the analyzer a merge queue per interface, so 2^20 of them in 21 MB
// took 0.9 GB; a real capture has a few (dumpcap writes one per
// interface it listened on).
const MaxInterfaces = 4096

// ErrTooManyInterfaces is matched (errors.Is) by the error for a pcapng
// file with more than MaxInterfaces interface descriptions.
var ErrTooManyInterfaces = errors.New("too many pcapng interface descriptions")

// pcapng block types and the section header's byte-order magic.
const (
	ngSectionHeader   = 0x0A0D0D0A
	ngInterfaceDesc   = 1
	ngByteOrderMagic  = 0x1A2B3C4D
	ngBlockHeaderSize = 12 // type, total length, and the section header's byte-order magic (or the first body bytes)
)

// ngLimiter passes a pcapng stream through while following its block
// boundaries (every block starts with its type and total length), and
// fails the read that would pass the description of interface
// MaxInterfaces+1, before pcapgo parses it. A block too short to be one
// (pcapgo refuses it) ends the following: its bytes pass unchecked.
type ngLimiter struct {
	r     io.Reader
	order binary.ByteOrder
	hdr   [ngBlockHeaderSize]byte
	nhdr  int    // bytes of the next block's header gathered in hdr
	left  uint64 // bytes of the current block still to pass after its header
	lost  bool
	ifs   int
}

func newNgLimiter(r io.Reader) *ngLimiter { return &ngLimiter{r: r, order: binary.LittleEndian} }

func (l *ngLimiter) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if l.lost {
		return n, err
	}
	for i := 0; i < n; {
		if l.left > 0 {
			k := min(l.left, uint64(n-i))
			l.left -= k
			i += int(k)
			continue
		}
		k := copy(l.hdr[l.nhdr:], p[i:n])
		l.nhdr += k
		i += k
		if l.nhdr < ngBlockHeaderSize {
			continue
		}
		l.nhdr = 0
		typ := binary.LittleEndian.Uint32(l.hdr[0:4]) // the section header's type reads the same both ways
		if typ == ngSectionHeader {
			if binary.LittleEndian.Uint32(l.hdr[8:12]) == ngByteOrderMagic {
				l.order = binary.LittleEndian
			} else {
				l.order = binary.BigEndian
			}
		} else {
			typ = l.order.Uint32(l.hdr[0:4])
		}
		size := uint64(l.order.Uint32(l.hdr[4:8]))
		if size < ngBlockHeaderSize {
			l.lost = true
			return n, err
		}
		l.left = size - ngBlockHeaderSize
		if typ == ngInterfaceDesc {
			if l.ifs++; l.ifs > MaxInterfaces {
				return 0, fmt.Errorf("more than %d interface descriptions (the most a capture may hold): %w", MaxInterfaces, ErrTooManyInterfaces)
			}
		}
	}
	return n, err
}
