package control

import (
	"math"
	"time"

	"github.com/wanlab/wanlab/proxy/tap"
	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/schedule"
)

// Stats is what GET /v1/stats returns: one entry per direction, in the order
// of the proxy's interfaces, plus the tap's counters when a capture runs.
type Stats struct {
	Directions []Direction `json:"directions"`
	Tap        *tap.Stats  `json:"tap,omitempty"`
	// LowLatency is the CPU wake-up latency request: "off", "unavailable",
	// "on", "auto (held)" or "auto (idle)".
	LowLatency string `json:"low_latency,omitempty"`
}

// Direction holds the counters of packets leaving through one interface.
type Direction struct {
	Iface string `json:"iface"` // egress interface
	Spec  string `json:"spec"`  // canonical spec in force
	// Warnings are the spec's one-line warnings (a correlated probability
	// that realizes far less than it says); the spec is applied as written.
	Warnings []string        `json:"warnings,omitempty"`
	Engine   engine.Snapshot `json:"engine"` // the impairment engine's counters (totals, per class and stage)
	// Schedule is where the direction's schedule stands (the step in
	// force and the next one), when it runs one.
	Schedule *schedule.State `json:"schedule,omitempty"`
	Device   DeviceCounters  `json:"device"` // the TUN device's counters
	// Latency is the proxy's own added latency and its parts, per
	// packet (a forwarder always fills it).
	Latency *Latency `json:"latency,omitempty"`
}

// DeviceCounters counts what happened at the TUN device of a direction,
// before the engine saw anything.
type DeviceCounters struct {
	Malformed   uint64 `json:"malformed"`    // truncated or malformed IP packets dropped
	ReadErrors  uint64 `json:"read_errors"`  // failed reads from the TUN
	WriteErrors uint64 `json:"write_errors"` // failed writes to the TUN
	// Written counts packets written back to the TUN; Late1ms those
	// written 1 ms or more after the departure the engine gave them (the
	// release loop woke late, so they left as a burst).
	Written uint64 `json:"written"`
	Late1ms uint64 `json:"late_1ms"`
}

// LatencyBoundsNs are the upper bounds (inclusive, in ns) of the buckets
// of the proxy's own latency histograms (Latency); a last bucket counts
// everything above. They run from 1 µs to 100 ms in the R10 series (1,
// 1.25, 1.6, 2, 2.5, 3.15, 4, 5, 6.3, 8 per decade, each about 1.26 × the
// one before), fixed so that a histogram is a plain array of counters the
// forwarder updates without allocating.
var LatencyBoundsNs = [...]int64{
	1e3, 1.25e3, 1.6e3, 2e3, 2.5e3, 3.15e3, 4e3, 5e3, 6.3e3, 8e3,
	10e3, 12.5e3, 16e3, 20e3, 25e3, 31.5e3, 40e3, 50e3, 63e3, 80e3,
	100e3, 125e3, 160e3, 200e3, 250e3, 315e3, 400e3, 500e3, 630e3, 800e3,
	1e6, 1.25e6, 1.6e6, 2e6, 2.5e6, 3.15e6, 4e6, 5e6, 6.3e6, 8e6,
	10e6, 12.5e6, 16e6, 20e6, 25e6, 31.5e6, 40e6, 50e6, 63e6, 80e6,
	100e6,
}

// Latency is where one direction's packets spent the proxy's own time,
// stamped at each step the proxy controls: the TUN read returning (the
// packet's arrival, which the engine computes its departure from), the
// batch entering the engine, the release loop (or the reader) dequeuing
// it, and the TUN write returning. Added is what the proxy adds beyond the
// spec: per packet (written − read) − (departure − arrival), which is
// written − departure since the engine's arrival is the read stamp; it is
// exactly DueToDequeue + DequeueToWritten of the same packet. The time
// before the engine (ReadToEnqueue) is inside the spec's delay and adds
// only when it exceeds it (an empty spec: the packet is due on arrival and
// DueToDequeue holds it). Not measured: the kernel's side of the TUN
// (routing to the TUN and from it onwards).
type Latency struct {
	// BoundsNs are the buckets' upper bounds (LatencyBoundsNs); every
	// histogram's Counts has one more entry, for the samples above.
	BoundsNs []int64 `json:"bounds_ns"`
	// Added counts packets written, from the departure the engine gave
	// them to the TUN write returning.
	Added LatencyHistogram `json:"added"`
	// ReadToEnqueue counts packets entering the engine (duplicates are
	// made inside it), from the TUN read returning to the engine holding
	// the batch (the length checks, the tap, the pipeline's lock).
	ReadToEnqueue LatencyHistogram `json:"read_to_enqueue"`
	// DueToDequeue is the release lateness: from the departure to the
	// engine handing the packet out (the release loop's wake-up, the
	// write lock).
	DueToDequeue LatencyHistogram `json:"due_to_dequeue"`
	// DequeueToWritten is from the dequeue to the TUN write of the
	// packet's batch returning (the batches written before it included).
	DequeueToWritten LatencyHistogram `json:"dequeue_to_written"`
}

// LatencyHistogram counts durations in the LatencyBoundsNs buckets.
// Counts[i] holds the samples in (bound[i-1], bound[i]], the last entry
// those above the last bound. The quantiles are bucket upper bounds (at
// most Max): with fixed buckets that bound is all one can say; Sum and Max
// are exact.
type LatencyHistogram struct {
	Packets uint64        `json:"packets"`
	Sum     time.Duration `json:"sum_ns"`
	Max     time.Duration `json:"max_ns"`
	P50     time.Duration `json:"p50_ns"`
	P90     time.Duration `json:"p90_ns"`
	P99     time.Duration `json:"p99_ns"`
	Counts  []uint64      `json:"counts"`
}

// NewLatencyHistogram builds a histogram from its bucket counts (one per
// LatencyBoundsNs bound and one above), their sum and the largest sample,
// with its packets and quantiles filled in.
func NewLatencyHistogram(counts []uint64, sum, maxSample time.Duration) LatencyHistogram {
	h := LatencyHistogram{Sum: sum, Max: maxSample, Counts: counts}
	for _, n := range counts {
		h.Packets += n
	}
	h.P50, h.P90, h.P99 = h.Quantile(0.5), h.Quantile(0.9), h.Quantile(0.99)
	return h
}

// Quantile is the upper bound of the bucket holding the q-th quantile
// (0 < q <= 1), capped at Max (the bucket above the last bound has no
// other); 0 without samples.
func (h LatencyHistogram) Quantile(q float64) time.Duration {
	if h.Packets == 0 {
		return 0
	}
	want := max(uint64(math.Ceil(q*float64(h.Packets))), 1)
	var n uint64
	for i, c := range h.Counts {
		n += c
		if n >= want && i < len(LatencyBoundsNs) {
			return min(time.Duration(LatencyBoundsNs[i]), h.Max)
		}
	}
	return h.Max
}

// Since is what h counted after prev, an earlier reading of the same
// histogram, with its quantiles recomputed. Max stays h's (since the
// start), an upper bound of the interval's.
func (h LatencyHistogram) Since(prev LatencyHistogram) LatencyHistogram {
	counts := make([]uint64, len(h.Counts))
	for i, c := range h.Counts {
		if i < len(prev.Counts) {
			c -= min(c, prev.Counts[i])
		}
		counts[i] = c
	}
	return NewLatencyHistogram(counts, h.Sum-prev.Sum, h.Max)
}
