package control

import (
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
