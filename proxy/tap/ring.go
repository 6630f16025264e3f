package tap

import "sync/atomic"

// record is one packet event as the forwarding path handed it over. Its data
// buffer is allocated once, at snap length, when the ring is built; producers
// copy into it and never allocate.
type record struct {
	ts      int64  // UnixNano of the event
	origLen uint32 // length of the packet on the wire
	capLen  uint32 // bytes copied into data (≤ snap length)
	iface   uint16 // pcapng interface index = direction
	kind    kind
	reason  string // drop reason, only for kindDropped; a constant from the caller
	data    []byte
}

// slot pairs a record with the sequence number of the bounded MPMC queue
// described by Dmitry Vyukov ("Bounded MPMC queue", 1024cores.net): a
// producer owns the slot whose seq equals its ticket, publishes by storing
// ticket+1, and the consumer frees it for the next lap by storing
// ticket+len(slots). Producers never wait for the consumer: a full ring is a
// failed enqueue, counted by the caller.
type slot struct {
	seq atomic.Uint64
	rec record
	_   [24]byte // keep neighbouring slots' sequence words off one cache line
}

// ring is a bounded multi-producer, single-consumer queue of records.
type ring struct {
	slots []slot
	mask  uint64
	_     [56]byte
	enq   atomic.Uint64 // next ticket for producers
	_     [56]byte
	deq   uint64 // next ticket for the consumer; only the writer goroutine touches it
}

func newRing(n, snapLen int) *ring {
	size := 1
	for size < n {
		size <<= 1
	}
	r := &ring{slots: make([]slot, size), mask: uint64(size - 1)}
	backing := make([]byte, size*snapLen)
	for i := range r.slots {
		r.slots[i].seq.Store(uint64(i))
		r.slots[i].rec.data = backing[i*snapLen : (i+1)*snapLen : (i+1)*snapLen]
	}
	return r
}

// reserve claims a free slot for a producer, or returns nil when the ring is
// full. The caller fills slot.rec and then calls publish.
func (r *ring) reserve() (*slot, uint64) {
	pos := r.enq.Load()
	for {
		s := &r.slots[pos&r.mask]
		seq := s.seq.Load()
		switch dif := int64(seq - pos); {
		case dif == 0:
			if r.enq.CompareAndSwap(pos, pos+1) {
				return s, pos
			}
			pos = r.enq.Load()
		case dif < 0:
			return nil, 0 // the consumer has not freed this slot yet: full
		default:
			pos = r.enq.Load() // another producer took it; retry with a fresh ticket
		}
	}
}

func (r *ring) publish(s *slot, pos uint64) { s.seq.Store(pos + 1) }

// peek returns the next published record for the consumer, or nil.
func (r *ring) peek() *slot {
	s := &r.slots[r.deq&r.mask]
	if s.seq.Load() != r.deq+1 {
		return nil
	}
	return s
}

// release hands the slot returned by peek back to producers.
func (r *ring) release(s *slot) {
	s.seq.Store(r.deq + r.mask + 1)
	r.deq++
}
