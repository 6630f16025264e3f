package spec

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/wanlab/wanlab/tc/classify"
	"github.com/wanlab/wanlab/units"
)

// Classes is one direction's traffic classes: filters sort
// packets into classes, each class runs its own stage pipeline, and an
// optional htb tree shares a rate among them. Written line by line in tc's
// vocabulary:
//
//	htb default 2 [r2q N]
//	class 1:1 htb rate 100mbit ceil 100mbit
//	class 1:2 parent 1:1 htb rate 20mbit ceil 100mbit [burst B] [cburst B] [prio P] [quantum Q] [limit N]
//	filter [prio N] dst 10.0.2.0/24 flowid 1:2
//	leaf 1:2 delay 10ms | tbf ...
//
// Statements are separated by ";" or new lines; "#" starts a comment.
// The tc commands themselves are read too ("tc qdisc add dev eth0 root
// handle 1: htb default 2", "tc class add dev eth0 parent 1:1 classid 1:2
// htb rate 20mbit", "tc filter add dev eth0 parent 1: protocol ip prio 1
// u32 match ip dst 10.0.2.0/24 flowid 1:2", "tc qdisc add dev eth0 parent
// 1:2 handle 20: netem delay 10ms"), so a tc script carries over line by
// line (except route realms and other classifiers: see ParseClasses).
type Classes struct {
	// Default is the class unclassified packets go to; "" sends them
	// through unimpaired and unshaped (htb's default 0, its direct queue).
	Default string
	// R2Q divides rates into quanta (htb's r2q; 0 means 10).
	R2Q     uint32
	Classes []Class
	// Filters in the order they are tried: by Prio, then as written.
	Filters []Filter
}

// Class is one class. A leaf class holds packets and runs Spec; an inner
// class only shares its rate with its children.
type Class struct {
	ID     string // "1:10", canonical (lower-case hex, no leading zeros)
	Parent string // "" for a root class
	// HTB is the class's rates; nil for classes without a tree (then no
	// class of the set has one).
	HTB  *HTBClass
	Spec *Spec // the leaf's impairment pipeline (nil: none)
}

// HTBClass are a class's tc-htb(8) parameters; zero values are tc's
// defaults.
type HTBClass struct {
	Rate    units.Rate
	Ceil    units.Rate // 0: Rate
	Burst   units.Size // 0: rate/1e9 + 1600 bytes
	CBurst  units.Size // 0: ceil/1e9 + 1600 bytes
	Prio    uint32     // 0-7
	Quantum units.Size // 0: rate in bytes/s / r2q, clamped to 1000-200000
	Limit   int        // leaf queue in packets, 0: 1000
}

// Filter sends packets matching Match to class FlowID.
type Filter struct {
	Prio   uint32
	Match  classify.Match
	FlowID string
}

// PipelineClasses is the class set of a plain pipeline: one leaf with
// no id, no rates and no filters, which class text cannot write (every
// class it names has an id).
func PipelineClasses(s *Spec) *Classes { return &Classes{Classes: []Class{{Spec: s}}} }

// Pipeline returns the pipeline of a set that is one (PipelineClasses;
// no set is the empty pipeline, nil). Each layer runs it as the tree it
// is, except where a pipeline's output differs from a tree's: its
// canonical text, the kernel's root chain and the simulator's report.
func (c *Classes) Pipeline() (*Spec, bool) {
	if c == nil {
		return nil, true
	}
	if len(c.Classes) != 1 || c.Classes[0].ID != "" {
		return nil, false
	}
	return c.Classes[0].Spec, true
}

// HasTree reports whether the classes share rates through an htb tree.
func (c *Classes) HasTree() bool {
	return c != nil && len(c.Classes) > 0 && c.Classes[0].HTB != nil
}

// Class returns the class with id (any spelling NormalizeClassID
// accepts), or nil.
func (c *Classes) Class(id string) *Class {
	n, err := NormalizeClassID(id)
	if err != nil {
		return nil
	}
	for i := range c.Classes {
		if c.Classes[i].ID == n {
			return &c.Classes[i]
		}
	}
	return nil
}

// IsLeaf reports whether class id has no children.
func (c *Classes) IsLeaf(id string) bool {
	for _, x := range c.Classes {
		if x.Parent == id {
			return false
		}
	}
	return c.Class(id) != nil
}

// Leaves returns the leaf classes' ids in the order written, in time
// linear in the classes.
func (c *Classes) Leaves() []string {
	var out []string
	for _, x := range c.LeafClasses() {
		out = append(out, x.ID)
	}
	return out
}

// LeafClasses returns the leaf classes in the order written, in time
// linear in the classes.
func (c *Classes) LeafClasses() []*Class {
	parents := make(map[string]bool, len(c.Classes))
	for _, x := range c.Classes {
		if x.Parent != "" {
			parents[x.Parent] = true
		}
	}
	var out []*Class
	for i := range c.Classes {
		if !parents[c.Classes[i].ID] {
			out = append(out, &c.Classes[i])
		}
	}
	return out
}

