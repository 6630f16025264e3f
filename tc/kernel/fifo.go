package kernel

import (
	"fmt"
	"math"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// pfifo and bfifo take struct tc_fifo_qopt { __u32 limit; } as their
// whole TCA_OPTIONS, as q_fifo.c's fifo_parse_opt sends it, and
// fifo_dump sends it back. wanlab always sends the limit, the default
// included (the kernel's default depends on the device: txqueuelen and
// its MTU).

// EncodeFIFO encodes a pfifo or bfifo stage.
func EncodeFIFO(st spec.Stage) ([]byte, error) {
	var limit uint64
	switch q := st.(type) {
	case *spec.PFIFO:
		limit = uint64(q.PacketLimit())
	case *spec.BFIFO:
		limit = uint64(q.ByteLimit())
	default:
		return nil, fmt.Errorf("%s is not a fifo", st.Kind())
	}
	if limit > math.MaxUint32 {
		return nil, fmt.Errorf("%s limit %d: too large", st.Kind(), limit)
	}
	var w wire
	w.u32(uint32(limit))
	return w.b, nil
}

// DecodeFIFO reads a pfifo or bfifo's dumped options.
func DecodeFIFO(kind string, b []byte) (spec.Stage, error) {
	r := reader{b: b}
	limit := r.u32()
	if r.err != nil {
		return nil, fmt.Errorf("%s options: %w", kind, r.err)
	}
	if kind == "pfifo" {
		q := &spec.PFIFO{Limit: limit}
		if limit == spec.DefaultFIFOPackets {
			q.Limit = 0
		}
		return q, nil
	}
	q := &spec.BFIFO{Limit: units.Size(limit)}
	if q.Limit == spec.DefaultFIFOBytes {
		q.Limit = 0
	}
	return q, nil
}

func init() {
	for _, kind := range []string{"pfifo", "bfifo"} {
		registerCodec(kind, stageCodec{
			encode: func(_ Clock, st spec.Stage) ([]byte, error) { return EncodeFIFO(st) },
			decode: func(_ Clock, b []byte) (spec.Stage, error) { return DecodeFIFO(kind, b) },
		})
	}
}
