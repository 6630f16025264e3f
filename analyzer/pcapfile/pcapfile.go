// Package pcapfile reads pcap (micro- and nanosecond) and pcapng capture
// files, with a link type per interface, through gopacket's pcapgo (no cgo).
// Frames come out one at a time in a buffer the Reader owns.
package pcapfile

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"time"
	"unsafe"

	"github.com/gopacket/gopacket/pcapgo"
	"github.com/wanlab/wanlab/analyzer/decode"
	"github.com/wanlab/wanlab/internal/bytecount"
	"github.com/wanlab/wanlab/internal/hostfile"
)

// Frame is one captured frame. Data is owned by the Reader and is only valid
// until the next call to Next (during the call to Frames' fn).
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
// against pcapgo. A gzip'd file is uncompressed on the way and read as
// the capture inside it; pcapng goes through pcapgo.
//
// A classic pcap file that Open can map into memory (see mapFile) is
// parsed in the mapping: no read system calls, no copy of the packets
// into a buffer.
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
	count  *bytecount.Reader
	frames int
	// ngLinks caches the link type per pcapng interface.
	ngLinks []decode.LinkType
	// m is the mapped file while records are parsed from it (nil
	// otherwise), mpos the offset of the next record in it, and file the
	// file itself, read past the mapping if it grew after Open.
	m     []byte
	mpos  int
	mnext int // mpos at which to slide the resident part (slideMap)
	file  *os.File
	// warns lists the broken record headers met so far; prevSec is the
	// timestamp of the last good record, which a resynchronisation
	// looks for nearby.
	// compressed counts the bytes of a gzip'd file read (nil: not gzip).
	compressed *bytecount.Reader
	warns      []RecordWarning
	brokenN    int
	prevSec    uint32
	snaplen    int
}

// RecordWarning is a classic pcap record whose header was impossible.
type RecordWarning struct {
	// Offset is where the record header starts in the file; Frame is
	// the number the record would have had (frames read before it + 1).
	Offset int64 `json:"offset"`
	Frame  int   `json:"frame"`
	// Problem says what was wrong; Resumed is the offset reading went on
	// from (the record itself, read as tshark reads it, when its data
	// could be trusted; -1: no next record was found, reading stopped).
	Problem string `json:"problem"`
	Resumed int64  `json:"resumed_at"`
}

// RecordWarnings returns the broken records met so far.
func (r *Reader) RecordWarnings() []RecordWarning { return r.warns }

// Open opens the capture at path. Close the returned Closer when done;
// frames read after it are not valid.
func Open(path string) (*Reader, io.Closer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, hostfile.PathError(path, err)
	}
	if m := mapFile(f); m != nil {
		if r := newMappedReader(m, path, f); r != nil {
			return r, &mappedCloser{f: f, m: m}, nil
		}
		unmap(m)
	}
	r, err := NewReader(f, path)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return r, f, nil
}

// newMappedReader reads the classic pcap file whose bytes are m, mapped
// from f (nil: m is all there is), or returns nil if m is some other
// format, which is read as a stream.
func newMappedReader(m []byte, name string, f *os.File) *Reader {
	r, err := newReader(bytes.NewReader(m), name, 4096)
	if err != nil || !r.fast || r.compressed != nil {
		return nil
	}
	// The header is parsed; records follow from where its reader stopped.
	r.m, r.mpos, r.file = m, int(r.count.N)-r.br.Buffered(), f
	r.br, r.count = nil, &bytecount.Reader{}
	if f == nil {
		r.mnext = math.MaxInt // memory, not a mapping: nothing to slide
	}
	return r
}

// mapMin is the smallest file worth mapping: below it one read is as
// cheap as setting up the mapping.
const mapMin = 1 << 20

// mapChunk is the span of the mapping made resident ahead of the reader
// and released behind it (slideMap), so that the process holds a few
// chunks of the file, not all of it.
const mapChunk = 4 << 20

// mappedCloser unmaps the file and closes it.
type mappedCloser struct {
	f *os.File
	m []byte
}

