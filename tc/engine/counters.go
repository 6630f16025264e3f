package engine

import "math"

// SojournBoundsNs are the upper bounds (inclusive, in ns) of the sojourn
// histogram's buckets; a last bucket counts everything above. They span
// 10 µs to 10 s, roughly 1-2.5-5 per decade, fixed so a histogram is a
// plain array updated without allocation.
var SojournBoundsNs = [...]int64{
	10e3, 25e3, 50e3, 100e3, 250e3, 500e3,
	1e6, 2.5e6, 5e6, 10e6, 25e6, 50e6, 100e6, 250e6, 500e6,
	1e9, 2.5e9, 5e9, 10e9,
}

// Histogram counts sojourn times in the fixed SojournBoundsNs buckets.
// Counts[i] is the number of samples in (bound[i-1], bound[i]];
// Counts[len(bounds)] holds the samples above the last bound.
type Histogram struct {
	Counts [len(SojournBoundsNs) + 1]uint64 `json:"counts"`
	SumNs  int64                            `json:"sum_ns"`
	Count  uint64                           `json:"count"`
}

func (h *Histogram) add(ns int64) { h.addN(ns, 1) }

// addN counts n samples of ns (a unit's segments).
func (h *Histogram) addN(ns int64, n uint64) {
	i := 0
	// Binary search over 19 bounds: 5 comparisons.
	lo, hi := 0, len(SojournBoundsNs)
	for lo < hi {
		m := (lo + hi) >> 1
		if ns <= SojournBoundsNs[m] {
			hi = m
		} else {
			lo = m + 1
		}
	}
	i = lo
	h.Counts[i] += n
	h.SumNs += ns * int64(n)
	h.Count += n
}

// Quantile is the upper bound in ns of the bucket holding the q-th
// quantile (0 < q <= 1) of the samples, or the largest bound for the
// last bucket; 0 without samples.
func (h *Histogram) Quantile(q float64) float64 {
	if h.Count == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(h.Count)))
	var n uint64
	for i, c := range h.Counts {
		n += c
		if n >= want {
			if i < len(SojournBoundsNs) {
				return float64(SojournBoundsNs[i])
			}
			break
		}
	}
	return float64(SojournBoundsNs[len(SojournBoundsNs)-1])
}

// Drops counts discarded packets by reason.
type Drops struct {
	// Loss: netem's loss model dropped it (not counted when ECN marked it).
	Loss uint64 `json:"loss"`
	// Queue: a queue limit was exceeded (netem limit packets, tbf limit
	// bytes), tail drop.
	Queue uint64 `json:"queue"`
	// Oversize: tbf dropped a packet larger than its bucket (burst or mtu),
	// as tbf_enqueue does for a non-GSO packet above max_size.
	Oversize uint64 `json:"oversize"`
	// AQM: an active queue manager (codel, fq_codel, pie, red) dropped
	// it by its control law rather than for a full queue.
	AQM uint64 `json:"aqm,omitempty"`
}

// Total is the sum of all reasons.
func (d Drops) Total() uint64 { return d.Loss + d.Queue + d.Oversize + d.AQM }

// Add adds o's counts to d's.
func (d *Drops) Add(o Drops) {
	d.Loss, d.Queue, d.Oversize, d.AQM = d.Loss+o.Loss, d.Queue+o.Queue, d.Oversize+o.Oversize, d.AQM+o.AQM
}

// Counters are one stage's (or one pipeline's) counters. They are written
// only under the pipeline's mutex and read by Snapshot under it.
type Counters struct {
	PacketsIn  uint64 `json:"packets_in"`
	BytesIn    uint64 `json:"bytes_in"`
	PacketsOut uint64 `json:"packets_out"`
	BytesOut   uint64 `json:"bytes_out"`
	Drops      Drops  `json:"drops"`
	ECNMarked  uint64 `json:"ecn_marked"`
	Duplicated uint64 `json:"duplicated"`
	Corrupted  uint64 `json:"corrupted"`
	// Reordered counts packets netem sent ahead of its queue ("reorder",
	// the kernel's requeues counter).
	Reordered uint64 `json:"reordered"`
	// QueuePackets and QueueBytes are the current depth (gauges).
	QueuePackets uint64 `json:"queue_packets"`
	QueueBytes   uint64 `json:"queue_bytes"`
	// Sojourn is the time from entering to leaving (the stage, or the
	// pipeline for its totals).
	Sojourn Histogram `json:"sojourn"`
}

// in, out and dropped count a unit (Packet.SetUnit) as its segments and
// their bytes on the wire.
func (c *Counters) in(p *Packet) {
	n, b := uint64(p.Segments()), uint64(p.WireLen())
	c.PacketsIn += n
	c.BytesIn += b
	c.QueuePackets += n
	c.QueueBytes += b
}

