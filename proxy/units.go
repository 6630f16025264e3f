package proxy

import (
	"errors"
	"os"

	"github.com/wanlab/wanlab/proxy/device"
	"github.com/wanlab/wanlab/proxy/release"
	"github.com/wanlab/wanlab/tc/engine"
)

// GSO super-packets through the engine. While a direction's pipeline
// carries units whole (engine.Pipeline.CarriesUnits: a fixed delay, a
// loss, any netem without a rate or slots), its readers read the offload
// backend's frames whole, as an empty spec's do (passthrough.go), and
// hand a GSO super-packet to the engine as one unit that knows its
// segments (engine.Packet.SetUnit): its packet in a buffer of d.units,
// its virtio-net header in the headroom in front. The engine draws every
// segment's fate and cuts the unit into the segments the backend's split
// would have made (gsoSegmenter) only where the segments' fates differ;
// a unit that stays whole is written back as it came, one write, where
// the engine path otherwise splits on the way in and joins again (GRO)
// on the way out. Frames without GSO go through the engine as plain
// packets, as read by Read.
//
// A unit read after a spec that cannot carry units was installed is cut
// into its segments as it enters the engine: the semantics never depend
// on which read took a frame.

// wholeUnits reports whether d's readers may hand GSO frames over as
// units: every queue reads raw frames, no tap records (it records the
// engine's packets as segments), and the pipeline carries units.
func (d *direction) wholeUnits() bool {
	if d.tap != nil || len(d.readers) == 0 {
		return false
	}
	for _, r := range d.readers {
		if r.raw == nil {
			return false
		}
	}
	return d.pl.CarriesUnits()
}

// readUnits reads r's queue as whole frames, blocking for the first and
// reading on while more are queued and the batch has room (as
// drainReads does), and enqueues them as one batch in the order read: a
// GSO frame of several segments as a unit, any other frame as a plain
// packet with its checksum finished. It returns false when the
// direction stops.
func (d *direction) readUnits(r *reader) bool {
	r.rbatch = r.rbatch[:0]
	var now int64
	for first := true; first || len(r.rbatch) < cap(r.rbatch) && device.Pending(r.dev); first = false {
		if r.unit == nil {
			r.unit = d.units.Get()
		}
		buf := r.unit.Buf()[engine.Headroom-device.VnetHdrLen:]
		m, err := r.raw.ReadRaw(buf)
		if err != nil {
			d.enqueueRead(r, now)
			switch {
			case d.stopping.Load() || errors.Is(err, os.ErrClosed):
				return false
			case errors.Is(err, os.ErrDeadlineExceeded):
				r.raw.Resume() // an interrupt meant for a passing read
			default:
				d.readErrors.Add(1)
			}
			return true
		}
		now = release.MonotonicNow()
		if pk := d.frameToPacket(r, buf[:m]); pk != nil {
			pk.Arrival, pk.Queue = now, r.queue
			r.rbatch = append(r.rbatch, pk)
		}
	}
	d.enqueueRead(r, now)
	return true
}

// frameToPacket makes frame f, read into r.unit's buffer, a packet for
// the engine: r.unit itself for a GSO frame of several segments (r.unit
// is then taken), a copy into a plain packet otherwise. Nil: f is
// malformed (counted).
func (d *direction) frameToPacket(r *reader, f []byte) *engine.Packet {
	if len(f) > device.VnetHdrLen && f[1]&^gsoECN != gsoNone {
		segs, wire, ok := frameSegments(f)
		if !ok {
			d.malformed.Add(1)
			return nil
		}
		if segs > 1 {
			// Each segment must fit a packet of d.pool: the kernel cuts
			// to the TUN's MTU, which the pool's buffers hold.
			if !segmentable(f, d.pool.BufSize()-engine.Headroom) {
				d.malformed.Add(1)
				return nil
			}
			u := d.units.fit(r, len(f)-device.VnetHdrLen)
			u.SetUnit(int(segs), int(wire), d.pool.BufSize())
			return u
		}
	}
	// A plain packet, or a GSO frame of one segment: the packet as
	// Read would have handed it over.
	pk := d.pool.Get()
	if len(f) <= device.VnetHdrLen || !plainPacket(f, pk.Buf()[engine.Headroom:]) {
		d.malformed.Add(1)
		d.pool.Put(pk)
		return nil
	}
	pk.SetLen(len(f) - device.VnetHdrLen)
	l, ok := ipLength(pk.Data)
	if !ok {
		d.malformed.Add(1)
		d.pool.Put(pk)
		return nil
	}
	pk.Data = pk.Data[:l]
	return pk
}

// unitPools are the buffers of units by size: powers of two from 4 KiB
// to the largest frame. A frame is read into the largest and a unit of
// fewer bytes copied into the smallest that holds it, so that a unit
// holds at most about twice the memory of its segments, which is what
// the memory budget charges it (engine.Packet.SetUnit).
type unitPools struct {
	pools []*engine.Pool // ascending; the last holds a whole frame
}

// Smallest unit buffer (headroom apart) and how many sizes double it.
const (
	smallestUnit = 4 << 10
	unitSizes    = 5 // 4, 8, 16, 32 KiB and a whole frame
)

func newUnitPools() *unitPools {
	u := &unitPools{}
	for i := range unitSizes - 1 {
		u.pools = append(u.pools, engine.NewPool(engine.Headroom+smallestUnit<<i))
	}
	u.pools = append(u.pools, engine.NewPool(engine.DefaultBufSize))
	return u
}

// Get returns a buffer for a whole frame.
func (u *unitPools) Get() *engine.Packet { return u.pools[len(u.pools)-1].Get() }

// get returns a buffer from the smallest size that holds a packet of n
// bytes.
func (u *unitPools) get(n int) *engine.Packet {
	for _, pl := range u.pools[:len(u.pools)-1] {
		if engine.Headroom+n <= pl.BufSize() {
			return pl.Get()
		}
	}
	return u.Get()
}

// fit takes r.unit, holding a frame of n bytes of packet after its
// virtio-net header, as the unit's packet: r.unit itself when no smaller
// buffer holds it (r.unit is then nil), else a copy, headroom header
// included, in the smallest that does.
func (u *unitPools) fit(r *reader, n int) *engine.Packet {
	for _, pl := range u.pools[:len(u.pools)-1] {
		if engine.Headroom+n <= pl.BufSize() {
			c := pl.Get()
			from := engine.Headroom - device.VnetHdrLen
			copy(c.Buf()[from:], r.unit.Buf()[from:engine.Headroom+n])
			c.SetLen(n)
			return c
		}
	}
	p := r.unit
	r.unit = nil
	p.SetLen(n)
	return p
}

// writeUnit writes unit u[0] back through raw whole, its virtio-net
// header as it was read.
func (d *direction) writeUnit(raw device.Raw, u []*engine.Packet) {
	pk := u[0]
	err := raw.WriteRaw(pk.Buf()[engine.Headroom-device.VnetHdrLen : engine.Headroom+len(pk.Data)])
	if err != nil && !d.stopping.Load() {
		d.writeErrors.Add(1)
	}
	d.late.record(d.dequeued, release.MonotonicNow(), u)
}