// Handle is a tc handle or class id, MAJOR:MINOR in 16 bits each, as the
// kernel keeps it (TC_H_MAKE). It is the one class-handle type: the class
// statements, the htb tree and the kernel encoder all parse ids with
// ParseHandle.
type Handle uint32

// MakeHandle builds MAJOR:MINOR.
func MakeHandle(major, minor uint16) Handle { return Handle(uint32(major)<<16 | uint32(minor)) }

// Major and Minor are the handle's halves.
func (h Handle) Major() uint16 { return uint16(h >> 16) }
func (h Handle) Minor() uint16 { return uint16(h) }

// String prints the handle as tc does: lower-case hex, "1:a"; "1:" for the
// qdisc itself (minor 0).
func (h Handle) String() string {
	if h.Minor() == 0 {
		return fmt.Sprintf("%x:", h.Major())
	}
	return fmt.Sprintf("%x:%x", h.Major(), h.Minor())
}

// ParseHandle reads MAJOR:MINOR in hex ("1:10", "1:0A", "1:" for the
// qdisc).
func ParseHandle(s string) (Handle, error) {
	maj, min, ok := strings.Cut(s, ":")
	if !ok || maj == "" {
		return 0, fmt.Errorf("class id %q: want MAJOR:MINOR in hex (e.g. 1:10)", s)
	}
	a, err := strconv.ParseUint(maj, 16, 16)
	if err != nil {
		return 0, fmt.Errorf("class id %q: bad major number", s)
	}
	var b uint64
	if min != "" {
		if b, err = strconv.ParseUint(min, 16, 16); err != nil {
			return 0, fmt.Errorf("class id %q: bad minor number", s)
		}
	}
	return MakeHandle(uint16(a), uint16(b)), nil
}

// NormalizeClassID returns a class id as tc prints it ("1:a" for "1:0A";
// "1:" for the qdisc itself).
func NormalizeClassID(s string) (string, error) {
	h, err := ParseHandle(s)
	if err != nil {
		return "", err
	}
	return h.String(), nil
}

// statement is one statement's tokens (positions count within it) and
// its 1-based number.
type statement struct {
	toks []token
	n    int
}

func splitStatements(s string) []statement {
	var out []statement
	n := 0
	for _, line := range strings.Split(s, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		for _, st := range strings.Split(line, ";") {
			n++
			if toks := tokenize(st); len(toks) > 0 {
				out = append(out, statement{toks: toks, n: n})
			}
		}
	}
	return out
}

// classErr builds the error for statement st about class id (may be "").
func classErr(st statement, id string, t token, format string, a ...any) error {
	where := fmt.Sprintf("statement %d", st.n)
	if id != "" {
		where += ", class " + id
	}
	return &ParseError{Pos: t.pos, Token: t.text, Msg: where + ": " + fmt.Sprintf(format, a...)}
}

// classIDArg reads the class id after keyword t of statement st (about
// class id, may be ""), "parent 1:1": the id, its token and the error when
// it is missing (t needs what: "an id") or is not one.
func classIDArg(st statement, id string, c *cursor, t token, what string) (string, token, error) {
	if !c.more() {
		return "", t, classErr(st, id, t, "%s needs %s", t.text, what)
	}
	v := c.next()
	n, err := NormalizeClassID(v.text)
	if err != nil {
		return "", v, classErr(st, id, v, "%v", err)
	}
	return n, v, nil
}

// ParseClasses reads classes in the line form described at Classes.
// Errors name the statement, the class and the token. Differences from tc:
// only u32-style matches and wanlab's short and flower-style keywords are
// understood as filters (not route realms, fw marks or BPF), every class
// of a tree needs a rate, ceil may not be below rate, and flowid must name
// a leaf.
func ParseClasses(s string) (*Classes, error) {
	cs := &Classes{}
	leaves, err := parseStatements(cs, s, false)
	if err != nil {
		return nil, err
	}
	return finish(cs, leaves, false)
}

// finish attaches the leaf statements (replace: a patch's may replace a
// spec), orders the filters by prio and validates the set as a whole.
func finish(cs *Classes, leaves []leafStmt, replace bool) (*Classes, error) {
	if err := attachLeaves(cs, leaves, replace); err != nil {
		return nil, err
	}
	slices.SortStableFunc(cs.Filters, func(a, b Filter) int { return int(a.Prio) - int(b.Prio) })
	if err := cs.Validate(); err != nil {
		return nil, err
	}
	return cs, nil
}

// leafStmt is a leaf statement, attached to its class once every class
// statement is read.
type leafStmt struct {
	id   string
	spec *Spec
	st   statement
	t    token
}

