package proxy

import (
	"strings"

	"github.com/wanlab/wanlab/proxy/release"
	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/htb"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// Traffic classes: a direction's spec text may be a class set
// (spec.IsClasses: htb/class/filter/leaf statements, tc class and filter
// commands, or YAML). The direction's pipeline then classifies packets,
// runs each leaf's own stages and shares the link through an htb tree.
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

// isClassesText reports whether a spec text is a class set.
func isClassesText(text string) bool {
	return spec.IsClasses(strings.TrimSpace(text))
}

// parseClassesText reads a class set (line form, tc commands or YAML).
func parseClassesText(text string) (*spec.Classes, error) {
	return spec.ParseClassesAuto([]byte(text))
}

// classOptions fills opt with the classes of cs.
func classOptions(cs *spec.Classes, opt engine.Options) (engine.Options, error) {
	s, err := htb.NewSetup(cs, htb.Options{Overhead: htbOverhead, Now: release.MonotonicNow()})
	if err != nil {
		return opt, err
	}
	return s.Options(opt), nil
}

// resolveClasses is what text makes of d's classes, built and checked
// with nothing changed yet: a whole set when d has none or text defines a
// root class (or is YAML), otherwise a change of the running set
// (spec.Classes.Patch). applyClasses then swaps it in atomically
// (engine.Pipeline.Replace).
func (d *direction) resolveClasses(text string) (*spec.Classes, *htb.Setup, error) {
	cur := d.classes.Load()
	var cs *spec.Classes
	var err error
	whole := cur == nil
	if !whole {
		if full, perr := parseClassesText(text); perr == nil && hasRoot(full) {
			whole, cs = true, full
		}
	}
	switch {
	case cs != nil:
	case whole:
		cs, err = parseClassesText(text)
	default:
		cs, err = cur.Patch(text)
	}
	if err != nil {
		return nil, nil, err
	}
	s, err := htb.NewSetup(cs, htb.Options{Overhead: htbOverhead, Now: release.MonotonicNow()})
	if err != nil {
		return nil, nil, err
	}
	return cs, s, nil
}

// applyClasses swaps the set resolveClasses built into d.
func (d *direction) applyClasses(cs *spec.Classes, s *htb.Setup) error {
	if err := s.Install(d.pl, release.MonotonicNow()); err != nil {
		return err
	}
	d.classes.Store(cs)
	return nil
}

func hasRoot(cs *spec.Classes) bool {
	for _, c := range cs.Classes {
		if c.Parent == "" {
			return true
		}
	}
	return false
}

// setPlain replaces d's classes by one plain spec.
func (d *direction) setPlain(s *spec.Spec) error {
	if err := d.pl.Replace([]engine.ClassSpec{{Name: "default", Spec: s}}, nil, nil, release.MonotonicNow()); err != nil {
		return err
	}
	d.classes.Store(nil)
	return nil
}

// specText is d's spec in canonical form: its classes' line form when it
// has classes.
func (d *direction) specText() string {
	if cs := d.classes.Load(); cs != nil {
		return cs.String()
	}
	return d.pl.Spec().String()
}

// specWarnings returns the warnings of d's spec in force: correlated
// probabilities that realize far less than they say (engine.Warnings)
// and queues that could hold more than the memory budget
// (engine.BudgetWarning), computed once per spec.
func (d *direction) specWarnings() []string {
	text := d.specText()
	d.warnMu.Lock()
	defer d.warnMu.Unlock()
	if text == d.warnText && d.warnings != nil {
		return d.warnings
	}
	var w []string
	var capacity units.Size
	if cs := d.classes.Load(); cs != nil {
		w = engine.WarningsOfClasses(cs)
		capacity = engine.ClassesQueueCapacity(cs)
	} else {
		w = engine.Warnings(d.pl.Spec())
		capacity = engine.QueueCapacity(d.pl.Spec())
	}
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
