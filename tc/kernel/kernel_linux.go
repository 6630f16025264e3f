package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/tc/spec"
)

// record is what Apply leaves in the state dir: the tree it replaced
// (restored by Clear), the spec it applied, and the options the kernel
// dumped back for each stage right after (Show prints the spec as typed
// while the kernel still holds exactly those).
type record struct {
	Iface   string   `json:"iface"`
	Netns   string   `json:"netns,omitempty"`
	Prev    []qdisc  `json:"prev"`
	Spec    string   `json:"spec"`
	Handles []uint32 `json:"handles"`
	Dumped  [][]byte `json:"dumped,omitempty"`
}

func loadRecord(path string) (*record, error) {
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err := hostfile.CheckDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	b, err := hostfile.ReadInput(path, 1<<20)
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// The names Clear acts on must be names: a tampered record is refused.
	if err := host.CheckIfaceName(r.Iface); err != nil {
		return nil, fmt.Errorf("%s: iface: %w", path, err)
	}
	if err := host.CheckNetnsName(r.Netns); r.Netns != "" && err != nil {
		return nil, fmt.Errorf("%s: netns: %w", path, err)
	}
	return &r, nil
}

// putBackRecord makes path hold old again (nothing, when there was no
// record) after an apply that changed nothing.
func putBackRecord(path string, old *record) {
	if old != nil {
		old.save(path)
	} else {
		os.Remove(path)
	}
}

// rollback undoes a failed apply: the qdisc tree as it was (back), then
// the record as it was. It returns cause, with the restore's failure if
// any.
func rollback(back func() error, path string, old *record, cause error) error {
	if rerr := back(); rerr != nil {
		return fmt.Errorf("%w (restoring the previous qdiscs failed: %v)", cause, rerr)
	}
	putBackRecord(path, old)
	return cause
}

func (r *record) save(path string) error { return hostfile.WriteJSON(path, r, "state file") }

// inNS runs fn inside t's namespace with the interface's index.
func inNS(t Target, fn func(ifindex int) error) error {
	return nsrun.DoNamed(t.Netns, func() error {
		l, err := netlink.LinkByName(t.Iface)
		if err != nil {
			var nf netlink.LinkNotFoundError
			if errors.As(err, &nf) {
				return &NoInterfaceError{Iface: t.Iface}
			}
			return fmt.Errorf("interface %q: %w", t.Iface, err)
		}
		return fn(l.Attrs().Index)
	})
}

// chain returns the qdiscs of a netem/tbf chain rooted at the root qdisc,
// root first, or an error naming what else is there.
func chain(tree []qdisc) ([]qdisc, error) {
	r, ok := root(tree)
	if !ok || isDefault(r) {
		return nil, nil
	}
	return chainFrom(tree, r)
}

// chainFrom returns the netem/tbf chain that starts at q (a root or a
// class tree's leaf qdisc), q first.
func chainFrom(tree []qdisc, q qdisc) ([]qdisc, error) {
	var out []qdisc
	for cur := q; ; {
		if !isStageKind(cur.Kind) {
			return nil, fmt.Errorf("%s is not a netem/tbf chain", cur)
		}
		out = append(out, cur)
		var next []qdisc
		for _, q := range tree {
			if !q.Class && q.Parent != tcHRoot && q.Parent>>16 == cur.Handle>>16 {
				next = append(next, q)
			}
		}
		if len(next) == 0 {
			return out, nil
		}
		if len(next) > 1 {
			return nil, fmt.Errorf("%s has %d children, not a chain", cur, len(next))
		}
		cur = next[0]
	}
}

// pickHandles chooses a qdisc major number per stage, as the seeds do (1:,
// 10:, 20:...) unless the current tree uses one of them.
func pickHandles(n int, tree []qdisc) []uint32 {
	used := map[uint32]bool{}
	for _, q := range tree {
		used[q.Handle>>16] = true
	}
	for _, base := range []uint32{0, 0x5700, 0x5800, 0x5900} {
		hs := make([]uint32, n)
		free := true
		for i := range hs {
			major := base + uint32(i)*0x10
			if base == 0 {
				major = max(1, uint32(i)*0x10)
			}
			hs[i] = major << 16
			free = free && !used[major]
		}
		if free {
			return hs
		}
	}
	return nil
}