// parseStatements reads the statements of s into cs, without checking the
// set as a whole, and returns the leaf statements. A patch (Patch) takes
// only class, leaf, filter, default and htb statements.
func parseStatements(cs *Classes, s string, patch bool) ([]leafStmt, error) {
	var leaves []leafStmt
	for _, st := range splitStatements(s) {
		toks := st.toks
		if patch {
			switch toks[0].text {
			case "class", "leaf", "filter", "default", "htb":
			default:
				return nil, classErr(st, "", toks[0], "a change of the running classes takes class, leaf, filter, default or htb statements, not %q", toks[0].text)
			}
		}
		if toks[0].text == "sudo" {
			toks = toks[1:]
		}
		if len(toks) == 0 {
			continue
		}
		var err error
		tc := false
		if toks[0].text == "tc" {
			tc = true
			if toks, err = stripTCPrefix(st, toks); err != nil {
				return nil, err
			}
		}
		kw := toks[0]
		switch kw.text {
		case "htb", "qdisc":
			err = parseQdiscStmt(cs, st, toks, tc)
		case "class":
			err = parseClassStmt(cs, st, toks, tc)
		case "filter":
			err = parseFilterStmt(cs, st, toks, tc)
		case "default":
			if len(toks) != 2 {
				return nil, classErr(st, "", kw, "default needs one class id")
			}
			if cs.Default, err = NormalizeClassID(toks[1].text); err != nil {
				return nil, classErr(st, "", toks[1], "%v", err)
			}
		case "leaf":
			if len(toks) < 2 {
				return nil, classErr(st, "", kw, "leaf needs a class id and a spec")
			}
			id, err := NormalizeClassID(toks[1].text)
			if err != nil {
				return nil, classErr(st, "", toks[1], "%v", err)
			}
			sp, err := parseLeafSpec(st, id, toks[2:])
			if err != nil {
				return nil, err
			}
			leaves = append(leaves, leafStmt{id, sp, st, toks[1]})
		default:
			return nil, classErr(st, "", kw, "unknown statement %q (htb, class, filter, leaf, default, or a tc command)", kw.text)
		}
		if err != nil {
			return nil, err
		}
	}
	return leaves, nil
}

// attachLeaves gives each leaf statement's spec to its class; replace lets
// a leaf statement replace a spec the class has (a patch), else a second
// spec for one class is an error.
func attachLeaves(cs *Classes, leaves []leafStmt, replace bool) error {
	seen := map[string]bool{}
	for _, l := range leaves {
		c := cs.Class(l.id)
		if c == nil {
			return classErr(l.st, l.id, l.t, "no such class")
		}
		if c.Spec != nil && (!replace || seen[l.id]) {
			return classErr(l.st, l.id, l.t, "has a leaf spec already")
		}
		c.Spec, seen[l.id] = l.spec, true
	}
	return nil
}

// stripTCPrefix turns "tc qdisc|class|filter add|replace|change dev DEV
// ..." into the statement's own form: it keeps the object word and drops
// the verb and "dev DEV".
func stripTCPrefix(st statement, toks []token) ([]token, error) {
	if len(toks) < 5 {
		return nil, classErr(st, "", toks[len(toks)-1], "tc command: want tc qdisc|class|filter add dev DEV ...")
	}
	obj := toks[1]
	if obj.text != "qdisc" && obj.text != "class" && obj.text != "filter" {
		return nil, classErr(st, "", obj, "tc command: %q is not qdisc, class or filter", obj.text)
	}
	switch toks[2].text {
	case "add", "replace", "change":
	default:
		return nil, classErr(st, "", toks[2], "tc command: want add, replace or change, not %q", toks[2].text)
	}
	if toks[3].text != "dev" {
		return nil, classErr(st, "", toks[3], "tc command: want dev DEV, not %q", toks[3].text)
	}
	return append([]token{obj}, toks[5:]...), nil
}

// parseQdiscStmt reads "htb [default N] [r2q N]" or the tc form
// "qdisc root handle 1: htb default 2", or a leaf qdisc "qdisc parent
// 1:10 [handle 10:] netem|tbf ...".
func parseQdiscStmt(cs *Classes, st statement, toks []token, tc bool) error {
	c := &cursor{toks: toks[1:]}
	if toks[0].text == "htb" {
		c = &cursor{toks: toks}
	}
	parent, major := "", ""
	for c.more() && !c.peekIs("htb") {
		t := c.next()
		switch t.text {
		case "root":
		case "parent", "handle":
			id, _, err := classIDArg(st, "", c, t, "an id")
			if err != nil {
				return err
			}
			if t.text == "parent" {
				parent = id
			} else {
				major = id
			}
		case "netem", "tbf":
			if parent == "" {
				return classErr(st, "", t, "a %s qdisc here must be a leaf's (parent CLASSID)", t.text)
			}
			sp, err := parseLeafSpec(st, parent, c.toks[c.i-1:])
			if err != nil {
				return err
			}
			cl := cs.Class(parent)
			if cl == nil {
				return classErr(st, parent, t, "no such class (add the class first)")
			}
			if cl.Spec != nil {
				return classErr(st, parent, t, "has a leaf spec already")
			}
			cl.Spec = sp
			return nil
		default:
			return classErr(st, "", t, "qdisc: unexpected %q (only an htb root or a netem/tbf leaf)", t.text)
		}
	}
	if !c.more() {
		return classErr(st, "", toks[len(toks)-1], "qdisc: missing htb")
	}
	c.next() // htb
	for c.more() {
		t := c.next()
		if !c.more() {
			return classErr(st, "", t, "htb %q needs a value", t.text)
		}
		v := c.next()
		switch t.text {
		case "default":
			n, err := strconv.ParseUint(v.text, 16, 16)
			if err != nil {
				return classErr(st, "", v, "htb default %q: want a class minor number in hex", v.text)
			}
			if n == 0 {
				cs.Default = ""
				continue
			}
			if major == "" {
				major = "1:"
			}
			cs.Default = fmt.Sprintf("%s%x", major, n)
		case "r2q":
			n, err := uint32Arg("htb r2q", v)
			if err != nil || n == 0 {
				return classErr(st, "", v, "htb r2q %q: want a number 1-4294967295", v.text)
			}
			cs.R2Q = n
		default:
			return classErr(st, "", t, "htb: unknown option %q (default, r2q)", t.text)
		}
	}
	return nil
}