func (c *mappedCloser) Close() error {
	unmap(c.m)
	c.m = nil
	return c.f.Close()
}

// NewReader reads a capture from r; name is used in error messages.
func NewReader(r io.Reader, name string) (*Reader, error) {
	return newReader(r, name, 1<<20)
}

func newReader(r io.Reader, name string, bufSize int) (*Reader, error) {
	name = hostfile.Name(name)
	cr := &bytecount.Reader{R: r}
	br := bufio.NewReaderSize(cr, bufSize)
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
	if magic[0] == 0x1f && magic[1] == 0x8b {
		// gzip: the capture inside is read as a plain one (a pcap by the
		// fast path, with its record checks; a pcapng), its offsets in
		// the uncompressed stream; progress counts compressed bytes.
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: gzip: %v: %w", name, err, ErrFormat)
		}
		rd, err := newReader(gz, name, bufSize)
		if err != nil {
			return nil, err
		}
		if rd.compressed != nil {
			return nil, fmt.Errorf("%s: gzip inside gzip: %w", name, ErrFormat)
		}
		rd.compressed = cr
		return rd, nil
	}
	rd := &Reader{name: name, count: cr}
	m := binary.LittleEndian.Uint32(magic)
	switch {
	case m == 0x0A0D0D0A:
		ng, err := pcapgo.NewNgReader(newNgLimiter(br), pcapgo.NgReaderOptions{WantMixedLinkType: true, SkipUnknownVersion: true})
		if err != nil {
			return nil, fmt.Errorf("%s: pcapng header: %v: %w", name, err, ErrFormat)
		}
		rd.ng = ng
	case m == 0xA1B2C3D4 || m == 0xD4C3B2A1 || m == 0xA1B23C4D || m == 0x4D3CB2A1:
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: pcap header: %v: %w", name, err, ErrFormat)
		}
		rd.pcap = pr
		rd.link = decode.LinkType(pr.LinkType())
		rd.fast, rd.br = true, br
		rd.nanos = m == 0xA1B23C4D || m == 0x4D3CB2A1
		rd.order = binary.LittleEndian
		if m == 0xD4C3B2A1 || m == 0x4D3CB2A1 {
			rd.order = binary.BigEndian
		}
		rd.maxCap = max(int(pr.Snaplen()), eagerReadMax)
		rd.snaplen = int(pr.Snaplen())
		if !decode.Supported(rd.link) {
			return nil, fmt.Errorf("%s: %s is not one the analyzer decodes (the list is in docs/analyzer.md): %w", name, rd.link.Describe(), decode.ErrLinkType)
		}
	default:
		// The bytes themselves are not echoed: the file may be anything
		// the caller could read (as root, a link to /etc/shadow).
		return nil, fmt.Errorf("%s: its first 4 bytes are no pcap, pcapng or gzip magic number: %w", name, ErrFormat)
	}
	return rd, nil
}

