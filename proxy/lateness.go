package proxy

import (
	"sync/atomic"
	"time"

	"github.com/wanlab/wanlab/tc/engine"
)

// Lateness is how far behind the engine's departure times one
// direction's writes ran. The engine gives every packet its departure
// (a tbf's from its bucket); the release loop writes what is due when it
// wakes. A loop that wakes late (its thread not scheduled, a slow write
// on a loaded machine) writes everything due meanwhile at once: the
// long-run rate stays exact, but the packets leave as a burst of
// lateness × rate on top of the spec's own, which a kernel tbf (whose
// bucket holds at most burst at a late dequeue) would not send.
type Lateness struct {
	Iface string
	// Packets is the number written, Late1ms those written 1 ms or more
	// after their departure, Max the largest delay behind a departure.
	Packets, Late1ms uint64
	Max              time.Duration
}

// lateness accumulates a direction's Lateness between TakeLateness
// calls, and the histograms of the proxy's own latency on the release
// side (latency.go). Written by whoever holds wmu, read by TakeLateness
// and Stats.
type lateness struct {
	packets, late1ms atomic.Uint64
	max              atomic.Int64
	// Totals since the start, for Stats.
	totalPackets, totalLate1ms atomic.Uint64
	// added, dueToDequeue and dequeueToWritten are control.Latency's.
	added, dueToDequeue, dequeueToWritten latencyHistogram
}

// record counts pkts, dequeued at time dequeued and written by a write
// that returned at time written: one pass over the batch, the adds to
// the shared counters once per batch (a run of one bucket in the
// histograms).
func (l *lateness) record(dequeued, written int64, pkts []*engine.Packet) {
	var late, segs uint64
	var worst int64
	added := tally{h: &l.added}
	due := tally{h: &l.dueToDequeue}
	for _, pk := range pkts {
		n := uint64(pk.Segments()) // a unit counts as its segments
		segs += n
		d := written - pk.Depart
		worst = max(worst, d)
		if d >= int64(time.Millisecond) {
			late += n
		}
		added.addN(d, n)
		due.addN(dequeued-pk.Depart, n)
	}
	added.flush()
	due.flush()
	write := tally{h: &l.dequeueToWritten}
	write.addN(written-dequeued, segs)
	write.flush()
	l.packets.Add(segs)
	l.totalPackets.Add(segs)
	if late > 0 {
		l.late1ms.Add(late)
		l.totalLate1ms.Add(late)
	}
	storeMax(&l.max, worst)
}

func (l *lateness) take() (packets, late1ms uint64, worst time.Duration) {
	return l.packets.Swap(0), l.late1ms.Swap(0), time.Duration(max(l.max.Swap(0), 0))
}

// TakeLateness returns each direction's Lateness since the previous call
// (or the start) and starts counting again.
func (p *Forwarder) TakeLateness() [2]Lateness {
	var out [2]Lateness
	for i, d := range p.dirs {
		n, late, worst := d.late.take()
		out[i] = Lateness{Iface: d.iface, Packets: n, Late1ms: late, Max: worst}
	}
	return out
}

// recordPassed counts segs segments passed whole (passthrough.go), read
// at read and written by a write that returned at written: an empty spec
// departs them when they are read, so the proxy added what the write
// took.
func (l *lateness) recordPassed(read, written int64, segs uint64) {
	d := written - read
	for _, h := range []*latencyHistogram{&l.added, &l.dequeueToWritten} {
		t := tally{h: h}
		t.addN(d, segs)
		t.flush()
	}
	t := tally{h: &l.dueToDequeue}
	t.addN(0, segs)
	t.flush()
	l.packets.Add(segs)
	l.totalPackets.Add(segs)
	if d >= int64(time.Millisecond) {
		l.late1ms.Add(segs)
		l.totalLate1ms.Add(segs)
	}
	storeMax(&l.max, d)
}

// storeMax raises m to v if v is larger.
func storeMax(m *atomic.Int64, v int64) {
	for {
		cur := m.Load()
		if v <= cur || m.CompareAndSwap(cur, v) {
			return
		}
	}
}
