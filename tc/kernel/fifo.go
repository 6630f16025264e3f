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

// encodeFIFO encodes a fifo's limit (kind names it in errors).
func encodeFIFO(kind string, limit uint64) ([]byte, error) {
	if limit > math.MaxUint32 {
		return nil, fmt.Errorf("%s limit %d: too large", kind, limit)
	}
	var w wire
	w.u32(uint32(limit))
	return w.b, nil
}

// decodeFIFO reads a fifo's dumped limit.
func decodeFIFO(kind string, b []byte) (uint32, error) {
	r := reader{b: b}
	limit := r.u32()
	if r.err != nil {
		return 0, fmt.Errorf("%s options: %w", kind, r.err)
	}
	return limit, nil
}

func init() {
	registerCodec("pfifo", stageCodec{
		encode: func(_ Clock, st spec.Stage) ([]byte, error) {
			return encodeFIFO("pfifo", uint64(st.(*spec.PFIFO).PacketLimit()))
		},
		decode: func(_ Clock, b []byte) (spec.Stage, error) {
			limit, err := decodeFIFO("pfifo", b)
			if err != nil {
				return nil, err
			}
			return &spec.PFIFO{Limit: spec.ZeroIfDefault(limit, spec.DefaultFIFOPackets)}, nil
		},
	})
	registerCodec("bfifo", stageCodec{
		encode: func(_ Clock, st spec.Stage) ([]byte, error) {
			return encodeFIFO("bfifo", uint64(st.(*spec.BFIFO).ByteLimit()))
		},
		decode: func(_ Clock, b []byte) (spec.Stage, error) {
			limit, err := decodeFIFO("bfifo", b)
			if err != nil {
				return nil, err
			}
			return &spec.BFIFO{Limit: spec.ZeroIfDefault(units.Size(limit), spec.DefaultFIFOBytes)}, nil
		},
	})
}