func parseLeafSpec(st statement, id string, toks []token) (*Spec, error) {
	var texts []string
	for _, t := range toks {
		texts = append(texts, t.text)
	}
	sp, err := Parse(strings.Join(texts, " "))
	if err != nil {
		var pe *ParseError
		if ok := asParseError(err, &pe); ok && pe.Pos >= 1 && pe.Pos <= len(toks) {
			return nil, &ParseError{Pos: toks[pe.Pos-1].pos, Token: pe.Token, Msg: fmt.Sprintf("statement %d, class %s: leaf: %s", st.n, id, pe.Msg), Err: pe.Err}
		}
		return nil, fmt.Errorf("statement %d, class %s: leaf: %w", st.n, id, err)
	}
	return sp, nil
}

func asParseError(err error, pe **ParseError) bool {
	e, ok := err.(*ParseError)
	if ok {
		*pe = e
	}
	return ok
}

func parseClassStmt(cs *Classes, st statement, toks []token, tc bool) error {
	c := &cursor{toks: toks[1:]}
	var id, parent string
	var idTok token
	if !tc {
		if !c.more() {
			return classErr(st, "", toks[0], "class needs an id (class 1:10 ...)")
		}
		idTok = c.next()
		var err error
		if id, err = NormalizeClassID(idTok.text); err != nil {
			return classErr(st, "", idTok, "%v", err)
		}
	}
	for c.more() && !c.peekIs("htb") {
		t := c.next()
		switch t.text {
		case "parent", "classid":
			n, v, err := classIDArg(st, id, c, t, "an id")
			if err != nil {
				return err
			}
			if t.text == "parent" {
				parent = n
			} else {
				id, idTok = n, v
			}
		case "root":
		default:
			return classErr(st, id, t, "class: unexpected %q (parent ID, classid ID, then htb ...)", t.text)
		}
	}
	if id == "" {
		return classErr(st, "", toks[len(toks)-1], "class: missing classid")
	}
	cl := Class{ID: id, Parent: parent}
	if err := cs.checkNew(&cl); err != nil {
		return classErr(st, id, idTok, "%v", err)
	}
	if c.more() {
		c.next() // htb
		h, err := parseHTBClass(st, id, c)
		if err != nil {
			return err
		}
		cl.HTB = h
	}
	cs.Classes = append(cs.Classes, cl)
	return nil
}

// checkNew checks a class about to join cs (canonical ids): a class, not
// the qdisc; a parent of its own qdisc (a parent "1:", the qdisc itself,
// becomes "": a root class); not defined before.
func (cs *Classes) checkNew(cl *Class) error {
	if strings.HasSuffix(cl.ID, ":") {
		return errors.New("minor number 0 is the qdisc, not a class")
	}
	if maj, _, _ := strings.Cut(cl.ID, ":"); strings.HasSuffix(cl.Parent, ":") {
		if cl.Parent != maj+":" {
			return fmt.Errorf("parent %s is not this qdisc (%s:)", cl.Parent, maj)
		}
		cl.Parent = ""
	}
	if cs.Class(cl.ID) != nil {
		return errors.New("defined twice")
	}
	return nil
}

func parseHTBClass(st statement, id string, c *cursor) (*HTBClass, error) {
	h := &HTBClass{}
	_, err := h.keywords().read("htb", c, func(kw token) string { return unknownOption(kw.text).Error() })
	if pe := (*ParseError)(nil); errors.As(err, &pe) {
		return nil, classErr(st, id, token{text: pe.Token, pos: pe.Pos}, "%s", pe.Msg)
	} else if err != nil {
		return nil, err
	}
	if h.Rate == 0 {
		return nil, classErr(st, id, c.toks[max(c.i-1, 0)], "htb class needs a rate")
	}
	return h, nil
}

// unknownOption is HTBClass.set's error for an option it does not know.
type unknownOption string

func (u unknownOption) Error() string {
	return fmt.Sprintf("htb: unknown class option %q (rate, ceil, burst, cburst, prio, quantum, limit)", string(u))
}

