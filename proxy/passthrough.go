package proxy

import (
	"encoding/binary"
	"errors"
	"os"
	"sync/atomic"

	"github.com/wanlab/wanlab/proxy/device"
	"github.com/wanlab/wanlab/proxy/release"
	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/spec"
)

// Passing frames whole. A direction with an empty spec impairs nothing,
// so it has no reason to split what the kernel hands its TUN: a reader
// of the offload backend then reads each frame with its virtio-net
// header (device.Raw) and writes it back as it came, a GSO super-packet
// as one write where the engine path splits it into segments on the way
// in (wireguard-go's GSO split) and joins them again on the way out
// (GRO). Nothing else differs: the kernel forwards the same packets, and
// the counters, the latency histograms and the written count take each
// frame as the segments it holds. A direction passes frames whole while
// its spec is empty, it runs no class set and no tap records (the tap
// sees packets as the engine does), and every queue of its TUN can.
//
// A spec set while a reader waits for a frame takes effect for that frame
// too: setPass interrupts the wait (device.Raw.Interrupt), and the reader
// reads it through the engine.

// passCounters counts what a direction passed whole, as segments.
type passCounters struct {
	packets, bytes atomic.Uint64
}

// passable reports whether a direction with impairment im may pass
// frames whole.
func (d *direction) passable(im spec.Impairment) bool {
	if d.tap != nil || !im.IsEmpty() {
		return false
	}
	for _, r := range d.readers {
		if r.raw == nil {
			return false
		}
	}
	return len(d.readers) > 0
}

// setPass turns passing whole on or off; turning it off interrupts the
// readers waiting in a raw read, so that the next frame goes through the
// engine.
func (d *direction) setPass(on bool) {
	if d.pass.Swap(on) && !on {
		for _, r := range d.readers {
			r.raw.Interrupt()
		}
	}
}

// passFrames reads r's queue as whole frames, blocking for the first and
// reading on while more are queued (as drainReads does): a GSO
// super-packet is written back whole, the packets between them go
// through the engine as a batch (handleBatch), as read by Read, so that
// the writer's GRO still joins small packets into few writes. A batch is
// handed on before the super-packet that follows it, which keeps the
// order of the queue's packets. It returns false when the direction
// stops.
func (d *direction) passFrames(r *reader) bool {
	if r.frame == nil {
		r.frame = make([]byte, device.MaxFrame)
	}
	r.passing = true
	n := 0 // plain packets in r's buffers
	var now int64
	for first := true; first || n < len(r.rbufs) && device.Pending(r.dev); first = false {
		m, err := r.raw.ReadRaw(r.frame)
		if err != nil {
			d.handleBatch(r, n, now)
			switch {
			case d.stopping.Load() || errors.Is(err, os.ErrClosed):
				return false
			case errors.Is(err, os.ErrDeadlineExceeded):
				// Interrupted: the loop looks at pass again (it may be
				// back on already, which must not find reads stopped).
				r.raw.Resume()
			default:
				d.readErrors.Add(1)
			}
			return true
		}
		now = release.MonotonicNow()
		f := r.frame[:m]
		if m > device.VnetHdrLen && f[1]&^gsoECN == gsoNone {
			if !plainPacket(f, r.rbufs[n][engine.Headroom:]) {
				d.malformed.Add(1)
				continue
			}
			r.sizes[n], r.stamps[n] = m-device.VnetHdrLen, now
			n++
			continue
		}
		d.handleBatch(r, n, now)
		n = 0
		d.passWhole(r, f, now)
	}
	d.handleBatch(r, n, now)
	return true
}

