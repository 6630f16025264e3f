// Package tap records what the proxy's engine did to each packet as a pcapng
// file: one interface per direction, every packet as it entered the engine
// (inbound), as it left (outbound), and where it was dropped (with a comment
// naming the reason), so Wireshark or `wanlab analyze` shows the impairment.
//
// The forwarding path only copies the packet into a preallocated slot of a
// bounded ring and returns; a writer goroutine, polling the ring every
// millisecond while records flow, encodes them and writes them in large
// chunks, so a record reaches the file within a few milliseconds. When the
// writer falls behind (a slow disk) or the size limit is reached, tap records
// are dropped and counted; packets never wait for the tap.
package tap

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/wanlab/wanlab/internal/bytecount"
	"github.com/wanlab/wanlab/units"
)

// Defaults for the options.
const (
	DefaultSnapLen = 2048 // bytes kept of each packet; longer ones are truncated, their length kept
	DefaultSlots   = 4096 // records the ring holds while the writer catches up
)

type kind uint8

const (
	kindEntered kind = iota
	kindLeft
	kindDropped
)

// Sizes of the blocks the writer appends, used to keep the file within the
// limit without asking the buffered writer (pcapng spec, sections 4.3, 4.6).
const (
	epbFixed     = 32    // block header 28 + trailing length 4
	optFlagsLen  = 4 + 4 // epb_flags: option header + uint32
	optEndLen    = 4     // opt_endofopt
	isbLen       = 24 + 2*(4+8) + optEndLen
	commentIntro = "dropped: "
)

// Stats counts what the tap recorded and what it could not.
type Stats struct {
	Records   uint64 `json:"records"`    // packet records written
	Bytes     uint64 `json:"bytes"`      // bytes of pcapng written (headers included)
	RingFull  uint64 `json:"ring_full"`  // records dropped because the writer fell behind
	OverLimit uint64 `json:"over_limit"` // records not written because the size limit was reached (or a write failed: see Close)
}

// Option changes a tap setting.
type Option func(*config)

type config struct {
	snapLen int
	slots   int
	now     func() time.Time
}

// WithSnapLen keeps at most n bytes of each packet (the rest is counted in
// the record's original length, as tcpdump -s does).
func WithSnapLen(n int) Option { return func(c *config) { c.snapLen = n } }

// WithSlots sets how many records the ring can hold (rounded up to a power
// of two). Memory is slots × snap length, allocated once.
func WithSlots(n int) Option { return func(c *config) { c.slots = n } }

// withClock sets the clock used for the closing statistics blocks.
func withClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// Tap is a pcapng recorder. Entered, Left and Dropped may be called from any
// number of goroutines; they are no-ops on a nil *Tap, so the forwarder can
// call them unconditionally.
type Tap struct {
	cfg     config
	nifaces int
	ring    *ring

	stopped  atomic.Bool // limit reached or write failed: producers stop copying
	closed   atomic.Bool
	sleeping atomic.Bool // the writer is about to block on wake
	wake     chan struct{}
	done     chan struct{}
	exited   chan struct{}

	offered   []atomic.Uint64 // per interface: records handed to the tap
	lost      []atomic.Uint64 // per interface: records not written (ring full or over limit)
	ringFull  atomic.Uint64
	overLimit atomic.Uint64
	records   atomic.Uint64
	bytes     atomic.Uint64

	// Owned by the writer goroutine (and by Close after it exited).
	w        io.Writer        // the file
	ng       *pcapgo.NgWriter // writes the header and the closing statistics
	wbuf     []byte           // encoded packet blocks not yet written to w
	limit    uint64           // 0 = unlimited
	written  uint64           // bytes accounted so far (header and blocks in wbuf included)
	reserve  uint64           // room kept for the closing statistics blocks
	comments map[string]string
	err      error

	closeOnce sync.Once
	closeErr  error
}

