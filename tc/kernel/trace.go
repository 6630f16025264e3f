package kernel

import (
	"errors"

	"github.com/wanlab/wanlab/tc/spec"
)

// errNoTraceQdisc is what encoding a trace stage returns: Linux has no
// qdisc that replays a capacity trace.
var errNoTraceQdisc = errors.New("trace: the kernel has no trace qdisc; replay a trace with wanlab proxy or wanlab simulate")

func init() {
	registerCodec("trace", stageCodec{
		encode: func(Clock, spec.Stage) ([]byte, error) { return nil, errNoTraceQdisc },
		decode: func(Clock, []byte) (spec.Stage, error) { return nil, errNoTraceQdisc },
	})
}