// passWhole writes back frame f of r, read at read, as it came.
func (d *direction) passWhole(r *reader, f []byte, read int64) {
	if d.lat != nil {
		d.lat.Touch(read)
	}
	segs, bytes, ok := frameSegments(f)
	if !ok {
		d.malformed.Add(1)
		return
	}
	d.wmu.Lock()
	err := r.raw.WriteRaw(f)
	written := release.MonotonicNow()
	d.late.recordPassed(read, written, segs)
	d.wmu.Unlock()
	if err != nil {
		if !d.stopping.Load() {
			d.writeErrors.Add(1)
		}
		return
	}
	d.passed.packets.Add(segs)
	d.passed.bytes.Add(bytes)
}

// plainPacket copies the packet of frame f (one without GSO) to dst,
// finishing its checksum where the kernel left it partial (NEEDS_CSUM:
// the sum from csum_start, stored csum_offset further, as the kernel's
// skb_checksum_help does), and reports whether it fit.
func plainPacket(f, dst []byte) bool {
	pkt := f[device.VnetHdrLen:]
	if len(pkt) > len(dst) {
		return false
	}
	copy(dst, pkt)
	if f[0]&vnetCsum == 0 {
		return true
	}
	start := int(binary.LittleEndian.Uint16(f[6:]))
	at := start + int(binary.LittleEndian.Uint16(f[8:]))
	if at+2 > len(pkt) {
		return false
	}
	p := dst[:len(pkt)]
	sum := ^onesSum(p[start:])
	if sum == 0 {
		sum = 0xffff // CSUM_MANGLED_0
	}
	binary.BigEndian.PutUint16(p[at:], sum)
	return true
}

// onesSum is the 16-bit one's complement sum of b (RFC 1071), folded.
func onesSum(b []byte) uint16 {
	s := sumWords(b, 0)
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// virtio_net_hdr's gso_type values (include/uapi/linux/virtio_net.h).
const (
	gsoNone  = 0
	gsoTCPv4 = 1
	gsoTCPv6 = 4
	gsoECN   = 0x80
	vnetCsum = 1 // VIRTIO_NET_HDR_F_NEEDS_CSUM
)

// frameSegments reads a raw frame (virtio-net header, IP packet): the
// segments it stands for and their bytes on the wire as IP packets (each
// segment repeats the headers before the payload). ok is false for a
// frame whose packet is not a whole IP packet or whose GSO fields do not
// fit it.
func frameSegments(f []byte) (segs, bytes uint64, ok bool) {
	if len(f) <= device.VnetHdrLen {
		return 0, 0, false
	}
	pkt := f[device.VnetHdrLen:]
	l, ok := ipLength(pkt)
	if !ok || l != len(pkt) {
		return 0, 0, false
	}
	if f[1]&^gsoECN == gsoNone {
		return 1, uint64(l), true
	}
	gsoSize := int(binary.LittleEndian.Uint16(f[4:]))
	start := int(binary.LittleEndian.Uint16(f[6:]))
	if f[0]&vnetCsum == 0 || gsoSize == 0 || start >= l {
		return 0, 0, false
	}
	hdr := start + 8 // UDP (gso_type UDP, UDP_L4)
	if t := f[1] &^ gsoECN; t == gsoTCPv4 || t == gsoTCPv6 {
		if start+13 > l {
			return 0, 0, false
		}
		hdr = start + int(pkt[start+12]>>4)*4 // TCP's data offset
	}
	if hdr > l {
		return 0, 0, false
	}
	payload := l - hdr
	n := max((payload+gsoSize-1)/gsoSize, 1)
	return uint64(n), uint64(payload + n*hdr), true
}

// addPassed counts what d passed whole in its snapshot's totals and its
// first class's, where the engine counts what goes through it.
func (d *direction) addPassed(snap *engine.Snapshot) {
	n, b := d.passed.packets.Load(), d.passed.bytes.Load()
	if n == 0 {
		return
	}
	add := func(c *engine.Counters) {
		c.PacketsIn += n
		c.PacketsOut += n
		c.BytesIn += b
		c.BytesOut += b
	}
	add(&snap.Totals)
	if len(snap.Classes) > 0 {
		add(&snap.Classes[0].Totals)
	}
}
