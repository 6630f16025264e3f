package spec

import (
	"fmt"
	"math"

	"github.com/wanlab/wanlab/units"
)

// PFIFO is tc-pfifo(8): a tail-drop FIFO of Limit packets (sch_fifo.c's
// pfifo_enqueue).
type PFIFO struct {
	// Limit in packets; 0 means the kernel's default, the device's
	// txqueuelen (fifo_init), taken as 1000 (DefaultFIFOPackets).
	Limit uint32
}

// BFIFO is tc-bfifo(8): a tail-drop FIFO of Limit bytes (bfifo_enqueue).
type BFIFO struct {
	// Limit in bytes; 0 means the kernel's default, txqueuelen times
	// psched_mtu (DefaultFIFOBytes).
	Limit units.Size
}

// Defaults of pfifo and bfifo: fifo_init's txqueuelen (1000 on Ethernet
// and veth devices) and txqueuelen * psched_mtu (1500 + 14 bytes).
const (
	DefaultFIFOPackets = 1000
	DefaultFIFOBytes   = units.Size(1000 * 1514)
)

// Kind returns "pfifo".
func (*PFIFO) Kind() string { return "pfifo" }

// Kind returns "bfifo".
func (*BFIFO) Kind() string { return "bfifo" }

// PacketLimit is the effective limit in packets.
func (q *PFIFO) PacketLimit() uint32 { return or(q.Limit, DefaultFIFOPackets) }

// ByteLimit is the effective limit in bytes.
func (q *BFIFO) ByteLimit() units.Size { return or(q.Limit, DefaultFIFOBytes) }

// options are pfifo's one: "limit", in packets read with get_size (so
// "1k" is 1024 packets, as q_fifo.c reads it).
func (q *PFIFO) options() []queueOption {
	return []queueOption{{
		keys: keywords{"limit": overwrite(func(kw token, c *cursor) error {
			var v units.Size
			if _, err := sizeKeyword(&v, 0, 1, math.MaxUint32).read(kw, c); err != nil {
				return err
			}
			q.Limit = ZeroIfDefault(uint32(v), DefaultFIFOPackets)
			return nil
		})},
		print: func(a *queueArgs) { a.count("limit", q.Limit) },
	}}
}

// options are bfifo's one: "limit", in bytes.
func (q *BFIFO) options() []queueOption {
	return []queueOption{sizeOption("limit", &q.Limit, DefaultFIFOBytes, 1, math.MaxUint32)}
}

// String prints "pfifo [limit N]".
func (q *PFIFO) String() string { return printQueueOptions("pfifo", q.options()) }

// String prints "bfifo [limit BYTES]".
func (q *BFIFO) String() string { return printQueueOptions("bfifo", q.options()) }

func (q *PFIFO) validate() error {
	return nil
}

func (q *BFIFO) validate() error {
	if q.Limit > math.MaxUint32 {
		return &ParseError{Token: "bfifo", Msg: fmt.Sprintf("bfifo: limit %s: must be below 4gb", q.Limit)}
	}
	return nil
}

func init() {
	registerKind("pfifo", stageParser{parse: parseOptions[PFIFO], queue: true})
	registerKind("bfifo", stageParser{parse: parseOptions[BFIFO], queue: true})
}