// Offset is how many bytes of the underlying file have been consumed, for
// progress reporting (it runs ahead of the frames by the read buffer).
func (r *Reader) Offset() int64 {
	if r.compressed != nil {
		return r.compressed.N
	}
	if r.m != nil {
		return int64(r.mpos)
	}
	return r.count.N
}

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
	if r.m != nil {
		n, err := r.Frames(1, func(g *Frame) {
			// The frame outlives the guard against faults: copy it.
			r.big = append(r.big[:0], g.Data...)
			f = *g
			f.Data = r.big
		})
		if n == 0 {
			return Frame{}, err
		}
		return f, nil
	}
	if r.fast {
		return r.nextFast()
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
	if capLen > int64(r.maxCap) || capLen > origLen || r.snaplen > 0 && capLen > int64(r.snaplen) {
		at := r.count.N - int64(r.br.Buffered())
		if !r.broken(uint64(capLen), uint64(origLen), at) {
			// Resynchronise: look for the next plausible record header.
			win, _ := r.br.Peek(min(r.br.Size(), resyncWindow))
			skip := findRecord(win, 1, r.order, r.maxCap, r.nanos, r.prevSec)
			if skip < 0 {
				r.warns[len(r.warns)-1].Resumed = -1
				return Frame{}, io.EOF
			}
			r.warns[len(r.warns)-1].Resumed = at + int64(skip)
			r.br.Discard(skip)
			return r.nextFast()
		}
		origLen = max(origLen, capLen)
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
	r.prevSec = sec
	return Frame{Data: data, WireLen: int(origLen), Timestamp: time.Unix(int64(sec), nsec), Link: r.link}, nil
}

// Frames passes up to n frames to fn, in order, and returns how many it
// passed and, if fewer than n, the error that stopped it (io.EOF at the
// end of the file, as Next). f and f.Data are only valid during fn.
func (r *Reader) Frames(n int, fn func(f *Frame)) (passed int, err error) {
	if r.m == nil {
		for passed < n {
			f, err := r.Next()
			if err != nil {
				return passed, err
			}
			fn(&f)
			passed++
		}
		return passed, nil
	}
	// A mapped file that shrinks under the reader (another program
	// truncated it) faults on the pages past its new end: that becomes
	// an error here rather than a crash, whether the fault was in the
	// parser or in fn.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if e := recover(); e != nil {
			if re, ok := e.(runtime.Error); ok && r.inMapping(re) {
				err = fmt.Errorf("%s: the file shrank while it was read, after packet %d: %w", r.name, r.frames, ErrTruncated)
				return
			}
			panic(e)
		}
	}()
	var f Frame
	for passed < n {
		if err := r.nextMapped(&f); err != nil {
			if err == errMapEnd {
				// The file grew since Open: read the rest as a stream.
				r.leaveMapping()
				m, err := r.Frames(n-passed, fn)
				return passed + m, err
			}
			return passed, err
		}
		fn(&f)
		passed++
	}
	return passed, nil
}

// inMapping reports whether a runtime error is a memory fault in the
// mapping (debug.SetPanicOnFault's errors carry the address; a nil
// dereference in fn carries one far outside).
func (r *Reader) inMapping(e runtime.Error) bool {
	a, ok := e.(interface{ Addr() uintptr })
	if !ok || len(r.m) == 0 {
		return false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(r.m)))
	return a.Addr() >= base && a.Addr()-base < uintptr(len(r.m))
}

// errMapEnd: the next record is not (entirely) in the mapping, but the
// file is now longer than the mapping.
var errMapEnd = errors.New("record past the mapping")

// nextMapped parses the record at mpos into f, with nextFast's checks.
func (r *Reader) nextMapped(f *Frame) error {
	if r.mpos >= r.mnext {
		r.mnext = slideMap(r.m, r.mpos)
	}
	rest := r.m[r.mpos:]
	if len(rest) < 16 {
		if r.grew() {
			return errMapEnd
		}
		if len(rest) == 0 {
			return io.EOF
		}
		return r.wrap(io.ErrUnexpectedEOF)
	}
	h := rest[:16]
	sec := r.order.Uint32(h[0:4])
	frac := r.order.Uint32(h[4:8])
	capLen := uint64(r.order.Uint32(h[8:12]))
	origLen := uint64(r.order.Uint32(h[12:16]))
	if capLen > uint64(r.maxCap) || capLen > origLen || r.snaplen > 0 && capLen > uint64(r.snaplen) {
		if !r.broken(capLen, origLen, int64(r.mpos)) {
			skip := findRecord(rest[:min(len(rest), resyncWindow)], 1, r.order, r.maxCap, r.nanos, r.prevSec)
			if skip < 0 {
				r.warns[len(r.warns)-1].Resumed = -1
				r.mpos = len(r.m)
				return io.EOF
			}
			r.warns[len(r.warns)-1].Resumed = int64(r.mpos + skip)
			r.mpos += skip
			return r.nextMapped(f)
		}
		origLen = max(origLen, capLen)
	}
	if uint64(len(rest)-16) < capLen {
		if r.grew() {
			return errMapEnd
		}
		return r.wrap(io.ErrUnexpectedEOF)
	}
	if !r.nanos {
		frac *= 1000 // in uint32, exactly as pcapgo computes it
	}
	r.mpos += 16 + int(capLen)
	r.frames++
	r.prevSec = sec
	f.Data = rest[16 : 16+capLen : 16+capLen]
	f.WireLen = int(origLen)
	f.Timestamp = time.Unix(int64(sec), int64(frac))
	f.Link = r.link
	return nil
}

