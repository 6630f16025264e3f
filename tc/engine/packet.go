package engine

import "sync"

// Headroom is the space a Pool leaves in front of each packet's data, so a
// device backend can prepend a virtio-net header (10-12 bytes) or a tunnel
// header without copying.
const Headroom = 64

// DefaultBufSize is a Pool's buffer size when none is given: headroom plus
// the largest IP packet.
const DefaultBufSize = Headroom + 65535

// Packet is one IP packet travelling through a pipeline. Data is the IP
// packet (no link-layer header, as read from a TUN device); it is a slice
// of a pooled buffer with Headroom bytes free in front.
type Packet struct {
	// Data is the IP packet. Stages may modify bytes in place (ECN mark,
	// corruption) but never its length.
	Data []byte
	// Arrival is the arrival stamp in ns on the pipeline clock, set by the
	// caller once; every departure is computed from it.
	Arrival int64
	// Depart is the departure time in ns, set when Dequeue returns the
	// packet.
	Depart int64
	// Flags records what the engine did to the packet.
	Flags Flags
	// Seq is the arrival order within the pipeline (duplicates share their
	// original's Seq), for reorder accounting.
	Seq uint64
	// Queue is the caller's: the device queue the packet was read from, so
	// that it leaves through the same one (duplicates keep it).
	Queue uint16

	buf     []byte
	pool    *Pool
	due     int64 // when the packet leaves the stage it is in
	stageIn int64 // when it entered that stage (sojourn histogram)
	order   uint64
	chain   *chain
	heapIdx int
	// qnext links the packet in a queue discipline's list (pktList),
	// enq is when that qdisc took it (codel's enqueue time stamp).
	qnext *Packet
	enq   int64
	// segs, wire and segBuf describe a unit (SetUnit; segs 0: a plain
	// packet).
	segs, wire, segBuf uint32
}

// Flags tell what the engine did to a packet.
type Flags uint8

// Packet flags.
const (
	FlagDuplicate Flags = 1 << iota // this packet is a netem duplicate
	FlagCorrupted                   // one bit was flipped
	FlagECNMarked                   // CE was set instead of dropping it
	FlagReordered                   // netem sent it ahead of the queue (reorder)
)

// Buf returns the whole pooled buffer, headroom included: a backend reads
// into Buf()[Headroom:] and then sets Data = Buf()[Headroom:Headroom+n].
func (p *Packet) Buf() []byte { return p.buf }

// SetLen makes Data the n bytes after the headroom.
func (p *Packet) SetLen(n int) { p.Data = p.buf[Headroom : Headroom+n] }

// Pool recycles packets and their buffers. It is safe for concurrent use.
type Pool struct {
	size int
	p    sync.Pool
}

// NewPool returns a pool of packets whose buffers hold bufSize bytes
// (Headroom included); bufSize <= Headroom means DefaultBufSize.
func NewPool(bufSize int) *Pool {
	if bufSize <= Headroom {
		bufSize = DefaultBufSize
	}
	pl := &Pool{size: bufSize}
	pl.p.New = func() any {
		b := make([]byte, bufSize)
		return &Packet{buf: b, Data: b[Headroom:Headroom], pool: pl}
	}
	return pl
}

// Get returns a packet with empty Data and cleared metadata.
func (pl *Pool) Get() *Packet {
	p := pl.p.Get().(*Packet)
	p.Data = p.buf[Headroom:Headroom]
	return p
}

// Put returns p to its pool. The caller must not touch p afterwards.
func (pl *Pool) Put(p *Packet) {
	if p == nil || len(p.buf) < pl.size {
		return // not one of ours (a test's packet, a short buffer): let the GC have it
	}
	*p = Packet{buf: p.buf, pool: pl, Data: p.buf[Headroom:Headroom]}
	pl.p.Put(p)
}

// BufSize is the size of each buffer, headroom included.
func (pl *Pool) BufSize() int { return pl.size }

// clone copies p into a new packet from p's pool (or a fresh one).
func clone(p *Packet) *Packet {
	var c *Packet
	if p.pool != nil && len(p.Data)+Headroom <= p.pool.size {
		c = p.pool.Get()
	} else {
		b := make([]byte, Headroom+len(p.Data))
		c = &Packet{buf: b}
	}
	c.SetLen(len(p.Data))
	copy(c.Data, p.Data)
	c.Arrival = p.Arrival
	c.Seq = p.Seq
	c.Flags = p.Flags
	c.Queue = p.Queue
	return c
}

// release puts p back into its pool when it has one.
func release(p *Packet) {
	if p.pool != nil {
		p.pool.Put(p)
	}
}
