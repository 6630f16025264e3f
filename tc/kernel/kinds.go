package kernel

import (
	"fmt"

	"github.com/wanlab/wanlab/tc/spec"
)

// stageCodec is what the kernel encoder knows about one qdisc kind: how to
// check and encode a stage of that kind as the TCA_OPTIONS tc sends, and
// how to read the options the kernel dumps back into a stage. Each kind
// registers itself from its own file (netem.go, tbf.go).
type stageCodec struct {
	encode func(c Clock, st spec.Stage) ([]byte, error)
	decode func(c Clock, b []byte) (spec.Stage, error)
}

var stageCodecs = map[string]stageCodec{}

func registerCodec(kind string, sc stageCodec) {
	if _, dup := stageCodecs[kind]; dup {
		panic("kernel: qdisc kind " + kind + " registered twice")
	}
	stageCodecs[kind] = sc
}

// encodeStage is the options of st for its kind's qdisc.
func encodeStage(c Clock, st spec.Stage) ([]byte, error) {
	sc, ok := stageCodecs[st.Kind()]
	if !ok {
		return nil, fmt.Errorf("unknown kind %q", st.Kind())
	}
	return sc.encode(c, st)
}

// decodeStage reads the options of a qdisc of kind back into a stage.
func decodeStage(c Clock, kind string, b []byte) (spec.Stage, error) {
	sc, ok := stageCodecs[kind]
	if !ok {
		return nil, fmt.Errorf("%s is not a stage wanlab encodes", kind)
	}
	return sc.decode(c, b)
}

// isStageKind reports whether kind is one of the registered stages.
func isStageKind(kind string) bool {
	_, ok := stageCodecs[kind]
	return ok
}
