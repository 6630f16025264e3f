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

// fifoCodec is the codec of a fifo kind: limit reads a stage's, stage
// makes one of a dumped limit.
func fifoCodec(kind string, limit func(spec.Stage) uint64, stage func(uint32) spec.Stage) stageCodec {
	return stageCodec{
		encode: func(_ Clock, st spec.Stage) ([]byte, error) {
			l := limit(st)
			if l > math.MaxUint32 {
				return nil, fmt.Errorf("%s limit %d: too large", kind, l)
			}
			var w wire
			w.u32(uint32(l))
			return w.b, nil
		},
		decode: func(_ Clock, b []byte) (spec.Stage, error) {
			r := reader{b: b}
			l := r.u32()
			if r.err != nil {
				return nil, fmt.Errorf("%s options: %w", kind, r.err)
			}
			return stage(l), nil
		},
	}
}

func init() {
	registerCodec("pfifo", fifoCodec("pfifo", func(st spec.Stage) uint64 { return uint64(st.(*spec.PFIFO).PacketLimit()) },
		func(l uint32) spec.Stage { return &spec.PFIFO{Limit: spec.ZeroIfDefault(l, spec.DefaultFIFOPackets)} }))
	registerCodec("bfifo", fifoCodec("bfifo", func(st spec.Stage) uint64 { return uint64(st.(*spec.BFIFO).ByteLimit()) },
		func(l uint32) spec.Stage {
			return &spec.BFIFO{Limit: spec.ZeroIfDefault(units.Size(l), spec.DefaultFIFOBytes)}
		}))
}
