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

// String prints "pfifo [limit N]".
func (q *PFIFO) String() string {
	a := queueArgs{"pfifo"}
	a.count("limit", q.Limit)
	return a.String()
}

// String prints "bfifo [limit BYTES]".
func (q *BFIFO) String() string {
	a := queueArgs{"bfifo"}
	a.size("limit", q.Limit)
	return a.String()
}

func (q *PFIFO) validate() error {
	if q == nil {
		return &ParseError{Token: "pfifo", Msg: "pfifo stage is nil"}
	}
	return nil
}

func (q *BFIFO) validate() error {
	if q == nil {
		return &ParseError{Token: "bfifo", Msg: "bfifo stage is nil"}
	}
	if q.Limit > math.MaxUint32 {
		return &ParseError{Token: "bfifo", Msg: fmt.Sprintf("bfifo: limit %s: must be below 4gb", q.Limit)}
	}
	return nil
}

// parseFIFO reads q_fifo.c's one keyword, "limit": packets for pfifo
// (get_size, so "1k" is 1024 packets, as q_fifo.c reads it), bytes for
// bfifo.
func parsePFIFO(kind token, toks []token) (Stage, error) {
	q := &PFIFO{}
	err := parseQueueArgs(kind, toks, keywords{
		"limit": overwrite(func(kw token, c *cursor) error {
			var v units.Size
			if _, err := sizeKeyword(&v, 0, 1, math.MaxUint32).read(kw, c); err != nil {
				return err
			}
			q.Limit = ZeroIfDefault(uint32(v), DefaultFIFOPackets)
			return nil
		}),
	})
	if err != nil {
		return nil, err
	}
	return q, nil
}

func parseBFIFO(kind token, toks []token) (Stage, error) {
	q := &BFIFO{}
	err := parseQueueArgs(kind, toks, keywords{
		"limit": sizeKeyword(&q.Limit, DefaultFIFOBytes, 1, math.MaxUint32),
	})
	if err != nil {
		return nil, err
	}
	return q, nil
}

func init() {
	registerKind("pfifo", stageParser{parse: parsePFIFO, queue: true})
	registerKind("bfifo", stageParser{parse: parseBFIFO, queue: true})
}
