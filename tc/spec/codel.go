package spec

import (
	"math"
	"time"

	"github.com/wanlab/wanlab/units"
)

// CoDel is tc-codel(8) (net/sched/sch_codel.c). Zero fields are the
// kernel's defaults (codel_init, codel_params_init).
type CoDel struct {
	Limit    uint32        // packets; 0: 1000
	Target   time.Duration // acceptable standing queue delay; 0: 5ms
	Interval time.Duration // window the minimum delay is taken over; 0: 100ms
	// CEThreshold marks ECN-capable packets whose sojourn exceeds it
	// (DCTCP-style); 0: off.
	CEThreshold time.Duration
	ECN         bool // mark instead of dropping (codel's default: noecn)
}

// FQCoDel is tc-fq_codel(8) (net/sched/sch_fq_codel.c). Zero fields are
// the kernel's defaults (fq_codel_init).
type FQCoDel struct {
	Limit       uint32        // packets; 0: 10240
	Flows       uint32        // hash buckets; 0: 1024
	Target      time.Duration // 0: 5ms
	Interval    time.Duration // 0: 100ms
	Quantum     uint32        // DRR quantum in bytes; 0: psched_mtu, 1514
	MemoryLimit units.Size    // 0: 32mb
	CEThreshold time.Duration // 0: off
	NoECN       bool          // fq_codel marks by default; "noecn" turns it off
	DropBatch   uint32        // packets dropped at once from the fattest flow; 0: 64
}

// The kernel's defaults for codel and fq_codel.
const (
	DefaultCoDelLimit    = 1000
	DefaultCoDelTarget   = 5 * time.Millisecond
	DefaultCoDelInterval = 100 * time.Millisecond

	DefaultFQCoDelLimit       = 10 * 1024
	DefaultFQCoDelFlows       = 1024
	DefaultFQCoDelQuantum     = 1514
	DefaultFQCoDelMemoryLimit = units.Size(32 << 20)
	DefaultFQCoDelDropBatch   = 64

	// maxFQCoDelFlows and the quantum bounds are fq_codel_change's.
	maxFQCoDelFlows   = 65536
	minFQCoDelQuantum = 256
	maxFQCoDelQuantum = 1 << 20
)

// Kind returns "codel".
func (*CoDel) Kind() string { return "codel" }

// Kind returns "fq_codel".
func (*FQCoDel) Kind() string { return "fq_codel" }

// PacketLimit, TargetTime and IntervalTime are the effective values.
func (q *CoDel) PacketLimit() uint32 { return or(q.Limit, DefaultCoDelLimit) }

// TargetTime is the effective target.
func (q *CoDel) TargetTime() time.Duration { return or(q.Target, DefaultCoDelTarget) }

// IntervalTime is the effective interval.
func (q *CoDel) IntervalTime() time.Duration { return or(q.Interval, DefaultCoDelInterval) }

// PacketLimit is the effective limit.
func (q *FQCoDel) PacketLimit() uint32 { return or(q.Limit, DefaultFQCoDelLimit) }

// FlowCount is the effective number of flows.
func (q *FQCoDel) FlowCount() uint32 { return or(q.Flows, DefaultFQCoDelFlows) }

// TargetTime is the effective target.
func (q *FQCoDel) TargetTime() time.Duration { return or(q.Target, DefaultCoDelTarget) }

// IntervalTime is the effective interval.
func (q *FQCoDel) IntervalTime() time.Duration { return or(q.Interval, DefaultCoDelInterval) }

// QuantumBytes is the effective quantum.
func (q *FQCoDel) QuantumBytes() uint32 { return or(q.Quantum, DefaultFQCoDelQuantum) }

// MemoryBytes is the effective memory limit.
func (q *FQCoDel) MemoryBytes() units.Size { return or(q.MemoryLimit, DefaultFQCoDelMemoryLimit) }

// DropBatchSize is the effective drop batch.
func (q *FQCoDel) DropBatchSize() uint32 { return or(q.DropBatch, DefaultFQCoDelDropBatch) }

// options are codel's, in the order tc's codel_print_opt prints them;
// q_codel.c's keywords.
func (q *CoDel) options() []queueOption {
	return []queueOption{
		countOption("limit", &q.Limit, DefaultCoDelLimit, 1, math.MaxUint32, "PACKETS"),
		timeOption("target", &q.Target, DefaultCoDelTarget),
		timeOption("interval", &q.Interval, DefaultCoDelInterval),
		timeOption("ce_threshold", &q.CEThreshold, 0),
		flagOption("ecn", &q.ECN, "noecn"),
	}
}

// options are fq_codel's, in the order tc's fq_codel_print_opt prints
// them; q_fq_codel.c's keywords (ce_threshold_selector is not supported).
func (q *FQCoDel) options() []queueOption {
	return []queueOption{
		countOption("limit", &q.Limit, DefaultFQCoDelLimit, 1, math.MaxUint32, "PACKETS"),
		countOption("flows", &q.Flows, DefaultFQCoDelFlows, 1, maxFQCoDelFlows, "NUMBER"),
		countOption("quantum", &q.Quantum, DefaultFQCoDelQuantum, minFQCoDelQuantum, maxFQCoDelQuantum, "BYTES"),
		timeOption("target", &q.Target, DefaultCoDelTarget),
		timeOption("interval", &q.Interval, DefaultCoDelInterval),
		sizeOption("memory_limit", &q.MemoryLimit, DefaultFQCoDelMemoryLimit, 1, 1<<31),
		timeOption("ce_threshold", &q.CEThreshold, 0),
		flagOption("noecn", &q.NoECN, "ecn"),
		countOption("drop_batch", &q.DropBatch, DefaultFQCoDelDropBatch, 1, math.MaxUint32, "PACKETS"),
	}
}

// String prints the stage as tc's codel_print_opt does.
func (q *CoDel) String() string { return printQueueOptions("codel", q.options()) }

// String prints the stage as tc's fq_codel_print_opt does.
func (q *FQCoDel) String() string { return printQueueOptions("fq_codel", q.options()) }

func (q *CoDel) validate() error {
	return checkQueueOptions("codel", q.options())
}

func (q *FQCoDel) validate() error {
	return checkQueueOptions("fq_codel", q.options())
}

func init() {
	registerKind("codel", stageParser{parse: parseOptions[CoDel], queue: true})
	registerKind("fq_codel", stageParser{parse: parseOptions[FQCoDel], queue: true})
}