// htbClassOptions are tc-htb(8)'s class options, its tc aliases
// included, each reading its value into h: the one table of class
// options, read by keywords.read for the line form (HTBClass.keywords)
// and by key for the YAML form (HTBClass.set).
var htbClassOptions = map[string]func(h *HTBClass, key string, v token) (err error){
	"rate":      func(h *HTBClass, key string, v token) (err error) { h.Rate, err = rateArg(key, v); return },
	"ceil":      func(h *HTBClass, key string, v token) (err error) { h.Ceil, err = rateArg(key, v); return },
	"burst":     htbBurst,
	"buffer":    htbBurst,
	"maxburst":  htbBurst,
	"cburst":    htbCBurst,
	"cbuffer":   htbCBurst,
	"cmaxburst": htbCBurst,
	"prio": func(h *HTBClass, key string, v token) (err error) {
		h.Prio, err = uint32Arg(key, v)
		if err == nil && h.Prio > 7 {
			err = fmt.Errorf("prio %s: must be 0-7", v.text)
		}
		return
	},
	"quantum": func(h *HTBClass, key string, v token) (err error) { h.Quantum, err = sizeArg(key, v); return },
	"limit": func(h *HTBClass, key string, v token) error {
		n, err := uint32Arg(key, v)
		if err == nil && (n == 0 || n > 1<<20) {
			err = fmt.Errorf("limit %s: must be 1-1048576 packets", v.text)
		}
		h.Limit = int(n)
		return err
	},
}

func htbBurst(h *HTBClass, key string, v token) (err error)  { h.Burst, err = sizeArg(key, v); return }
func htbCBurst(h *HTBClass, key string, v token) (err error) { h.CBurst, err = sizeArg(key, v); return }

// keywords is the keyword table of h's options for keywords.read: each
// takes one value, and each word typed (an alias apart from what it
// stands for) at most once.
func (h *HTBClass) keywords() keywords {
	seen := map[string]bool{}
	ks := make(keywords, len(htbClassOptions))
	for key, set := range htbClassOptions {
		ks[key] = keyword{read: func(kw token, c *cursor) (bool, error) {
			if !c.more() {
				return false, &ParseError{Pos: kw.pos, Token: kw.text, Msg: fmt.Sprintf("htb %q needs a value", kw.text)}
			}
			v := c.next()
			if seen[kw.text] {
				return false, &ParseError{Pos: kw.pos, Token: kw.text, Msg: fmt.Sprintf("htb %s given twice", kw.text)}
			}
			seen[kw.text] = true
			if err := set(h, key, v); err != nil {
				return false, &ParseError{Pos: v.pos, Token: v.text, Msg: err.Error()}
			}
			return true, nil
		}}
	}
	return ks
}

// set reads one class option from v (the YAML form's reader).
func (h *HTBClass) set(key string, v token) error {
	set, ok := htbClassOptions[key]
	if !ok {
		return unknownOption(key)
	}
	return set(h, key, v)
}

// parseFilterStmt reads "filter [prio N] MATCH flowid ID" and tc's
// "filter parent 1: protocol ip prio N u32 MATCH flowid ID".
func parseFilterStmt(cs *Classes, st statement, toks []token, tc bool) error {
	f := Filter{}
	c := &cursor{toks: toks[1:]}
	var match []token
	flow := false
	for c.more() {
		t := c.next()
		switch t.text {
		case "parent", "handle":
			if !c.more() {
				return classErr(st, "", t, "%s needs an id", t.text)
			}
			c.next()
		case "protocol":
			// tc's "protocol ip|ipv6|all" is the ethertype; wanlab's
			// "protocol tcp" is a match. Tell them apart by the value.
			if !c.more() {
				return classErr(st, "", t, "protocol needs a value")
			}
			v := c.next()
			switch v.text {
			case "ip", "ipv6", "all", "802_3":
			default:
				match = append(match, t, v)
			}
		case "pref", "prio":
			if !c.more() {
				return classErr(st, "", t, "%s needs a number", t.text)
			}
			v := c.next()
			n, err := uint32Arg("prio", v)
			if err != nil {
				return classErr(st, "", v, "%v", err)
			}
			f.Prio = n
		case "u32", "flower":
		case "route", "fw", "basic", "bpf", "cgroup", "matchall", "tcindex", "rsvp", "flow":
			return classErr(st, "", t, "filter %q is not supported: use u32 matches or src/dst/protocol/sport/dport/dscp (route realms: match the route's destination prefix with dst)", t.text)
		case "flowid", "classid":
			id, _, err := classIDArg(st, "", c, t, "a class id")
			if err != nil {
				return err
			}
			f.FlowID = id
			flow = true
			if c.more() {
				return classErr(st, id, c.toks[c.i], "filter: unexpected %q after flowid", c.toks[c.i].text)
			}
		default:
			match = append(match, t)
		}
	}
	if !flow {
		return classErr(st, "", toks[len(toks)-1], "filter: missing flowid CLASSID")
	}
	words := make([]string, len(match))
	for i, t := range match {
		words[i] = t.text
	}
	m, err := classify.ParseMatch(words)
	if err != nil {
		if te, ok := err.(*classify.TokenError); ok && te.Index < len(match) {
			return classErr(st, f.FlowID, match[te.Index], "filter: %s", te.Msg)
		}
		return classErr(st, f.FlowID, toks[0], "filter: %v", err)
	}
	f.Match = m
	cs.Filters = append(cs.Filters, f)
	return nil
}

