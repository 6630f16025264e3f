package htb

import (
	"fmt"

	"github.com/wanlab/wanlab/tc/classify"
	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/spec"
)

// DirectClass is the engine class name of unclassified packets when the
// classes have no default: they pass unimpaired and unshaped, as htb's
// direct queue sends them.
const DirectClass = "direct"

// Setup is what an engine.Pipeline needs to run a spec.Classes: one
// engine class per leaf (class 0 is where unclassified packets go), the
// classifier, and the htb scheduler (nil without a tree).
type Setup struct {
	Classes    []engine.ClassSpec
	Classifier *classify.Classifier
	Scheduler  *Scheduler // nil when the classes have no htb rates
	// Now is the start of the tree (Options.Now), which the class
	// chains start at too (see Options below).
	Now int64
}

// Options of a Setup.
type Options struct {
	// Overhead is added to each packet's length in the htb buckets (14
	// for the Ethernet header a TUN device does not carry).
	Overhead int
	// Now is the time the tree starts at (buckets full).
	Now int64
}

// NewSetup builds the engine classes, classifier and scheduler of cs. A
// plain pipeline (spec.Classes.Pipeline) is the engine's one class,
// engine.DefaultClass, with neither classifier nor scheduler.
func NewSetup(cs *spec.Classes, opt Options) (*Setup, error) {
	s := &Setup{Now: opt.Now}
	if p, plain := cs.Pipeline(); plain {
		// The engine checks the pipeline as it builds it (engine.ErrBadSpec).
		s.Classes = []engine.ClassSpec{{Name: engine.DefaultClass, Spec: p}}
		return s, nil
	}
	if err := cs.Validate(); err != nil {
		return nil, err
	}
	index := map[string]int{}
	if cs.Default == "" {
		s.Classes = append(s.Classes, engine.ClassSpec{Name: DirectClass})
	}
	byID := make(map[string]*spec.Class, len(cs.Classes))
	for i := range cs.Classes {
		byID[cs.Classes[i].ID] = &cs.Classes[i]
	}
	var def *engine.ClassSpec
	for _, id := range cs.Leaves() {
		c := engine.ClassSpec{Name: id, Spec: byID[id].Spec}
		if id == cs.Default {
			def = &c // the default leaf is class 0
			continue
		}
		s.Classes = append(s.Classes, c)
	}
	if def != nil {
		s.Classes = append([]engine.ClassSpec{*def}, s.Classes...)
	}
	for i, c := range s.Classes {
		index[c.Name] = i
	}
	s.Classifier = &classify.Classifier{Default: 0}
	for _, f := range cs.Filters {
		s.Classifier.Rules = append(s.Classifier.Rules, classify.Rule{Match: f.Match, Class: index[f.FlowID]})
	}
	s.Classifier.Build()
	if !cs.HasTree() {
		return s, nil
	}
	cfg := Config{R2Q: cs.R2Q, Overhead: opt.Overhead}
	for _, c := range cs.Classes {
		cfg.Classes = append(cfg.Classes, ClassConfig{ID: c.ID, Parent: c.Parent, HTBClass: *c.HTB})
	}
	tree, err := New[*engine.Packet](cfg, opt.Now)
	if err != nil {
		return nil, err
	}
	sc := &Scheduler{tree: tree, leafOf: make([]int, len(s.Classes)), classOf: make([]int, len(tree.leaves))}
	for i, c := range s.Classes {
		sc.leafOf[i] = tree.Leaf(c.Name) // -1 for the direct class
		if sc.leafOf[i] < 0 {
			continue
		}
		sc.classOf[sc.leafOf[i]] = i
		// A leaf spec ending in a queue discipline: that qdisc is the
		// leaf's queue (the kernel's cl->leaf.q, or the queue of a netem
		// in front, which moves its due packets into its child), and the
		// stages before it run as the class's chain.
		// After a shaper (tbf) it is the shaper's child instead.
		if rest, last := engine.SplitLeafQueue(c.Spec); last != nil {
			lq, err := engine.NewLeafQueue(last, leafSeed(c.Name), opt.Now, i)
			if err != nil {
				return nil, fmt.Errorf("leaf %s: %w", c.Name, err)
			}
			tree.SetQueue(sc.leafOf[i], lq)
			sc.queues = append(sc.queues, lq)
			s.Classes[i].Spec = rest
		}
	}
	s.Scheduler = sc
	return s, nil
}

