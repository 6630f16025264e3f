package proxy

import (
	"github.com/wanlab/wanlab/proxy/release"
	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/htb"
	"github.com/wanlab/wanlab/tc/spec"
)

// A direction's impairment (spec.Impairment) is a pipeline or a class
// set; with a class set the direction's pipeline classifies packets, runs
// each leaf's own stages and shares the link through an htb tree. What is
// here is the same for both: its canonical text and its warnings.
//
// The proxy never reads a file named in a spec: it runs as root and takes
// text from its control API, so "@FILE" would let any caller make it read
// (and echo in an error) a file the caller cannot. The command line of the
// user who typed "@FILE" resolves it before anything reaches the proxy.

// htbOverhead is what each packet is charged on top of its IP length in
// the htb buckets: none, so class rates count IP bytes as the engine's
// tbf does (a tc htb on an Ethernet interface also counts the 14 bytes of
// the link-layer header, which a TUN packet does not have).
const htbOverhead = 0

// newSetup builds the engine classes, classifier and htb scheduler of
// cs, checked, with nothing changed yet.
func newSetup(cs *spec.Classes) (*htb.Setup, error) {
	return htb.NewSetup(cs, htb.Options{Overhead: htbOverhead, Now: release.MonotonicNow()})
}

// specText is d's impairment in canonical form: a class set's line form,
// a plain pipeline's own.
func (d *direction) specText() string { return d.classes.Load().String() }

// specWarnings returns the warnings of d's spec in force: correlated
// probabilities that realize far less than they say (engine.Warnings),
// delays whose limit cannot hold the link's load (engine.DelayLimitWarnings)
// and queues that could hold more than the memory budget
// (engine.BudgetWarning), computed once per spec.
func (d *direction) specWarnings() []string {
	text := d.specText()
	d.warnMu.Lock()
	defer d.warnMu.Unlock()
	if text == d.warnText && d.warnings != nil {
		return d.warnings
	}
	cs := d.classes.Load()
	w := engine.WarningsOfClasses(cs)
	w = append(w, engine.DelayLimitWarningsOfClasses(cs)...)
	capacity := engine.ClassesQueueCapacity(cs)
	if d.budget != nil {
		if bw := engine.BudgetWarning(capacity, d.budget.Limit()); bw != "" {
			w = append(w, bw)
		}
	}
	if w == nil {
		w = []string{}
	}
	d.warnText, d.warnings = text, w
	return w
}