// tcObject is one thing to create: a qdisc, a class or a filter.
type tcObject struct {
	q      qdisc
	filter bool
	info   uint32 // filters: tcm_info, prio << 16 | ethertype (network order)
	what   string // for a tree's errors: "leaf 1:3 netem delay 10ms", "filter dst 10.0.2.0/24 flowid 1:2"
	needs  string // the kernel feature it needs: "htb", "netem", "tbf", "u32"
}

// plan is every object one Apply creates, root first: a pipeline's chain
// of qdiscs (planPipeline), or a class tree's qdiscs, classes and filters
// (planClasses). Apply treats both alike but where chain says otherwise.
type plan struct {
	objs []tcObject
	text string // the impairment's canonical text, for the record
	// chain is the pipeline a chain plan encodes: its handles are chosen
	// beside the device's tree (place), and the kernel's copy is read
	// back (readBack). Nil for a class tree.
	chain *spec.Spec
}

// planPipeline encodes s's stages as a root chain, root first; place
// gives them their handles once the device's tree is known.
func planPipeline(clock Clock, s *spec.Spec) (*plan, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	p := &plan{text: s.String(), chain: s}
	for _, st := range s.Stages {
		opt, err := encodeStage(clock, st)
		if err != nil {
			return nil, err
		}
		p.objs = append(p.objs, tcObject{q: qdisc{Kind: st.Kind(), Options: opt}, needs: st.Kind()})
	}
	return p, nil
}

// place gives a chain's stages free handles beside tree, each stage under
// the one before (netem and tbf have one class, :1), and returns them. A
// class tree's handles are its own: place leaves them and returns none.
func (p *plan) place(tree []qdisc) ([]uint32, error) {
	if p.chain == nil {
		return nil, nil
	}
	hs := pickHandles(len(p.objs), tree)
	if hs == nil {
		return nil, errors.New("no free qdisc handles")
	}
	p.chainAt(hs)
	return hs, nil
}

// chainAt gives a chain's stages the handles hs, each stage under the one
// before.
func (p *plan) chainAt(hs []uint32) {
	for i := range p.objs {
		p.objs[i].q.Handle = hs[i]
		p.objs[i].q.Parent = tcHRoot
		if i > 0 {
			p.objs[i].q.Parent = hs[i-1] | 1
		}
	}
}

// planImpairment is the plan of im: a pipeline's chain, or a class tree
// the kernel has been found able to build (probe).
func planImpairment(clock Clock, im spec.Impairment) (*plan, error) {
	if s, plain := im.Pipeline(); plain {
		return planPipeline(clock, s) // tc's root chain, as 'tc qdisc add' builds it: no htb around it
	}
	p, err := planClasses(clock, im.Classes)
	if err != nil {
		return nil, err
	}
	if err := probe(p); err != nil {
		return nil, err
	}
	return p, nil
}

// Apply configures im on the interface as the kernel's qdiscs, replacing
// its root qdisc: a pipeline as a chain of its stages, root first; a class
// tree as an htb root with one htb class per class, each leaf's netem/tbf
// chain under it and u32 filters. The first Apply records the tree it
// replaces for Clear; no impairment is Clear. If any part fails, the
// interface is left as it was. A kind the kernel lacks is reported as a
// *NoKindError for a pipeline; a tree is first built on the loopback of a
// scratch namespace, and every part the kernel lacks is named together in
// a *MissingError.
func Apply(t Target, im spec.Impairment) error {
	t, err := t.prepare()
	if err != nil {
		return err
	}
	if im.IsEmpty() {
		return Clear(t)
	}
	clock, _ := ReadClock("/proc/net/psched")
	p, err := planImpairment(clock, im)
	if err != nil {
		return err
	}
	return apply(t, clock, p)
}