// New writes a pcapng section header and one interface per direction (named
// after the egress interface, link type raw IP, nanosecond timestamps) to w
// and starts the writer goroutine. limit bounds the file size, headers and
// closing statistics included (0: no bound). Close flushes but does not close w.
func New(w io.Writer, limit units.Size, ifaces []string, opts ...Option) (*Tap, error) {
	cfg := config{snapLen: DefaultSnapLen, slots: DefaultSlots, now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	if len(ifaces) == 0 || len(ifaces) > 1<<16 {
		return nil, fmt.Errorf("tap: need 1 to 65536 interfaces, got %d", len(ifaces))
	}
	if cfg.snapLen < 64 || cfg.snapLen > 1<<18 {
		return nil, fmt.Errorf("tap: snap length %d: must be 64-262144 bytes", cfg.snapLen)
	}
	if cfg.slots < 2 || cfg.slots > 1<<24 {
		return nil, fmt.Errorf("tap: %d slots: must be 2-16777216", cfg.slots)
	}
	if limit < 0 {
		return nil, fmt.Errorf("tap: negative size limit %d", limit)
	}
	cw := &bytecount.Writer{W: w} // measures the header pcapgo writes
	section := pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{
		Hardware: pcapgo.DefaultNgWriterOptions.SectionInfo.Hardware,
		OS:       pcapgo.DefaultNgWriterOptions.SectionInfo.OS,
		// The comment tells a reader what the two records of a packet mean.
		Application: "wanlab proxy tap",
		Comment: "one interface per egress direction; inbound = entered the impairment engine, " +
			"outbound = left it, comment \"dropped: REASON\" = dropped by it",
	}}
	intf := func(name string) pcapgo.NgInterface {
		return pcapgo.NgInterface{
			Name:                name,
			Description:         "packets leaving through " + name + ", as the wanlab engine saw them",
			OS:                  pcapgo.DefaultNgInterface.OS,
			LinkType:            layers.LinkTypeRaw, // IPv4 and IPv6 share a direction
			SnapLength:          uint32(cfg.snapLen),
			TimestampResolution: 9, // if_tsresol: nanoseconds
		}
	}
	out, err := pcapgo.NewNgWriterInterface(cw, intf(ifaces[0]), section)
	if err != nil {
		return nil, fmt.Errorf("tap: writing pcapng header: %w", err)
	}
	for _, name := range ifaces[1:] {
		if _, err := out.AddInterface(intf(name)); err != nil {
			return nil, fmt.Errorf("tap: writing pcapng interface %q: %w", name, err)
		}
	}
	if err := out.Flush(); err != nil {
		return nil, fmt.Errorf("tap: writing pcapng header: %w", err)
	}
	t := &Tap{
		cfg:      cfg,
		nifaces:  len(ifaces),
		ring:     newRing(cfg.slots, cfg.snapLen),
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		exited:   make(chan struct{}),
		offered:  make([]atomic.Uint64, len(ifaces)),
		lost:     make([]atomic.Uint64, len(ifaces)),
		w:        w,
		ng:       out,
		wbuf:     make([]byte, 0, writeChunk+cfg.snapLen+maxEPBOverhead),
		limit:    uint64(limit),
		written:  uint64(cw.N),
		reserve:  uint64(isbLen * len(ifaces)),
		comments: make(map[string]string),
	}
	if t.limit != 0 && t.written+t.reserve > t.limit {
		return nil, fmt.Errorf("tap: size limit %s is smaller than the pcapng header and statistics (%d bytes)",
			limit, t.written+t.reserve)
	}
	t.bytes.Store(t.written)
	go t.run()
	return t, nil
}

// Entered records pkt as it entered the engine for direction dir (the index
// of its egress interface in New's list). The packet is copied; the caller
// keeps ownership of pkt.
func (t *Tap) Entered(dir int, now time.Time, pkt []byte) { t.add(dir, kindEntered, now, pkt, "") }

// Left records pkt as it left the engine for direction dir.
func (t *Tap) Left(dir int, now time.Time, pkt []byte) { t.add(dir, kindLeft, now, pkt, "") }

// Dropped records pkt dropped by the engine, with reason (e.g. "loss",
// "queue") in the record's comment. reason should be a constant: the tap keeps
// the string until the writer has used it.
func (t *Tap) Dropped(dir int, now time.Time, pkt []byte, reason string) {
	t.add(dir, kindDropped, now, pkt, reason)
}

