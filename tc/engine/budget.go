package engine

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// MemoryBudget bounds the memory the packets inside one or more pipelines
// hold (both directions of a proxy share one): a packet arriving while
// the budget is spent is dropped and counted as a queue drop, so no spec
// ("delay 1e9s limit 4294967295") and no flood can grow the process until
// it runs out of memory. A packet costs its buffer's capacity plus its
// bookkeeping, whatever its length.
type MemoryBudget struct {
	limit int64
	held  atomic.Int64
}

// NewMemoryBudget returns a budget of limit bytes.
func NewMemoryBudget(limit units.Size) *MemoryBudget {
	return &MemoryBudget{limit: int64(limit)}
}

// Limit is the budget's size.
func (b *MemoryBudget) Limit() units.Size { return units.Size(b.limit) }

// Held is the memory of the packets inside now.
func (b *MemoryBudget) Held() units.Size { return units.Size(max(b.held.Load(), 0)) }

const packetOverhead = int64(unsafe.Sizeof(Packet{}))

// packetMemory is what p costs the budget; a unit what its segments
// would (Packet.SetUnit), so that the budget drops the same segments
// whether they come whole or one by one.
func packetMemory(p *Packet) int64 {
	if p.isUnit() {
		return int64(p.segs) * (int64(p.segBuf) + packetOverhead)
	}
	return int64(max(cap(p.buf), len(p.Data))) + packetOverhead
}

// MinQueueMemory is the smallest budget a command accepts.
const MinQueueMemory units.Size = 1 << 20

// DefaultQueueMemory is the budget of the proxy and simulate unless told:
// a quarter of the machine's memory (a 4 GiB host queues up to 1 GiB), 1
// GiB where the memory cannot be read.
func DefaultQueueMemory() units.Size {
	if m := physicalMemory(); m > 0 {
		return max(m/4, MinQueueMemory)
	}
	return 1 << 30
}

// assumedMTU is the packet size a packet limit is multiplied by in the
// budget warning.
const assumedMTU = 1500

// QueueCapacity is the most the queues of s can hold: each stage's limit
// (spec.Limited) in 1500-byte packets.
func QueueCapacity(s *spec.Spec) units.Size {
	if s == nil {
		return 0
	}
	var total units.Size
	for _, st := range s.Stages {
		if l, ok := st.(spec.Limited); ok {
			total += spec.LimitBytes(l, assumedMTU)
		}
	}
	return total
}

// ClassesQueueCapacity is QueueCapacity over a class set: each leaf's
// spec, and for a leaf without a queue of its own the htb leaf queue
// (its limit, 1000 packets by default).
func ClassesQueueCapacity(cs *spec.Classes) units.Size {
	if cs == nil {
		return 0
	}
	var total units.Size
	for _, c := range cs.LeafClasses() {
		total += QueueCapacity(c.Spec)
		if c.HTB != nil {
			limit := c.HTB.Limit
			if limit <= 0 {
				limit = 1000
			}
			total += units.Size(limit) * assumedMTU
		}
	}
	return total
}

// BudgetWarning is the one-line warning for queues that can hold more
// than budget ("" when they cannot): what happens then is said too.
func BudgetWarning(capacity, budget units.Size) string {
	if budget == 0 || capacity <= budget {
		return ""
	}
	return fmt.Sprintf("the queues' limits allow %s (limits times a %d-byte MTU), above the %s queue memory budget (--queue-memory): packets beyond the budget are dropped and counted as queue drops",
		humanSize(capacity), assumedMTU, budget.Human())
}

// humanSize is units.Size.Human, in TiB from 1 TiB up.
func humanSize(s units.Size) string {
	if s >= 1<<40 {
		return units.Sprintf("%.3g TiB", float64(s)/(1<<40))
	}
	return s.Human()
}
