package control

import "time"

// EngineSnapshot is the engine's counters for one direction. It stands in
// for proxy/engine's snapshot type until that package lands, and will become
// an alias of it.
type EngineSnapshot struct {
	PacketsIn    uint64            `json:"packets_in"`
	BytesIn      uint64            `json:"bytes_in"`
	PacketsOut   uint64            `json:"packets_out"`
	BytesOut     uint64            `json:"bytes_out"`
	Drops        map[string]uint64 `json:"drops"` // by reason: "loss", "queue", ...
	ECNMarked    uint64            `json:"ecn_marked"`
	Duplicated   uint64            `json:"duplicated"`
	Corrupted    uint64            `json:"corrupted"`
	Reordered    uint64            `json:"reordered"`
	QueuePackets uint64            `json:"queue_packets"`
	QueueBytes   uint64            `json:"queue_bytes"`
	Sojourn      Histogram         `json:"sojourn"`
}

// Histogram is a fixed-bucket histogram: Counts[i] counts values ≤ Bounds[i]
// (and > Bounds[i-1]); Counts[len(Bounds)] counts the rest.
type Histogram struct {
	Bounds []time.Duration `json:"bounds"`
	Counts []uint64        `json:"counts"`
	Sum    time.Duration   `json:"sum"`
}
