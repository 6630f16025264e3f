// Package capture records the packets of one interface inside a network
// namespace to a pcapng file in-process, as `tcpdump -i IF -s 120 -w FILE`
// would, with no external tool: an AF_PACKET socket with a TPACKET_V3 ring
// sees both directions, a userspace filter keeps TCP (or everything), and
// the capture stops cleanly on request or at a packet/byte bound, counting
// what the kernel dropped.
package capture

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/wanlab/wanlab/internal/bytecount"
	"github.com/wanlab/wanlab/units"
)

// DefaultSnaplen is the seeds' `tcpdump -s 120`: every header of a TCP/IP
// packet with options, no payload.
const DefaultSnaplen = 120

// Filter chooses which packets are kept.
type Filter int

// Filters. The zero value keeps TCP only.
const (
	FilterTCP Filter = iota // IPv4 and IPv6 TCP segments
	FilterAll               // every frame
)

func (f Filter) String() string {
	switch f {
	case FilterTCP:
		return "tcp"
	case FilterAll:
		return "all"
	}
	return fmt.Sprintf("filter(%d)", int(f))
}

// ParseFilter reads "tcp" or "all".
func ParseFilter(s string) (Filter, error) {
	switch s {
	case "tcp", "":
		return FilterTCP, nil
	case "all":
		return FilterAll, nil
	}
	return 0, fmt.Errorf("capture filter %q: want tcp or all", s)
}

// Config sets up a capture. The zero value captures TCP with snaplen 120,
// unbounded.
type Config struct {
	// Snaplen is how many bytes of each frame are kept; 0 means 120.
	Snaplen int
	Filter  Filter
	// MaxPackets and MaxBytes bound the capture (packets written, bytes of
	// pcapng written); 0 means no bound. At a bound the capture stops by
	// itself and Done is closed.
	MaxPackets uint64
	MaxBytes   units.Size
	// RingSize is the kernel ring the socket fills (default 32 MiB, in 1 MiB
	// blocks); a larger ring rides out longer stalls of the writer.
	RingSize units.Size
	// Comment is written into the pcapng interface description (for
	// example the namespace).
	Comment string
	// Replace lets StartFile replace an existing file at its path (by
	// rename, hostfile.CreateOutput); without it an existing path is
	// refused.
	Replace bool
}

func (c Config) withDefaults() (Config, error) {
	if c.Snaplen == 0 {
		c.Snaplen = DefaultSnaplen
	}
	if c.Snaplen < 64 || c.Snaplen > 262144 {
		return c, fmt.Errorf("capture snaplen %d: want 64 to 262144 bytes", c.Snaplen)
	}
	if c.RingSize == 0 {
		c.RingSize = 32 * units.MiB
	}
	if c.RingSize < blockSize {
		return c, fmt.Errorf("capture ring %s: want at least %s", c.RingSize, units.Size(blockSize))
	}
	if c.Filter != FilterTCP && c.Filter != FilterAll {
		return c, fmt.Errorf("capture: unknown %s", c.Filter)
	}
	return c, nil
}

// blockSize is the size of one ring block; packets are handed over a
// block at a time, which batches the wakeups.
const blockSize = 1 << 20

// Stats counts what a capture saw.
type Stats struct {
	// Packets and Bytes are what was written (Bytes of the pcapng file);
	// Wire is the original length of those packets summed.
	Packets uint64     `json:"packets"`
	Bytes   units.Size `json:"file_bytes"`
	Wire    units.Size `json:"wire_bytes"`
	// Incoming and Outgoing split Packets by direction as the kernel saw
	// them (PACKET_OUTGOING for what the namespace sent).
	Incoming uint64 `json:"incoming"`
	Outgoing uint64 `json:"outgoing"`
	// Filtered is how many frames the filter discarded.
	Filtered uint64 `json:"filtered"`
	// KernelPackets and KernelDrops are PACKET_STATISTICS: frames that
	// reached the socket, and those lost because the ring was full.
	KernelPackets uint64 `json:"kernel_packets"`
	KernelDrops   uint64 `json:"kernel_drops"`
	// Bounded is true when MaxPackets or MaxBytes stopped the capture.
	Bounded bool `json:"bounded"`
}

// ErrUnsupported is returned where AF_PACKET does not exist.
var ErrUnsupported = errors.New("capture: AF_PACKET not supported on " + runtime.GOOS)

// sink filters frames and writes them as pcapng: the per-packet half of
// a capture, independent of where the frames come from.
type sink struct {
	cfg   Config
	out   *bufio.Writer
	count *bytecount.Writer
	ng    *pcapgo.NgWriter
	stats Stats
	ci    gopacket.CaptureInfo // reused: no allocation per packet
}

// pcapng enhanced packet block overhead: 28 bytes of header, 4 of trailer.
const epbOverhead = 32

func newSink(w io.Writer, ifname string, cfg Config) (*sink, error) {
	cw := &bytecount.Writer{W: w}
	out := bufio.NewWriterSize(cw, 1<<20)
	ng, err := pcapgo.NewNgWriterInterface(out, pcapgo.NgInterface{
		Name:                ifname,
		Description:         cfg.Comment,
		Filter:              cfg.Filter.String(),
		OS:                  runtime.GOOS,
		LinkType:            layers.LinkTypeEthernet,
		SnapLength:          uint32(cfg.Snaplen),
		TimestampResolution: 9,
	}, pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{
		Hardware: runtime.GOARCH, OS: runtime.GOOS, Application: "wanlab",
	}})
	if err != nil {
		return nil, fmt.Errorf("capture %s: pcapng header: %w", ifname, err)
	}
	return &sink{cfg: cfg, out: out, count: cw, ng: ng}, nil
}

// written is the pcapng bytes produced so far, buffered ones included.
func (s *sink) written() uint64 { return uint64(s.count.N) + uint64(s.out.Buffered()) }

// add handles one frame: data is its first bytes (at most snaplen), length
// its original length. It reports false once a bound is reached; the
// frame that would cross the bound is not written.
func (s *sink) add(ts time.Time, data []byte, length int, outgoing bool) (bool, error) {
	if s.cfg.Filter == FilterTCP && !IsTCP(data) {
		s.stats.Filtered++
		return true, nil
	}
	if len(data) > s.cfg.Snaplen {
		data = data[:s.cfg.Snaplen]
	}
	if s.cfg.MaxPackets > 0 && s.stats.Packets >= s.cfg.MaxPackets {
		s.stats.Bounded = true
		return false, nil
	}
	if s.cfg.MaxBytes > 0 && s.written()+uint64(epbOverhead+(len(data)+3)&^3) > uint64(s.cfg.MaxBytes) {
		s.stats.Bounded = true
		return false, nil
	}
	s.ci.Timestamp = ts
	s.ci.CaptureLength = len(data)
	s.ci.Length = max(length, len(data))
	if err := s.ng.WritePacket(s.ci, data); err != nil {
		return false, err
	}
	s.stats.Packets++
	s.stats.Wire += units.Size(s.ci.Length)
	if outgoing {
		s.stats.Outgoing++
	} else {
		s.stats.Incoming++
	}
	return true, nil
}

// close flushes everything to the destination.
func (s *sink) close() error {
	if err := s.ng.Flush(); err != nil {
		return err
	}
	if err := s.out.Flush(); err != nil {
		return err
	}
	s.stats.Bytes = units.Size(s.count.N)
	return nil
}