// Validate checks the classes as a whole: known parents, no cycles, leaf
// specs and filter targets on leaves, a default that exists, rates on
// every class of a tree or on none, ceil not below rate, children's rates
// adding up to no more than their parent's ceil.
func (c *Classes) Validate() error {
	if c == nil || len(c.Classes) == 0 {
		return &ParseError{Msg: "classes: no class defined"}
	}
	if s, plain := c.Pipeline(); plain {
		return s.Validate()
	}
	tree := c.Classes[0].HTB != nil
	ids := map[string]*Class{}
	for i := range c.Classes {
		cl := &c.Classes[i]
		if _, dup := ids[cl.ID]; dup {
			return &ParseError{Token: cl.ID, Msg: fmt.Sprintf("class %s: defined twice", cl.ID)}
		}
		ids[cl.ID] = cl
		if (cl.HTB != nil) != tree {
			return &ParseError{Token: cl.ID, Msg: fmt.Sprintf("class %s: either every class has htb rates or none has", cl.ID)}
		}
		if h := cl.HTB; h != nil {
			if h.Rate < 8 {
				return &ParseError{Token: cl.ID, Msg: fmt.Sprintf("class %s: rate %s: below one byte per second", cl.ID, h.Rate)}
			}
			if h.Ceil != 0 && h.Ceil < h.Rate {
				return &ParseError{Token: "ceil", Msg: fmt.Sprintf("class %s: ceil %s is below rate %s", cl.ID, h.Ceil, h.Rate)}
			}
			if h.Prio > 7 {
				return &ParseError{Token: "prio", Msg: fmt.Sprintf("class %s: prio %d: must be 0-7", cl.ID, h.Prio)}
			}
		}
		if cl.Spec != nil {
			if err := cl.Spec.Validate(); err != nil {
				return fmt.Errorf("class %s: leaf: %w", cl.ID, err)
			}
		}
	}
	// Children counted and their rates summed in one pass: a tree of
	// thousands of classes validates in linear time.
	children := make(map[string]int, len(c.Classes))
	childRates := make(map[string]units.Rate, len(c.Classes))
	for _, ch := range c.Classes {
		children[ch.Parent]++
		if ch.HTB != nil {
			childRates[ch.Parent] += ch.HTB.Rate
		}
	}
	isLeaf := func(id string) bool { return ids[id] != nil && children[id] == 0 }
	for _, cl := range c.Classes {
		depth := 0
		for p := cl.Parent; p != ""; p = ids[p].Parent {
			if ids[p] == nil {
				return &ParseError{Token: p, Msg: fmt.Sprintf("class %s: parent %s: no such class", cl.ID, p)}
			}
			if depth++; depth > 7 || p == cl.ID {
				return &ParseError{Token: p, Msg: fmt.Sprintf("class %s: parent %s: a loop or deeper than 8 levels", cl.ID, p)}
			}
		}
		if cl.Spec != nil && !isLeaf(cl.ID) {
			return &ParseError{Token: cl.ID, Msg: fmt.Sprintf("class %s: has children, so it holds no packets and cannot have a leaf spec", cl.ID)}
		}
		if tree && !isLeaf(cl.ID) {
			sum := childRates[cl.ID]
			ceil := max(cl.HTB.Ceil, cl.HTB.Rate)
			if sum > ceil {
				return &ParseError{Token: cl.ID, Msg: fmt.Sprintf("class %s: children's rates add up to %s, above its ceil %s: their guarantees cannot hold", cl.ID, sum, ceil)}
			}
		}
	}
	for _, f := range c.Filters {
		if ids[f.FlowID] == nil {
			return &ParseError{Token: f.FlowID, Msg: fmt.Sprintf("filter %s flowid %s: no such class", f.Match, f.FlowID)}
		}
		if !isLeaf(f.FlowID) {
			return &ParseError{Token: f.FlowID, Msg: fmt.Sprintf("filter %s flowid %s: not a leaf class (packets wait only in leaves)", f.Match, f.FlowID)}
		}
	}
	if c.Default != "" {
		if ids[c.Default] == nil {
			return &ParseError{Token: c.Default, Msg: fmt.Sprintf("default %s: no such class", c.Default)}
		}
		if !isLeaf(c.Default) {
			return &ParseError{Token: c.Default, Msg: fmt.Sprintf("default %s: not a leaf class", c.Default)}
		}
	}
	return nil
}