func (c *Counters) out(p *Packet, sojourn int64) {
	n, b := uint64(p.Segments()), uint64(p.WireLen())
	c.PacketsOut += n
	c.BytesOut += b
	c.QueuePackets -= n
	c.QueueBytes -= b
	c.Sojourn.addN(sojourn, n)
}

// dropped takes a packet that was counted in (and so queued) out again.
func (c *Counters) dropped(p *Packet, reason dropReason) {
	n := uint64(p.Segments())
	c.QueuePackets -= n
	c.QueueBytes -= uint64(p.WireLen())
	switch reason {
	case DropLoss:
		c.Drops.Loss += n
	case DropQueue:
		c.Drops.Queue += n
	case DropOversize:
		c.Drops.Oversize += n
	case DropAQM:
		c.Drops.AQM += n
	}
}

// dropReason names why a packet was discarded.
type dropReason = DropReason

// DropReason tells OnDrop hooks why a packet was discarded.
type DropReason uint8

// Drop reasons.
const (
	DropLoss DropReason = iota + 1
	DropQueue
	DropOversize
	DropAQM
)

// String returns "loss", "queue", "oversize" or "aqm".
func (r DropReason) String() string {
	switch r {
	case DropLoss:
		return "loss"
	case DropQueue:
		return "queue"
	case DropOversize:
		return "oversize"
	case DropAQM:
		return "aqm"
	}
	return "unknown"
}

// StageSnapshot is one stage's counters with its kind and canonical spec.
type StageSnapshot struct {
	Kind string `json:"kind"`
	Spec string `json:"spec"`
	// Queue marks a queue discipline (pfifo ... red) or a shaper holding
	// one as its child.
	Queue bool `json:"queue,omitempty"`
	Counters
	// XStats are a queue discipline's own statistics (codel, fq_codel,
	// pie, red), as tc -s prints them.
	XStats *XStats `json:"xstats,omitempty"`
}

// ClassSnapshot is one traffic class: its spec and per-stage counters.
type ClassSnapshot struct {
	Name   string          `json:"name"`
	Spec   string          `json:"spec"`
	Totals Counters        `json:"totals"`
	Stages []StageSnapshot `json:"stages"`
}

// Snapshot is a consistent copy of a pipeline's counters, for stats and
// metrics. Totals count packets entering and leaving the whole pipeline
// (duplicates enter as extra packets: PacketsIn counts what the caller
// enqueued plus Duplicated).
type Snapshot struct {
	Direction string          `json:"direction"`
	Totals    Counters        `json:"totals"`
	Classes   []ClassSnapshot `json:"classes"`
	// Swaps counts spec replacements since the pipeline was created.
	Swaps uint64 `json:"swaps"`
	// Scheduler is the class scheduler's own statistics (an htb tree's
	// classes, in configuration order), when it has any.
	Scheduler []TreeClass `json:"scheduler,omitempty"`
}

// TreeClass is one class of a class scheduler's tree (an htb class):
// its counters, buckets and mode. Inner classes count the packets of their
// descendants.
type TreeClass struct {
	ID      string `json:"id"`
	Parent  string `json:"parent,omitempty"`
	Leaf    bool   `json:"leaf"`
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
	// BorrowedPackets/Bytes were sent while this class was over its rate,
	// on an ancestor's spare tokens (the kernel's "borrowed" counts
	// packets).
	BorrowedPackets uint64 `json:"borrowed_packets"`
	BorrowedBytes   uint64 `json:"borrowed_bytes"`
	// LentPackets/Bytes were sent by a descendant on this class's tokens
	// ("lended").
	LentPackets uint64 `json:"lent_packets"`
	LentBytes   uint64 `json:"lent_bytes"`
	// DroppedQueue counts packets refused by a full leaf queue.
	DroppedQueue uint64 `json:"dropped_queue"`
	QueuePackets uint64 `json:"queue_packets"`
	QueueBytes   uint64 `json:"queue_bytes"`
	// Tokens and CTokens are the buckets in ns of transmission time at
	// rate and ceil ("tokens:" and "ctokens:" of tc -s class, in ns).
	Tokens  int64  `json:"tokens_ns"`
	CTokens int64  `json:"ctokens_ns"`
	Mode    string `json:"mode"`
	// XStats are a leaf queue discipline's own statistics (codel,
	// fq_codel, pie, red), as tc -s qdisc prints them for the leaf's qdisc.
	XStats *XStats `json:"xstats,omitempty"`
}
