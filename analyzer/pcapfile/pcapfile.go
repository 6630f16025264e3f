// Package pcapfile reads pcap (micro- and nanosecond) and pcapng capture
// files, with a link type per interface, through gopacket's pcapgo (no cgo).
// Frames come out one at a time in a buffer the Reader owns.
package pcapfile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gopacket/gopacket/pcapgo"
	"github.com/wanlab/wanlab/analyzer/decode"
)

// Frame is one captured frame. Data is owned by the Reader and is only valid
// until the next call to Next.
type Frame struct {
	Data      []byte
	WireLen   int // original length on the wire
	Timestamp time.Time
	Link      decode.LinkType
	Interface int // pcapng interface index, 0 for pcap
}

// ErrFormat marks input that is not a pcap or pcapng file at all.
var ErrFormat = errors.New("not a pcap or pcapng file")

// ErrTruncated marks a file that ends in the middle of a packet record.
var ErrTruncated = errors.New("file ends in the middle of a packet record")

// Reader yields the frames of one capture.
type Reader struct {
	name   string
	pcap   *pcapgo.Reader
	ng     *pcapgo.NgReader
	link   decode.LinkType
	count  *countingReader
	frames int
	// ngLinks caches the link type per pcapng interface.
	ngLinks []decode.LinkType
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Open opens the capture at path. Close the returned Reader when done.
func Open(path string) (*Reader, io.Closer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	r, err := NewReader(f, path)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return r, f, nil
}

// NewReader reads a capture from r; name is used in error messages.
func NewReader(r io.Reader, name string) (*Reader, error) {
	cr := &countingReader{r: r}
	br := bufio.NewReaderSize(cr, 1<<20)
	magic, err := br.Peek(4)
	if err != nil {
		if errors.Is(err, io.EOF) {
			if len(magic) == 0 {
				return nil, fmt.Errorf("%s: empty file: %w", name, ErrFormat)
			}
			return nil, fmt.Errorf("%s: %d bytes, too short for a capture header: %w", name, len(magic), ErrFormat)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	rd := &Reader{name: name, count: cr}
	m := binary.LittleEndian.Uint32(magic)
	switch {
	case m == 0x0A0D0D0A:
		ng, err := pcapgo.NewNgReader(br, pcapgo.NgReaderOptions{WantMixedLinkType: true, SkipUnknownVersion: true})
		if err != nil {
			return nil, fmt.Errorf("%s: pcapng header: %v: %w", name, err, ErrFormat)
		}
		rd.ng = ng
	case m == 0xA1B2C3D4 || m == 0xD4C3B2A1 || m == 0xA1B23C4D || m == 0x4D3CB2A1 || magic[0] == 0x1f && magic[1] == 0x8b:
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: pcap header: %v: %w", name, err, ErrFormat)
		}
		rd.pcap = pr
		rd.link = decode.LinkType(pr.LinkType())
		if !decode.Supported(rd.link) {
			return nil, fmt.Errorf("%s: link type %v: %w", name, rd.link, decode.ErrLinkType)
		}
	default:
		return nil, fmt.Errorf("%s: magic %08x: %w", name, m, ErrFormat)
	}
	return rd, nil
}

// Offset is how many bytes of the underlying file have been consumed, for
// progress reporting (it runs ahead of the frames by the read buffer).
func (r *Reader) Offset() int64 { return r.count.n }

// Next returns the next frame, io.EOF at the clean end of the file, an error
// wrapping ErrTruncated when the file stops inside a record, or another
// error naming the record for a corrupt file.
func (r *Reader) Next() (Frame, error) {
	var f Frame
	if r.pcap != nil {
		data, ci, err := r.pcap.ZeroCopyReadPacketData()
		if err != nil {
			return f, r.wrap(err)
		}
		f = Frame{Data: data, WireLen: ci.Length, Timestamp: ci.Timestamp, Link: r.link}
		r.frames++
		return f, nil
	}
	data, ci, err := r.ng.ZeroCopyReadPacketData()
	if err != nil {
		return f, r.wrap(err)
	}
	r.frames++
	idx := ci.InterfaceIndex
	if idx >= len(r.ngLinks) || r.ng.NInterfaces() != len(r.ngLinks) {
		r.refreshLinks()
	}
	link := decode.LinkType(0xFFFF)
	if idx < len(r.ngLinks) {
		link = r.ngLinks[idx]
	}
	return Frame{Data: data, WireLen: ci.Length, Timestamp: ci.Timestamp, Link: link, Interface: idx}, nil
}

// refreshLinks reloads the per-interface link types; pcapng sections may
// add interfaces at any point.
func (r *Reader) refreshLinks() {
	n := r.ng.NInterfaces()
	r.ngLinks = r.ngLinks[:0]
	for i := 0; i < n; i++ {
		iface, err := r.ng.Interface(i)
		if err != nil {
			r.ngLinks = append(r.ngLinks, 0xFFFF)
			continue
		}
		r.ngLinks = append(r.ngLinks, decode.LinkType(iface.LinkType))
	}
}

func (r *Reader) wrap(err error) error {
	if err == io.EOF {
		return io.EOF
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s: after packet %d: %w", r.name, r.frames, ErrTruncated)
	}
	return fmt.Errorf("%s: record after packet %d: %w", r.name, r.frames, err)
}