// String prints the classes in the line form, statements joined by "; "
// (ParseClasses reads it back to the same value).
func (c *Classes) String() string {
	if s, plain := c.Pipeline(); plain {
		return s.String() // a pipeline prints as one, not as class statements
	}
	var parts []string
	if c.Default != "" {
		parts = append(parts, "default "+c.Default)
	}
	if c.R2Q != 0 {
		parts = append(parts, "htb r2q "+strconv.FormatUint(uint64(c.R2Q), 10))
	}
	for _, cl := range c.Classes {
		s := "class " + cl.ID
		if cl.Parent != "" {
			s += " parent " + cl.Parent
		}
		if h := cl.HTB; h != nil {
			s += " htb rate " + h.Rate.String()
			if h.Ceil != 0 && h.Ceil != h.Rate {
				s += " ceil " + h.Ceil.String()
			}
			if h.Burst != 0 {
				s += " burst " + h.Burst.String()
			}
			if h.CBurst != 0 {
				s += " cburst " + h.CBurst.String()
			}
			if h.Prio != 0 {
				s += " prio " + strconv.FormatUint(uint64(h.Prio), 10)
			}
			if h.Quantum != 0 {
				s += " quantum " + h.Quantum.String()
			}
			if h.Limit != 0 {
				s += " limit " + strconv.Itoa(h.Limit)
			}
		}
		parts = append(parts, s)
	}
	for _, f := range c.Filters {
		s := "filter"
		if f.Prio != 0 {
			s += " prio " + strconv.FormatUint(uint64(f.Prio), 10)
		}
		if !f.Match.IsAny() {
			s += " " + f.Match.String()
		}
		parts = append(parts, s+" flowid "+f.FlowID)
	}
	for _, cl := range c.Classes {
		if !cl.Spec.IsEmpty() {
			parts = append(parts, "leaf "+cl.ID+" "+cl.Spec.String())
		}
	}
	return strings.Join(parts, "; ")
}

// classesYAML is the file form.
type classesYAML struct {
	Default string      `yaml:"default"`
	R2Q     uint32      `yaml:"r2q"`
	Classes []yamlClass `yaml:"classes"`
	Filters []struct {
		Prio   uint32 `yaml:"prio"`
		Match  string `yaml:"match"`
		FlowID string `yaml:"flowid"`
	} `yaml:"filters"`
}

// yamlClass is one class of the file form.
type yamlClass struct {
	ID      string    `yaml:"id"`
	Parent  string    `yaml:"parent"`
	Rate    string    `yaml:"rate"`
	Ceil    string    `yaml:"ceil"`
	Burst   string    `yaml:"burst"`
	CBurst  string    `yaml:"cburst"`
	Prio    *uint32   `yaml:"prio"`
	Quantum string    `yaml:"quantum"`
	Limit   *uint32   `yaml:"limit"`
	Spec    string    `yaml:"spec"`
	Match   yamlWords `yaml:"match"`
}

// yamlWords is one match or a list of them.
type yamlWords []string

func (w *yamlWords) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*w = []string{n.Value}
		return nil
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return err
	}
	*w = l
	return nil
}

// ParseClassesYAML reads the file form of a tree:
//
//	default: "1:2"          # class for unmatched packets (omit: unshaped)
//	r2q: 10
//	classes:
//	  - id: "1:1"
//	    rate: 100mbit
//	  - id: "1:2"
//	    parent: "1:1"
//	    rate: 20mbit
//	    ceil: 100mbit       # also burst, cburst, prio, quantum, limit
//	    match: dst 10.0.2.0/24    # or a list; filters to this class, in order
//	    spec: delay 10ms          # the leaf's netem/tbf pipeline
//	filters:                      # more filters, tried after the classes' own
//	  - {prio: 2, match: "protocol udp dport 53", flowid: "1:2"}
//
// Each field is read by the reader the line form uses for it (class ids,
// tc-htb(8) options, the leaf's spec, the filter's match), into the same
// structs, and the set is checked as a whole by the same Validate; errors
// name the class and the field.
func ParseClassesYAML(b []byte) (*Classes, error) {
	var y classesYAML
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&y); err != nil {
		return nil, fmt.Errorf("classes YAML: %w", err)
	}
	cs, err := y.classes()
	if err != nil {
		return nil, fmt.Errorf("classes YAML: %w", err)
	}
	return cs, nil
}

// classes builds the tree the file describes.
func (y *classesYAML) classes() (*Classes, error) {
	cs := &Classes{R2Q: y.R2Q}
	if y.Default != "" {
		d, err := NormalizeClassID(y.Default)
		if err != nil {
			return nil, fmt.Errorf("default: %w", err)
		}
		cs.Default = d
	}
	var filters []Filter
	for i, yc := range y.Classes {
		if strings.TrimSpace(yc.ID) == "" {
			return nil, fmt.Errorf("class %d: no id", i+1)
		}
		id, err := NormalizeClassID(yc.ID)
		if err != nil {
			return nil, fmt.Errorf("class %q: %w", yc.ID, err)
		}
		cl := Class{ID: id}
		if yc.Parent != "" {
			if cl.Parent, err = NormalizeClassID(yc.Parent); err != nil {
				return nil, fmt.Errorf("class %s: parent: %w", id, err)
			}
		}
		if err := cs.checkNew(&cl); err != nil {
			return nil, fmt.Errorf("class %s: %w", id, err)
		}
		if cl.HTB, err = yc.htb(); err != nil {
			return nil, fmt.Errorf("class %s: %w", id, err)
		}
		if yc.Spec != "" {
			if cl.Spec, err = Parse(yc.Spec); err != nil {
				return nil, fmt.Errorf("class %s: spec: %w", id, err)
			}
		}
		cs.Classes = append(cs.Classes, cl)
		for _, m := range yc.Match {
			f, err := yamlFilter(0, m, id)
			if err != nil {
				return nil, fmt.Errorf("class %s: %w", id, err)
			}
			filters = append(filters, f)
		}
	}
	for i, yf := range y.Filters {
		id, err := NormalizeClassID(yf.FlowID)
		if err != nil {
			return nil, fmt.Errorf("filter %d: flowid: %w", i+1, err)
		}
		f, err := yamlFilter(yf.Prio, yf.Match, id)
		if err != nil {
			return nil, fmt.Errorf("filter %d: %w", i+1, err)
		}
		filters = append(filters, f)
	}
	cs.Filters = filters
	return finish(cs, nil, false)
}

