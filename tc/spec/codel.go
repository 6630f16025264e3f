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

// String prints the stage in the order tc's codel_print_opt does.
func (q *CoDel) String() string {
	a := queueArgs{"codel"}
	a.count("limit", q.Limit)
	a.time("target", q.Target)
	a.time("interval", q.Interval)
	a.time("ce_threshold", q.CEThreshold)
	a.flag("ecn", q.ECN)
	return a.String()
}

// String prints the stage in the order tc's fq_codel_print_opt does.
func (q *FQCoDel) String() string {
	a := queueArgs{"fq_codel"}
	a.count("limit", q.Limit)
	a.count("flows", q.Flows)
	a.count("quantum", q.Quantum)
	a.time("target", q.Target)
	a.time("interval", q.Interval)
	a.size("memory_limit", q.MemoryLimit)
	a.time("ce_threshold", q.CEThreshold)
	a.flag("noecn", q.NoECN)
	a.count("drop_batch", q.DropBatch)
	return a.String()
}

func (q *CoDel) validate() error {
	if q == nil {
		return &ParseError{Token: "codel", Msg: "codel stage is nil"}
	}
	if err := checkUsTimes("codel", namedTime{"target", q.Target}, namedTime{"interval", q.Interval}, namedTime{"ce_threshold", q.CEThreshold}); err != nil {
		return err
	}
	return nil
}

func (q *FQCoDel) validate() error {
	if q == nil {
		return &ParseError{Token: "fq_codel", Msg: "fq_codel stage is nil"}
	}
	if err := checkUsTimes("fq_codel", namedTime{"target", q.Target}, namedTime{"interval", q.Interval}, namedTime{"ce_threshold", q.CEThreshold}); err != nil {
		return err
	}
	if err := checkRange("fq_codel", "flows", uint64(q.Flows), 1, maxFQCoDelFlows); err != nil {
		return err
	}
	if err := checkRange("fq_codel", "quantum", uint64(q.Quantum), minFQCoDelQuantum, maxFQCoDelQuantum); err != nil {
		return err
	}
	return checkRange("fq_codel", "memory_limit", uint64(q.MemoryLimit), 1, 1<<31)
}

// parseCoDel reads q_codel.c's keywords.
func parseCoDel(kind token, toks []token) (Stage, error) {
	q := &CoDel{}
	err := parseQueueArgs(kind, toks, keywords{
		"limit":        countKeyword(&q.Limit, DefaultCoDelLimit, 1, math.MaxUint32, "PACKETS"),
		"target":       timeKeyword(&q.Target, DefaultCoDelTarget),
		"interval":     timeKeyword(&q.Interval, DefaultCoDelInterval),
		"ce_threshold": timeKeyword(&q.CEThreshold, 0),
		"ecn":          flagKeyword(&q.ECN, true),
		"noecn":        flagKeyword(&q.ECN, false),
	})
	if err != nil {
		return nil, err
	}
	return q, nil
}

// parseFQCoDel reads q_fq_codel.c's keywords (ce_threshold_selector is
// not supported).
func parseFQCoDel(kind token, toks []token) (Stage, error) {
	q := &FQCoDel{}
	var mem units.Size
	err := parseQueueArgs(kind, toks, keywords{
		"limit":        countKeyword(&q.Limit, DefaultFQCoDelLimit, 1, math.MaxUint32, "PACKETS"),
		"flows":        countKeyword(&q.Flows, DefaultFQCoDelFlows, 1, maxFQCoDelFlows, "NUMBER"),
		"target":       timeKeyword(&q.Target, DefaultCoDelTarget),
		"interval":     timeKeyword(&q.Interval, DefaultCoDelInterval),
		"quantum":      countKeyword(&q.Quantum, DefaultFQCoDelQuantum, minFQCoDelQuantum, maxFQCoDelQuantum, "BYTES"),
		"memory_limit": sizeKeyword(&mem, DefaultFQCoDelMemoryLimit, 1, 1<<31),
		"ce_threshold": timeKeyword(&q.CEThreshold, 0),
		"drop_batch":   countKeyword(&q.DropBatch, DefaultFQCoDelDropBatch, 1, math.MaxUint32, "PACKETS"),
		"ecn":          flagKeyword(&q.NoECN, false),
		"noecn":        flagKeyword(&q.NoECN, true),
	})
	if err != nil {
		return nil, err
	}
	q.MemoryLimit = mem
	return q, nil
}

func init() {
	registerKind("codel", stageParser{parse: parseCoDel, queue: true})
	registerKind("fq_codel", stageParser{parse: parseFQCoDel, queue: true})
}