// apply builds p on t's interface (Apply's work once the plan is made).
func apply(t Target, clock Clock, p *plan) error {
	path := t.recordPath()
	old, err := loadRecord(path)
	if err != nil {
		return err
	}
	return inNS(t, func(ifindex int) error {
		cur, err := dumpTree(ifindex)
		if err != nil {
			return err
		}
		rec := &record{Iface: t.Iface, Netns: t.Netns, Prev: cur, Spec: p.text}
		// What a failed Apply puts back: the tree as it is now, except
		// that our own earlier chain or tree is rebuilt from its spec,
		// because the kernel dumps neither netem's distribution tables
		// nor a tree's filters. Replacing it keeps the record of what
		// the first Apply replaced, so Clear restores the user's tree.
		back := func() error { return restoreTree(ifindex, cur) }
		if prev, isOurs := recorded(clock, cur, old); isOurs {
			rec.Prev = old.Prev
			if prev != nil {
				back = func() error { return prev.rebuild(ifindex) }
			}
		}
		if rec.Handles, err = p.place(cur); err != nil {
			return err
		}
		// Recorded before the change, so a crash leaves a way back.
		if err := rec.save(path); err != nil {
			return err
		}
		undo := func(cause error) error { return rollback(back, path, old, cause) }
		// Kernels with the duplication fix of sch_netem (6.1.y stable
		// and later) refuse a netem beside another in the device's tree
		// when either duplicates, the root it would replace included:
		// take the old tree down first. (A tree's htb root replaces the
		// old tree before any netem leaf is added.) So must a tree whose
		// root handle the device's tree uses: the kernel takes a replace
		// of that qdisc for a change, which htb does not support ("Change
		// operation not supported") and another kind refuses.
		cleared := false
		n, dup := netemsIn(cur)
		if p.chain != nil && n > 0 && (dup || duplicates(p.chain)) || p.chain == nil && handleUsed(cur, p.objs[0].q.Handle) {
			if err := deleteRoot(ifindex); err != nil {
				return undo(err)
			}
			cleared = true
		}
		if err := p.build(ifindex, func(i int, o tcObject, err error) error {
			err = p.addError(o, err)
			if i == 0 && !cleared { // the root was refused: nothing changed
				putBackRecord(path, old)
				return err
			}
			return undo(err)
		}); err != nil {
			return err
		}
		if p.chain == nil {
			return nil // a tree is not read back
		}
		if rec.Dumped, err = p.readBack(ifindex); err != nil {
			return undo(err)
		}
		return rec.save(path)
	})
}

// build creates p's objects on ifindex, the root replacing whatever is
// there; the first the kernel refuses goes to fail, whose answer build
// returns.
func (p *plan) build(ifindex int, fail func(i int, o tcObject, err error) error) error {
	for i, o := range p.objs {
		if err := o.add(ifindex, i == 0); err != nil {
			return fail(i, o, err)
		}
	}
	return nil
}

// rebuild puts p back after a failed apply: the device's root goes, then
// p's objects are made again.
func (p *plan) rebuild(ifindex int) error {
	if err := deleteRoot(ifindex); err != nil {
		return err
	}
	return p.build(ifindex, func(_ int, _ tcObject, err error) error { return err })
}

// handleUsed reports whether a qdisc of tree has handle h.
func handleUsed(tree []qdisc, h uint32) bool {
	for _, q := range tree {
		if !q.Class && q.Handle == h {
			return true
		}
	}
	return false
}

