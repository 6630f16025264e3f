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
	// expect adds st's share to what the spec predicts (x); child is the
	// queue discipline after st when it is st's child (IsChild), else nil.
	expect func(st, child spec.Stage, x *expectation)
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

// IsChild reports whether stage i+1 of s is the child qdisc of stage i: a
// queue discipline after a shaping stage ("tbf ... | fq_codel", tc's
// "parent 1:1"), which the shaper holds (shapedStage). The one place that
// decides it, for pipelines and for htb leaves (SplitLeafQueue).
func IsChild(s *spec.Spec, i int) bool {
	return i >= 0 && i+1 < len(s.Stages) && stageKinds[s.Stages[i].Kind()].shaper != nil && queueKinds[s.Stages[i+1].Kind()] != nil
}

// SplitLeafQueue splits a leaf spec ending in a queue discipline that is no
// shaper's child: that qdisc is the queue of what holds the chain (an htb
// leaf's cl->leaf.q), rest the stages before it. q is nil otherwise.
func SplitLeafQueue(sp *spec.Spec) (rest *spec.Spec, q spec.Stage) {
	if sp == nil {
		return nil, nil
	}
	n := len(sp.Stages)
	if n == 0 || queueKinds[sp.Stages[n-1].Kind()] == nil || IsChild(sp, n-2) {
		return sp, nil
	}
	return &spec.Spec{Stages: sp.Stages[:n-1]}, sp.Stages[n-1]
}
