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
//
// Classic pcap records are read by a fast path after pcapgo has parsed and
// validated the file header: each record is parsed in place in the read
// buffer (one Peek and one Discard, no copy, no per-record interface
// calls), which halves the cost of reading a bulk capture. It applies
// pcapgo's record checks (capture length above the snap length or the
// original length is an error) and FuzzReader checks it frame for frame
// against pcapgo. Gzip'd pcap and pcapng go through pcapgo.
type Reader struct {
	name   string
	br     *bufio.Reader
	fast   bool
	order  binary.ByteOrder
	nanos  bool
	maxCap int
	big    []byte // records longer than the read buffer
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
		if magic[0] != 0x1f {
			rd.fast, rd.br = true, br
			rd.nanos = m == 0xA1B23C4D || m == 0x4D3CB2A1
			rd.order = binary.LittleEndian
			if m == 0xD4C3B2A1 || m == 0x4D3CB2A1 {
				rd.order = binary.BigEndian
			}
			rd.maxCap = max(int(pr.Snaplen()), eagerReadMax)
		}
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

// Interfaces is the number of capture interfaces the file has described
// so far (1 for pcap).
func (r *Reader) Interfaces() int {
	if r.ng == nil {
		return 1
	}
	return r.ng.NInterfaces()
}

// Next returns the next frame, io.EOF at the clean end of the file, an error
// wrapping ErrTruncated when the file stops inside a record, or another
// error naming the record for a corrupt file.
func (r *Reader) Next() (Frame, error) {
	var f Frame
	if r.fast {
		return r.nextFast()
	}
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

// eagerReadMax is pcapgo's (and libpcap's) largest snap length: records up
// to it are accepted whatever the header's snap length says.
const eagerReadMax = 262144

func (r *Reader) nextFast() (Frame, error) {
	h, err := r.br.Peek(16)
	if len(h) < 16 {
		if len(h) == 0 && err == io.EOF {
			return Frame{}, io.EOF
		}
		return Frame{}, r.wrap(io.ErrUnexpectedEOF)
	}
	sec := r.order.Uint32(h[0:4])
	frac := r.order.Uint32(h[4:8])
	capLen := int64(r.order.Uint32(h[8:12]))
	origLen := int64(r.order.Uint32(h[12:16]))
	if capLen > int64(r.maxCap) {
		return Frame{}, r.wrap(fmt.Errorf("capture length exceeds snap length: %d > %d", capLen, r.maxCap))
	}
	if capLen > origLen {
		return Frame{}, r.wrap(fmt.Errorf("capture length exceeds original packet length: %d > %d", capLen, origLen))
	}
	r.br.Discard(16)
	n := int(capLen)
	var data []byte
	if n <= r.br.Size() {
		data, err = r.br.Peek(n)
		if len(data) < n {
			return Frame{}, r.wrap(io.ErrUnexpectedEOF)
		}
		r.br.Discard(n)
	} else {
		// A record longer than the read buffer (the header allows up to
		// its snap length, which a corrupt file sets to 4 GB): grow with
		// the bytes that actually arrive, never by the declared length.
		r.big = r.big[:0]
		for len(r.big) < n {
			k := len(r.big)
			r.big = append(r.big, make([]byte, min(n-k, 1<<20))...)
			if _, err := io.ReadFull(r.br, r.big[k:]); err != nil {
				return Frame{}, r.wrap(io.ErrUnexpectedEOF)
			}
		}
		data = r.big
	}
	if !r.nanos {
		frac *= 1000 // in uint32, exactly as pcapgo computes it
	}
	nsec := int64(frac)
	r.frames++
	return Frame{Data: data, WireLen: int(origLen), Timestamp: time.Unix(int64(sec), nsec), Link: r.link}, nil
}
