package engine

import "github.com/wanlab/wanlab/tc/spec"

// stageKind is what the engine knows about one tc kind: how to build its
// stage and what it predicts for Simulate's configured column. Each kind
// registers itself from its own file (netem.go, tbf.go), so a new kind is
// one new file here, not a case in every switch.
type stageKind struct {
	// build makes the stage for st (of this kind), seeded with seed
	// unless st carries its own, starting at time now, in pipeline pl.
	build func(st spec.Stage, seed uint64, now int64, pl *Pipeline) stage
	// expect adds st's share to what the spec predicts: e, the share of
	// packets that pass (pass) and the delay variance in ms^2.
	expect func(st spec.Stage, e *Expected, pass, variance *float64)
	// shaper, for a shaping kind (tbf), is its token logic alone: a stage
	// of the kind followed by a queue discipline ("tbf ... | fq_codel")
	// runs as a shapedStage with that qdisc as its child queue.
	shaper func(st spec.Stage, now int64) shaper
}

var stageKinds = map[string]stageKind{}

// registerStage adds a kind; a kind registered twice is a programming
// error.
func registerStage(kind string, k stageKind) {
	if _, dup := stageKinds[kind]; dup {
		panic("engine: stage kind " + kind + " registered twice")
	}
	stageKinds[kind] = k
}

// IsShaper reports whether kind is a shaping stage that takes a queue
// discipline after it as its child ("tbf ... | fq_codel").
func IsShaper(kind string) bool { return stageKinds[kind].shaper != nil }