// recorded says whether the device's tree is still what rec applied (a
// chain: ours; a class tree: holds) and returns its plan, re-made from
// its spec with its handles, or nil when the spec no longer plans.
func recorded(clock Clock, tree []qdisc, rec *record) (*plan, bool) {
	if rec == nil {
		return nil, false
	}
	if !spec.IsClasses(rec.Spec) {
		if !ours(tree, rec) {
			return nil, false
		}
		sp, err := spec.Parse(rec.Spec)
		if err != nil {
			return nil, true
		}
		p, err := planPipeline(clock, sp)
		if err != nil || len(p.objs) != len(rec.Handles) {
			return nil, true
		}
		p.chainAt(rec.Handles)
		return p, true
	}
	cs, err := spec.ParseClasses(rec.Spec)
	if err != nil {
		return nil, false
	}
	p, err := planClasses(clock, cs)
	if err != nil || !p.holds(tree) {
		return nil, false
	}
	return p, true
}

// holds reports whether tree is made of p's qdiscs and htb classes, by
// kind, handle and parent, besides the kernel's default qdiscs and the
// classes qdiscs make themselves (tbf's :1). Options are not compared: a
// tree's counters sit in htb's.
func (p *plan) holds(tree []qdisc) bool {
	type place struct {
		class          bool
		handle, parent uint32
		kind           string
	}
	want := map[place]bool{}
	for _, o := range p.objs {
		if !o.filter {
			want[place{o.q.Class, o.q.Handle, o.q.Parent, o.q.Kind}] = true
		}
	}
	n := 0
	for _, q := range tree {
		if !q.Class && isDefault(q) || q.Class && !userClasses[q.Kind] {
			continue
		}
		k := place{q.Class, q.Handle, q.Parent, q.Kind}
		if q.Class && q.Parent == tcHRoot {
			k.parent = q.Handle &^ 0xffff // a top-level class: its qdisc's
		}
		if !want[k] {
			return false
		}
		n++
	}
	return n == len(want)
}

// addError is what Apply reports for an object the kernel refused: for a
// chain, a kind it lacks as a *NoKindError; for a tree, whose kinds the
// probe has checked, the error with the object named.
func (p *plan) addError(o tcObject, err error) error {
	if p.chain != nil && errors.Is(err, unix.ENOENT) {
		return &NoKindError{Kind: o.q.Kind}
	}
	if errors.Is(err, unix.EPERM) {
		err = fmt.Errorf("%w (needs root or CAP_NET_ADMIN)", err)
	}
	if o.what != "" {
		err = fmt.Errorf("%s: %w", o.what, err)
	}
	return err
}

// readBack reads the chain the kernel holds after an apply and checks it
// is the plan's: as many stages, each netem stage kept whole (checkKept).
// It returns the options each stage dumps, for the record.
func (p *plan) readBack(ifindex int) ([][]byte, error) {
	now, err := dumpTree(ifindex)
	if err != nil {
		return nil, err
	}
	ch, err := chain(now)
	if err != nil {
		return nil, err
	}
	if len(ch) != len(p.chain.Stages) {
		return nil, fmt.Errorf("kernel holds %d stages after apply, want %d", len(ch), len(p.chain.Stages))
	}
	var dumped [][]byte
	for i, q := range ch {
		if n, ok := p.chain.Stages[i].(*spec.Netem); ok {
			if err := checkKept(i+1, n, q.Options); err != nil {
				return nil, err
			}
		}
		dumped = append(dumped, q.Options)
	}
	return dumped, nil
}

// duplicates reports whether a stage of s duplicates packets.
func duplicates(s *spec.Spec) bool {
	for _, st := range s.Stages {
		if n, ok := st.(*spec.Netem); ok && n.Duplicate > 0 {
			return true
		}
	}
	return false
}

// netemsIn counts the netem qdiscs of tree and says whether one of them
// duplicates.
func netemsIn(tree []qdisc) (n int, duplicating bool) {
	for _, q := range tree {
		if q.Kind == "netem" && !q.Class {
			n++
			if d, err := DecodeNetem(q.Options); err == nil && d.Duplicate > 0 {
				duplicating = true
			}
		}
	}
	return n, duplicating
}