// grew reports whether the file is now longer than the mapping.
func (r *Reader) grew() bool {
	if r.file == nil {
		return false
	}
	fi, err := r.file.Stat()
	return err == nil && fi.Size() > int64(len(r.m))
}

// leaveMapping goes on reading the file as a stream from the next record.
func (r *Reader) leaveMapping() {
	if _, err := r.file.Seek(int64(r.mpos), io.SeekStart); err != nil {
		// Reading from where the stream is would misparse: end here.
		r.count = &bytecount.Reader{R: bytes.NewReader(nil), N: int64(r.mpos)}
	} else {
		r.count = &bytecount.Reader{R: r.file, N: int64(r.mpos)}
	}
	r.br = bufio.NewReaderSize(r.count, 1<<20)
	r.m, r.mnext = nil, 0
}

// resyncWindow bounds the search for the next record after a broken one.
const resyncWindow = 1 << 20

// broken records the impossible header of the record at offset at
// (capLen captured bytes of origLen, against the file's snap length) and
// reports whether its data can still be read as tshark reads it: a
// capture length over the original length or the snap length but within
// the largest a pcap reader accepts. An absurd length cannot be trusted:
// the caller looks for the next record instead.
func (r *Reader) broken(capLen, origLen uint64, at int64) bool {
	w := RecordWarning{Offset: at, Frame: r.frames + 1, Resumed: at}
	ok := capLen <= uint64(r.maxCap)
	switch {
	case !ok:
		w.Problem = fmt.Sprintf("capture length %d exceeds the largest a pcap record can have (%d)", capLen, r.maxCap)
	case capLen > origLen:
		w.Problem = fmt.Sprintf("capture length %d exceeds the original length %d (taken as %d)", capLen, origLen, capLen)
	default:
		w.Problem = fmt.Sprintf("capture length %d exceeds the file's snap length %d", capLen, r.snaplen)
	}
	r.brokenN++
	if len(r.warns) < maxRecordWarnings {
		r.warns = append(r.warns, w)
	} else {
		r.warns[len(r.warns)-1] = w // the last one listed is the latest
	}
	return ok
}

// BrokenRecords counts the broken records met, listed or not.
func (r *Reader) BrokenRecords() int { return r.brokenN }

// maxRecordWarnings bounds the broken records listed.
const maxRecordWarnings = 10

// findRecord returns the offset in b, from start on, of the first
// plausible pcap record header (-1 if none): a capture length within the
// limits and the original length, a fraction of a second below one
// second, a timestamp within a day of the last good record's (when there
// was one), and its record followed by the end of b or another such
// header.
func findRecord(b []byte, start int, order binary.ByteOrder, maxCap int, nanos bool, prevSec uint32) int {
	plausible := func(h []byte) bool {
		sec, frac := order.Uint32(h[0:4]), order.Uint32(h[4:8])
		capLen, origLen := order.Uint32(h[8:12]), order.Uint32(h[12:16])
		limit := uint32(1_000_000)
		if nanos {
			limit = 1_000_000_000
		}
		if frac >= limit || capLen > origLen || capLen > uint32(maxCap) || origLen > 1<<24 || origLen == 0 {
			return false
		}
		return prevSec == 0 || sec+86400 >= prevSec && sec <= prevSec+86400
	}
	for i := start; i+16 <= len(b); i++ {
		if !plausible(b[i : i+16]) {
			continue
		}
		end := i + 16 + int(order.Uint32(b[i+8:i+12]))
		switch {
		case end == len(b):
			return i
		case end+16 <= len(b) && plausible(b[end:end+16]):
			return i
		case end > len(b) && len(b) == resyncWindow:
			return i // beyond what can be seen
		}
	}
	return -1
}