func (t *Tap) add(dir int, k kind, now time.Time, pkt []byte, reason string) {
	if t == nil || uint(dir) >= uint(t.nifaces) || t.closed.Load() {
		return
	}
	t.offered[dir].Add(1)
	if t.stopped.Load() {
		t.overLimit.Add(1)
		t.lost[dir].Add(1)
		return
	}
	s, pos := t.ring.reserve()
	if s == nil {
		t.ringFull.Add(1)
		t.lost[dir].Add(1)
		return
	}
	r := &s.rec
	r.ts = now.UnixNano()
	r.origLen = uint32(len(pkt))
	r.capLen = uint32(copy(r.data, pkt))
	r.iface = uint16(dir)
	r.kind = k
	r.reason = reason
	t.ring.publish(s, pos)
	if t.sleeping.Load() && t.sleeping.CompareAndSwap(true, false) {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// Stats returns the counters so far.
func (t *Tap) Stats() Stats {
	if t == nil {
		return Stats{}
	}
	return Stats{
		Records:   t.records.Load(),
		Bytes:     t.bytes.Load(),
		RingFull:  t.ringFull.Load(),
		OverLimit: t.overLimit.Load(),
	}
}

// The writer polls the ring every pollInterval while records flow, so the
// forwarding path never pays for waking it; after idlePolls empty polls it
// parks, and the next producer wakes it through the wake channel.
const (
	pollInterval = time.Millisecond
	idlePolls    = 100
	// writeChunk is how many encoded bytes the writer gathers before one
	// write(2); it also writes whatever it has each time the ring is empty.
	writeChunk = 1 << 20
	// maxEPBOverhead bounds an EPB's bytes beyond the packet: the fixed
	// part, flags, a comment of up to maxCommentLen and the end option.
	maxEPBOverhead = epbFixed + 3 + optFlagsLen + 4 + maxCommentLen + 3 + optEndLen
	maxCommentLen  = 256
)

// run is the writer goroutine: it drains the ring in order into wbuf,
// writes wbuf out when it is full or the ring is empty, and polls or parks
// until Close.
func (t *Tap) run() {
	defer close(t.exited)
	poll := time.NewTimer(pollInterval)
	defer poll.Stop()
	idle := 0
	for {
		drained := false
		for s := t.ring.peek(); s != nil; s = t.ring.peek() {
			t.encode(&s.rec)
			t.ring.release(s)
			drained = true
		}
		if len(t.wbuf) > 0 {
			t.writeOut()
		}
		if drained {
			idle = 0
		} else {
			idle++
		}
		if idle < idlePolls {
			poll.Reset(pollInterval)
			select {
			case <-poll.C:
				continue
			case <-t.done:
				t.drainAndStop()
				return
			}
		}
		t.sleeping.Store(true)
		// A producer that published before seeing sleeping=true is visible
		// to this peek; one that publishes after will see it and wake us.
		if t.ring.peek() != nil {
			t.sleeping.Store(false)
			idle = 0
			continue
		}
		select {
		case <-t.wake:
			idle = 0
		case <-t.done:
			t.sleeping.Store(false)
			t.drainAndStop()
			return
		}
	}
}

func (t *Tap) drainAndStop() {
	for s := t.ring.peek(); s != nil; s = t.ring.peek() {
		t.encode(&s.rec)
		t.ring.release(s)
	}
	t.writeOut()
}

// encode appends r to wbuf as a pcapng Enhanced Packet Block (pcapng spec
// section 4.3), little-endian like the section header pcapgo wrote, with
// an epb_flags option (direction) and, for drops, an opt_comment.
// Encoding here instead of through pcapgo's NgWriter.WritePacketWithOptions
// saves its per-record allocations and small writes: on this 2-core machine
// the tap's writer competes with forwarding for CPU.
func (t *Tap) encode(r *record) {
	if t.err != nil || t.stopped.Load() {
		t.overLimit.Add(1)
		t.lost[r.iface].Add(1)
		return
	}
	flags := uint32(pcapgo.NgEpbFlagDirectionInbound)
	comment := ""
	switch r.kind {
	case kindLeft:
		flags = uint32(pcapgo.NgEpbFlagDirectionOutbound)
	case kindDropped:
		// A drop happens to a packet on its way in: inbound, like the record
		// of its arrival; the comment says what became of it.
		c, ok := t.comments[r.reason]
		if !ok {
			c = commentIntro + r.reason
			if len(c) > maxCommentLen {
				c = c[:maxCommentLen]
			}
			t.comments[r.reason] = c
		}
		comment = c
	}
	size := epbSize(int(r.capLen), len(comment))
	if t.limit != 0 && t.written+uint64(size)+t.reserve > t.limit {
		t.stopped.Store(true)
		t.overLimit.Add(1)
		t.lost[r.iface].Add(1)
		return
	}
	if len(t.wbuf)+size > cap(t.wbuf) {
		t.writeOut()
		if t.err != nil {
			t.lost[r.iface].Add(1)
			return
		}
	}
	le := binary.LittleEndian
	b := t.wbuf
	b = le.AppendUint32(b, blockTypeEPB)
	b = le.AppendUint32(b, uint32(size))
	b = le.AppendUint32(b, uint32(r.iface))
	ts := uint64(r.ts) // if_tsresol 9: nanoseconds since the epoch
	b = le.AppendUint32(b, uint32(ts>>32))
	b = le.AppendUint32(b, uint32(ts))
	b = le.AppendUint32(b, r.capLen)
	b = le.AppendUint32(b, r.origLen)
	b = append(b, r.data[:r.capLen]...)
	b = appendPad(b, int(r.capLen))
	b = le.AppendUint16(b, optEPBFlags)
	b = le.AppendUint16(b, 4)
	b = le.AppendUint32(b, flags)
	if comment != "" {
		b = le.AppendUint16(b, optComment)
		b = le.AppendUint16(b, uint16(len(comment)))
		b = append(b, comment...)
		b = appendPad(b, len(comment))
	}
	b = le.AppendUint32(b, 0) // opt_endofopt
	b = le.AppendUint32(b, uint32(size))
	t.wbuf = b
	t.written += uint64(size)
	t.records.Add(1)
	t.bytes.Store(t.written)
}

// Block and option codes (pcapng spec sections 3.5, 4.3).
const (
	blockTypeEPB = 6
	optComment   = 1
	optEPBFlags  = 2
)

// epbSize is the length of an EPB holding capLen packet bytes and an
// optional comment of commentLen bytes.
func epbSize(capLen, commentLen int) int {
	n := epbFixed + pad4(capLen) + optFlagsLen + optEndLen
	if commentLen > 0 {
		n += 4 + pad4(commentLen)
	}
	return n
}

func appendPad(b []byte, n int) []byte {
	for i := n; i&3 != 0; i++ {
		b = append(b, 0)
	}
	return b
}

// writeOut writes wbuf to the file in one call.
func (t *Tap) writeOut() {
	if t.err != nil || len(t.wbuf) == 0 {
		t.wbuf = t.wbuf[:0]
		return
	}
	if _, err := t.w.Write(t.wbuf); err != nil {
		t.fail(err)
	}
	t.wbuf = t.wbuf[:0]
}

func (t *Tap) fail(err error) {
	t.err = fmt.Errorf("tap: writing pcapng: %w", err)
	t.stopped.Store(true)
}

// Close stops recording, writes what the ring still holds and one interface
// statistics block per direction (isb_ifrecv = records offered, isb_ifdrop =
// records not written), and flushes. Calls to Entered, Left and Dropped after
// Close are ignored. It returns the first write error.
func (t *Tap) Close() error {
	if t == nil {
		return nil
	}
	t.closeOnce.Do(func() {
		t.closed.Store(true)
		close(t.done)
		<-t.exited
		if t.err == nil {
			now := t.cfg.now()
			for i := 0; i < t.nifaces; i++ {
				st := pcapgo.NgInterfaceStatistics{
					LastUpdate:      now,
					PacketsReceived: t.offered[i].Load(),
					PacketsDropped:  t.lost[i].Load(),
				}
				if err := t.ng.WriteInterfaceStats(i, st); err != nil {
					t.fail(err)
					break
				}
				t.written += isbLen
			}
			t.bytes.Store(t.written)
			if err := t.ng.Flush(); err != nil && t.err == nil {
				t.fail(err)
			}
		}
		t.closeErr = t.err
	})
	return t.closeErr
}

func pad4(n int) int { return (n + 3) &^ 3 }