// ours reports whether the chain on the device is the one rec applied.
func ours(tree []qdisc, rec *record) bool {
	ch, err := chain(tree)
	if err != nil || len(ch) != len(rec.Handles) || len(ch) != len(rec.Dumped) {
		return false
	}
	for i, q := range ch {
		if q.Handle != rec.Handles[i] || !bytes.Equal(q.Options, rec.Dumped[i]) {
			return false
		}
	}
	return true
}

// Show reads the interface's root qdisc chain back as a canonical spec:
// "" when the kernel's default qdisc is there. While the chain is exactly
// what Apply configured, the spec prints as applied (with latency, cells
// and seed as typed); otherwise it is decoded from the kernel's values. A
// class tree prints as a class set: as applied while it is ours, else
// decoded when it is a plain htb tree (decodeTree).
func Show(t Target) (string, error) {
	out, _, err := view(t, true)
	return out, err
}

// view reads what the interface holds as Show prints it (when text is
// asked for) and the qdiscs, and a class tree's classes, whose counters
// Stats gives: the root chain, or a class tree Show can print; anything
// else is the chain's error.
func view(t Target, text bool) (string, []qdisc, error) {
	t, err := t.prepare()
	if err != nil {
		return "", nil, err
	}
	rec, err := loadRecord(t.recordPath())
	if err != nil {
		return "", nil, err
	}
	clock, _ := ReadClock("/proc/net/psched")
	var out string
	var parts []qdisc
	err = inNS(t, func(ifindex int) error {
		tree, err := dumpTree(ifindex)
		if err != nil {
			return err
		}
		ch, cerr := chain(tree)
		if cerr == nil {
			parts = ch
			switch {
			case !text:
			case rec != nil && ours(tree, rec):
				out = rec.Spec
			default:
				sp, err := decodeSpec(clock, ch)
				if err != nil {
					return err
				}
				out = sp.String()
			}
			return nil
		}
		if p, isOurs := recorded(clock, tree, rec); isOurs && p != nil && p.chain == nil {
			out = rec.Spec
		} else if cs, err := decodeTree(clock, ifindex, tree); err == nil {
			out = cs.String()
		} else {
			return fmt.Errorf("interface %q: %w", t.Iface, cerr)
		}
		parts = treeParts(tree)
		return nil
	})
	return out, parts, err
}

func decodeSpec(clock Clock, ch []qdisc) (*spec.Spec, error) {
	s := &spec.Spec{}
	for _, q := range ch {
		st, err := decodeStage(clock, q.Kind, q.Options)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
		s.Stages = append(s.Stages, st)
	}
	return s, nil
}

// Clear restores what the first Apply replaced: the previous root qdisc
// tree, or the kernel's default when there was none. Without a record it
// removes a netem/tbf root chain and refuses to touch anything else.
func Clear(t Target) error {
	t, err := t.prepare()
	if err != nil {
		return err
	}
	path := t.recordPath()
	rec, err := loadRecord(path)
	if err != nil {
		return err
	}
	return inNS(t, func(ifindex int) error {
		if rec != nil {
			if err := restoreTree(ifindex, rec.Prev); err != nil {
				return err
			}
			return os.Remove(path)
		}
		tree, err := dumpTree(ifindex)
		if err != nil {
			return err
		}
		ch, err := chain(tree)
		if err != nil {
			return fmt.Errorf("interface %q: %w: not set by wanlab kernel apply, nothing changed", t.Iface, err)
		}
		if len(ch) == 0 {
			return nil
		}
		return deleteRoot(ifindex)
	})
}

// Stats returns the counters of each stage of the interface's root chain,
// root first, or of each qdisc and class of a class tree Show prints, so
// the kernel's drops and overlimits can be set beside the proxy's.
func Stats(t Target) ([]StageStats, error) {
	_, parts, err := view(t, false)
	var out []StageStats
	for _, q := range parts {
		out = append(out, StageStats{Class: q.Class, Kind: q.Kind, Handle: handleString(q.Handle), Parent: handleString(q.Parent), Counters: q.stats})
	}
	return out, err
}