// htb reads the class's tc-htb(8) options; nil when it gives none (a
// class without a tree).
func (yc *yamlClass) htb() (*HTBClass, error) {
	h := &HTBClass{}
	given := false
	for _, kv := range [][2]string{{"rate", yc.Rate}, {"ceil", yc.Ceil}, {"burst", yc.Burst}, {"cburst", yc.CBurst}, {"quantum", yc.Quantum}} {
		if kv[1] == "" {
			continue
		}
		given = true
		if err := h.set(kv[0], token{text: kv[1]}); err != nil {
			return nil, err
		}
	}
	for _, kv := range []struct {
		key string
		v   *uint32
	}{{"prio", yc.Prio}, {"limit", yc.Limit}} {
		if kv.v == nil {
			continue
		}
		given = true
		if err := h.set(kv.key, token{text: strconv.FormatUint(uint64(*kv.v), 10)}); err != nil {
			return nil, err
		}
	}
	if !given {
		return nil, nil
	}
	if h.Rate == 0 {
		return nil, errors.New("htb class needs a rate")
	}
	return h, nil
}

// yamlFilter is a filter to flowid from a match in wanlab's words.
func yamlFilter(prio uint32, match, flowid string) (Filter, error) {
	m, err := classify.ParseMatch(strings.Fields(match))
	if err != nil {
		return Filter{}, fmt.Errorf("match %q: %w", match, err)
	}
	return Filter{Prio: prio, Match: m, FlowID: flowid}, nil
}

// ParseClassesAuto reads the YAML form when text looks like YAML (its
// first statement starts with a "key:"), the line form otherwise.
func ParseClassesAuto(text []byte) (*Classes, error) {
	t := strings.TrimSpace(string(text))
	for _, key := range []string{"classes:", "default:", "r2q:", "filters:", "---"} {
		if strings.HasPrefix(t, key) {
			return ParseClassesYAML(text)
		}
	}
	return ParseClasses(string(text))
}

// IsClasses reports whether text is a set of classes rather than a plain
// spec: its first statement is htb, class, filter, leaf or default, a tc
// class or filter command, a tc htb qdisc, or the YAML form.
func IsClasses(text string) bool {
	t := strings.TrimSpace(text)
	for _, key := range []string{"classes:", "default:", "r2q:", "filters:", "---"} {
		if strings.HasPrefix(t, key) {
			return true
		}
	}
	sts := splitStatements(t)
	if len(sts) == 0 {
		return false
	}
	toks := sts[0].toks
	if toks[0].text == "sudo" {
		toks = toks[1:]
	}
	if len(toks) == 0 {
		return false
	}
	switch toks[0].text {
	case "htb", "class", "filter", "leaf", "default":
		return true
	case "tc":
		if len(toks) > 1 && (toks[1].text == "class" || toks[1].text == "filter") {
			return true
		}
		for _, x := range toks {
			if x.text == "htb" {
				return true
			}
		}
	}
	return false
}

// Patch applies the statements of text to a copy of c: a class statement
// replaces the class with its id (keeping its leaf spec) or adds one, a
// leaf statement replaces that leaf's spec, filter statements replace all
// filters, default and htb r2q replace those. The statements are read into
// a set of their own and merged into the copy as values; the result is
// validated as a whole.
func (c *Classes) Patch(text string) (*Classes, error) {
	frag := &Classes{}
	leaves, err := parseStatements(frag, text, true)
	if err != nil {
		return nil, err
	}
	n := &Classes{Default: c.Default, R2Q: c.R2Q}
	n.Classes = append(n.Classes, c.Classes...)
	n.Filters = append(n.Filters, c.Filters...)
	for _, cl := range frag.Classes {
		if old := n.Class(cl.ID); old != nil {
			cl.Spec = old.Spec
			*old = cl
			continue
		}
		n.Classes = append(n.Classes, cl)
	}
	if len(frag.Filters) > 0 {
		n.Filters = frag.Filters
	}
	if frag.Default != "" {
		n.Default = frag.Default
	}
	if frag.R2Q != 0 {
		n.R2Q = frag.R2Q
	}
	return finish(n, leaves, true)
}