// leafSeed seeds a leaf qdisc's randomness (fq_codel's hash, pie's and
// red's drops) from its class id.
func leafSeed(id string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 0x100000001b3
	}
	return h
}

// SetDrop implements engine.SchedulerDropper: the leaves' qdiscs drop
// through f.
func (s *Scheduler) SetDrop(f func(p *engine.Packet, class int, reason engine.DropReason)) {
	for _, q := range s.queues {
		q.SetDrop(f)
	}
}

// Options fills an engine.Options' class fields from the setup, and its
// start with the tree's: the class chains (a trace, pie's updates, red's
// adaptation) start when the tree does.
func (s *Setup) Options(opt engine.Options) engine.Options {
	opt.Start = s.Now
	opt.Classes = s.Classes
	opt.Classifier, opt.Scheduler = s.engineParts()
	return opt
}

// engineParts are the classifier and scheduler as the engine takes them
// (nil interfaces for none).
func (s *Setup) engineParts() (engine.Classifier, engine.Scheduler) {
	var cl engine.Classifier
	var sched engine.Scheduler
	if s.Classifier != nil {
		cl = s.Classifier
	}
	if s.Scheduler != nil {
		sched = s.Scheduler
	}
	return cl, sched
}

// Install swaps s into pl at now (engine.Pipeline.Replace): a set built
// (NewSetup) before anything changes, so that a caller can check it first.
func (s *Setup) Install(pl *engine.Pipeline, now int64) error {
	cl, sched := s.engineParts()
	return pl.Replace(s.Classes, cl, sched, now)
}

// Scheduler is a Tree of engine packets behind engine.Scheduler, with a
// direct queue for the engine class that has no leaf.
type Scheduler struct {
	tree    *Tree[*engine.Packet]
	leafOf  []int // engine class → leaf, -1: direct
	classOf []int // leaf → engine class
	direct  ring[*engine.Packet]
	dtime   int64
	queues  []*engine.LeafQueue // the leaves' own qdiscs
}

// Enqueue implements engine.Scheduler.
func (s *Scheduler) Enqueue(class int, p *engine.Packet, now int64) bool {
	leaf := -1
	if class >= 0 && class < len(s.leafOf) {
		leaf = s.leafOf[class]
	}
	if leaf < 0 {
		s.direct.push(entry[*engine.Packet]{p: p, size: class})
		s.dtime = now
		return true
	}
	return s.tree.Enqueue(leaf, p, len(p.Data), now)
}

// Next implements engine.Scheduler.
func (s *Scheduler) Next() (int64, bool) {
	if s.direct.n > 0 {
		return s.dtime, true
	}
	return s.tree.Next()
}

// Dequeue implements engine.Scheduler: the direct queue first, as htb
// sends its direct packets before any class.
func (s *Scheduler) Dequeue(now int64) (*engine.Packet, int, bool) {
	if s.direct.n > 0 {
		e := s.direct.pop()
		return e.p, e.size, true
	}
	p, leaf, ok := s.tree.Dequeue(now)
	if !ok {
		return nil, 0, false
	}
	return p, s.classOf[leaf], true
}

// SchedulerStats implements engine.SchedulerStats: the classes'
// []ClassStats.
func (s *Scheduler) SchedulerStats(now int64) []engine.TreeClass { return s.tree.Stats(now) }

// Drain implements engine.Drainer.
func (s *Scheduler) Drain(fn func(p *engine.Packet, class int)) {
	for s.direct.n > 0 {
		e := s.direct.pop()
		fn(e.p, e.size)
	}
	s.tree.Drain(func(p *engine.Packet, leaf int) { fn(p, s.classOf[leaf]) })
}

// Tree returns the scheduler's class tree (for tests and reports; not
// safe while the pipeline runs).
func (s *Scheduler) Tree() *Tree[*engine.Packet] { return s.tree }

// EngineOptions fills opt's class fields with the setup of cs, its tree
// starting at opt.Start: engine.SimConfig's TreeOptions.
func EngineOptions(cs *spec.Classes, opt engine.Options) (engine.Options, error) {
	s, err := NewSetup(cs, Options{Now: opt.Start})
	if err != nil {
		return opt, err
	}
	return s.Options(opt), nil
}
