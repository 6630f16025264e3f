// Package htb is a hierarchical token bucket scheduler with the semantics
// of Linux's sch_htb (net/sched/sch_htb.c): classes with a guaranteed rate
// and a ceiling, children borrowing their parent's unused rate, bursts,
// priorities and quanta for sharing the spare rate. It runs on the
// caller's clock (ns), never reads one, and moves packets of any type P.
//
// # Model
//
// Each class has two buckets held as time, as the kernel holds them:
// tokens (at rate, at most burst) and ctokens (at ceil, at most cburst).
// From them a class is in one of three modes at time t: CantSend (ctokens
// below zero), CanSend (tokens and ctokens at least zero) or MayBorrow
// (ctokens at least zero, tokens below zero) — htb_class_mode with
// htb_hysteresis off, the kernel default. A backlogged leaf can send when
// it is CanSend itself, or when its ancestors up to some CanSend class are
// all MayBorrow; that class's level is the level the packet is sent at.
// Dequeue serves the lowest level first, then the lowest prio, then the
// leaves in deficit round robin with their quantum (htb_dequeue_tree), and
// charges the packet as htb_charge_class does: the classes at or above
// that level spend tokens and ctokens, those below it (the borrowers) only
// ctokens.
//
// # Where it differs from Linux
//
//   - Deficit round robin runs over all leaves eligible at a level and
//     prio, not per inner class's feed, so two inner classes borrowing at
//     the same level share their grandparent's spare rate in proportion to
//     their leaves' quanta rather than in the kernel's two-step order.
//   - The device is infinitely fast and the scheduler is woken exactly
//     when a class's mode changes (the kernel's watchdog), so a class
//     sends at its rate exactly.
//   - Sizes are what the caller passes (IP lengths in the proxy) plus
//     Config.Overhead; there are no rate tables (neither does the kernel
//     read them any more) and no link-layer cells.
package htb

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// MaxDepth is the deepest tree (TC_HTB_MAXDEPTH): a root class has level
// MaxDepth-1, its inner children one less, leaves level 0.
const MaxDepth = 8

// NumPrio is the number of priorities (TC_HTB_NUMPRIO): prio 0 is served
// first.
const NumPrio = 8

// mbuffer caps how much idle time a class accumulates and how deep its
// buckets can go negative: 60 s, as htb_change_class sets cl->mbuffer.
const mbuffer = int64(60e9)

// DefaultMTU is what tc adds to rate/HZ for the default burst ("eth
// packet len" in q_htb.c).
const DefaultMTU = 1600

// DefaultLimit is a leaf's queue limit in packets when none is given: the
// kernel gives each leaf a pfifo of txqueuelen packets, 1000 by default.
const DefaultLimit = 1000

// DefaultR2Q is tc's rate-to-quantum divisor.
const DefaultR2Q = 10

// ClassConfig is one class, as "tc class add ... parent PARENT classid ID
// htb rate R ceil C burst B cburst CB prio P quantum Q" sets it.
type ClassConfig struct {
	ID     string // "1:10"
	Parent string // "" (or the qdisc's "1:") for a root class
	// HTBClass is the class's parameters, spec's one definition of them:
	// Rate, Ceil (0: Rate), Burst and CBurst (0: tc's default,
	// rate/1e9 + 1600 bytes), Prio (0..7), Quantum (0: the kernel's rate
	// in bytes/s / R2Q, clamped to 1000..200000), Limit (a leaf's queue
	// in packets, 0: DefaultLimit).
	spec.HTBClass
}

// Config is a whole tree.
type Config struct {
	Classes []ClassConfig
	// R2Q divides rates into quanta (0: DefaultR2Q).
	R2Q uint32
	// Overhead is added to every packet's size when charging buckets (e.g.
	// 14 for an Ethernet header the TUN device does not carry).
	Overhead int
}

// Mode is a class's state at a moment (enum htb_cmode).
type Mode uint8

// Modes.
const (
	CantSend Mode = iota
	MayBorrow
	CanSend
)

// String returns "cant_send", "may_borrow" or "can_send".
func (m Mode) String() string {
	switch m {
	case CantSend:
		return "cant_send"
	case MayBorrow:
		return "may_borrow"
	}
	return "can_send"
}

// ClassStats are one class's counters (the engine's snapshot type, so
// that a snapshot carries them typed).
type ClassStats = engine.TreeClass

// xstatsQueue is a leaf queue with xstats (engine.LeafQueue).
type xstatsQueue interface {
	XStats(now int64) *engine.XStats
}

type entry[P any] struct {
	p    P
	size int
}

// ring is a leaf's FIFO; it grows by doubling and never shrinks, so a
// steady state allocates nothing.
type ring[P any] struct {
	buf     []entry[P]
	head, n int
	bytes   uint64
}

func (r *ring[P]) push(e entry[P]) {
	if r.n == len(r.buf) {
		nb := make([]entry[P], max(16, 2*len(r.buf)))
		for i := 0; i < r.n; i++ {
			nb[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = e
	r.n++
	r.bytes += uint64(e.size)
}

func (r *ring[P]) pop() entry[P] {
	e := r.buf[r.head]
	var zero entry[P]
	r.buf[r.head] = zero
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	r.bytes -= uint64(e.size)
	return e
}

type class[P any] struct {
	cfg      ClassConfig
	parent   int // -1 for a root class
	level    int
	leaf     bool
	leafIdx  int
	rateNs   float64 // ns per byte at rate
	ceilNs   float64 // ns per byte at ceil
	buffer   int64   // burst as ns at rate
	cbuffer  int64
	quantum  int64
	tokens   int64
	ctokens  int64
	tc       int64 // time of the last checkpoint
	deficit  [MaxDepth]int64
	q        ring[P]
	qd       Queue[P] // the leaf's queue discipline, when SetQueue gave one (else q)
	stats    ClassStats
	path     []int  // leaf: itself, its parent, ... a root class
	mode     Mode   // scratch for Dequeue/Next
	modeGen  uint64 // the Dequeue whose mode is in mode
	servedAt int    // scratch: level the leaf can send at now, -1 none
	active   bool   // leaf: in Tree.active
}

// Tree is an htb class tree with its leaves' queues. It is not safe for
// concurrent use: the engine calls it under its pipeline's lock.
type Tree[P any] struct {
	cfg     Config
	classes []*class[P]
	leaves  []int // class indexes of the leaves, in configuration order
	byID    map[string]int
	cursor  [MaxDepth][NumPrio]int
	last    int64
	backlog int
	// active are the positions (in leaves) of the leaves that may hold
	// packets, in order: Next and Dequeue visit those and the classes
	// above them only, so a tree of thousands of classes costs per packet
	// what its backlogged leaves cost. A leaf joins when Enqueue gives it
	// a packet and leaves when a scan finds it empty.
	active []int
	gen    uint64 // Dequeue's generation, for modeGen
}

// ErrConfig wraps configuration errors.
var ErrConfig = errors.New("htb")

// NormalizeID returns a class id in tc's canonical form ("1:a" for "1:0a",
// "1:" for the qdisc) or an error naming it.
func NormalizeID(s string) (string, error) {
	maj, min, ok := strings.Cut(s, ":")
	if !ok {
		return "", fmt.Errorf("%w: class id %q: want MAJOR:MINOR in hex (e.g. 1:10)", ErrConfig, s)
	}
	parse := func(h string) (uint64, error) {
		if h == "" {
			return 0, nil
		}
		var v uint64
		if len(h) > 4 {
			return 0, fmt.Errorf("more than 4 hex digits")
		}
		for _, c := range h {
			switch {
			case c >= '0' && c <= '9':
				v = v*16 + uint64(c-'0')
			case c >= 'a' && c <= 'f':
				v = v*16 + uint64(c-'a'+10)
			case c >= 'A' && c <= 'F':
				v = v*16 + uint64(c-'A'+10)
			default:
				return 0, fmt.Errorf("%q is not a hex digit", c)
			}
		}
		return v, nil
	}
	a, err := parse(maj)
	if err != nil || maj == "" {
		return "", fmt.Errorf("%w: class id %q: bad major number", ErrConfig, s)
	}
	b, err := parse(min)
	if err != nil {
		return "", fmt.Errorf("%w: class id %q: bad minor number: %v", ErrConfig, s, err)
	}
	if min == "" || b == 0 {
		return fmt.Sprintf("%x:", a), nil
	}
	return fmt.Sprintf("%x:%x", a, b), nil
}

// New builds a tree at time now (every bucket full). It checks what the
// kernel checks (known parent, depth, prio) and what tc would let pass
// but cannot work (ceil below rate, a zero rate), naming the class.
func New[P any](cfg Config, now int64) (*Tree[P], error) {
	if len(cfg.Classes) == 0 {
		return nil, fmt.Errorf("%w: no classes", ErrConfig)
	}
	if cfg.R2Q == 0 {
		cfg.R2Q = DefaultR2Q
	}
	t := &Tree[P]{cfg: cfg, byID: make(map[string]int), last: now}
	for i, cc := range cfg.Classes {
		id, err := NormalizeID(cc.ID)
		if err != nil {
			return nil, err
		}
		if strings.HasSuffix(id, ":") {
			return nil, fmt.Errorf("%w: class %s: minor number 0 is the qdisc itself", ErrConfig, cc.ID)
		}
		if _, dup := t.byID[id]; dup {
			return nil, fmt.Errorf("%w: class %s: defined twice", ErrConfig, id)
		}
		cc.ID = id
		if cc.Rate < 8 {
			return nil, fmt.Errorf("%w: class %s: rate %s: below one byte per second", ErrConfig, id, cc.Rate)
		}
		if cc.Ceil == 0 {
			cc.Ceil = cc.Rate
		}
		if cc.Ceil < cc.Rate {
			return nil, fmt.Errorf("%w: class %s: ceil %s below rate %s", ErrConfig, id, cc.Ceil, cc.Rate)
		}
		if cc.Prio >= NumPrio {
			return nil, fmt.Errorf("%w: class %s: prio %d: must be 0-%d", ErrConfig, id, cc.Prio, NumPrio-1)
		}
		if cc.Limit < 0 {
			return nil, fmt.Errorf("%w: class %s: limit %d: negative", ErrConfig, id, cc.Limit)
		}
		if cc.Limit == 0 {
			cc.Limit = DefaultLimit
		}
		cfg.Classes[i] = cc
		t.byID[id] = i
		t.classes = append(t.classes, &class[P]{cfg: cc, parent: -1})
	}
	for _, c := range t.classes {
		if c.cfg.Parent == "" {
			continue
		}
		pid, err := NormalizeID(c.cfg.Parent)
		if err != nil {
			return nil, fmt.Errorf("class %s: parent: %w", c.cfg.ID, err)
		}
		if strings.HasSuffix(pid, ":") {
			if maj, _, _ := strings.Cut(c.cfg.ID, ":"); pid != maj+":" {
				return nil, fmt.Errorf("%w: class %s: parent %s is not this qdisc (%s:)", ErrConfig, c.cfg.ID, c.cfg.Parent, maj)
			}
			c.cfg.Parent = ""
			continue
		}
		p, ok := t.byID[pid]
		if !ok {
			return nil, fmt.Errorf("%w: class %s: parent %s: no such class", ErrConfig, c.cfg.ID, c.cfg.Parent)
		}
		c.cfg.Parent = pid
		c.parent = p
	}
	for i, c := range t.classes {
		seen := 0
		for p := c.parent; p >= 0; p = t.classes[p].parent {
			if p == i || seen > len(t.classes) {
				return nil, fmt.Errorf("%w: class %s: is its own ancestor", ErrConfig, c.cfg.ID)
			}
			seen++
		}
		if seen >= MaxDepth {
			return nil, fmt.Errorf("%w: class %s: deeper than %d levels", ErrConfig, c.cfg.ID, MaxDepth)
		}
		c.leaf = true
	}
	for _, c := range t.classes {
		if c.parent >= 0 {
			t.classes[c.parent].leaf = false
		}
	}
	for i, c := range t.classes {
		// Levels as htb_graft_helper/htb_change_class assign them: a root
		// inner class at MaxDepth-1, each inner child one below its
		// parent, every leaf 0.
		if !c.leaf {
			depth := 0
			for p := c.parent; p >= 0; p = t.classes[p].parent {
				depth++
			}
			c.level = MaxDepth - 1 - depth
		}
		rateB := float64(c.cfg.Rate) / 8
		ceilB := float64(c.cfg.Ceil) / 8
		c.rateNs = 1e9 / rateB
		c.ceilNs = 1e9 / ceilB
		burst := c.cfg.Burst
		if burst == 0 {
			burst = units.Size(uint64(rateB)/1e9 + DefaultMTU)
		}
		cburst := c.cfg.CBurst
		if cburst == 0 {
			cburst = units.Size(uint64(ceilB)/1e9 + DefaultMTU)
		}
		c.buffer = int64(float64(burst) * c.rateNs)
		c.cbuffer = int64(float64(cburst) * c.ceilNs)
		c.tokens, c.ctokens, c.tc = c.buffer, c.cbuffer, now
		q := int64(c.cfg.Quantum)
		if q == 0 {
			q = int64(rateB) / int64(cfg.R2Q)
			q = min(max(q, 1000), 200000)
		}
		c.quantum = q
		c.stats = ClassStats{ID: c.cfg.ID, Parent: c.cfg.Parent, Leaf: c.leaf}
		if c.leaf {
			c.leafIdx = len(t.leaves)
			t.leaves = append(t.leaves, i)
			for p := i; p >= 0; p = t.classes[p].parent {
				c.path = append(c.path, p)
			}
		}
	}
	for _, c := range t.classes {
		if !c.leaf && c.level <= 0 {
			return nil, fmt.Errorf("%w: class %s: tree too deep", ErrConfig, c.cfg.ID)
		}
	}
	return t, nil
}

// Leaf returns the leaf index of class id (as NormalizeID spells it, or
// any spelling it accepts), or -1 if id is not a leaf of the tree.
func (t *Tree[P]) Leaf(id string) int {
	n, err := NormalizeID(id)
	if err != nil {
		return -1
	}
	i, ok := t.byID[n]
	if !ok || !t.classes[i].leaf {
		return -1
	}
	return t.classes[i].leafIdx
}

// Leaves returns the ids of the leaf classes, in configuration order.
func (t *Tree[P]) Leaves() []string {
	out := make([]string, len(t.leaves))
	for i, c := range t.leaves {
		out[i] = t.classes[c].cfg.ID
	}
	return out
}

// Config returns the tree's configuration with defaults filled in.
func (t *Tree[P]) Config() Config { return t.cfg }

// Len is the number of packets queued in all leaves.
func (t *Tree[P]) Len() int { return t.backlog }

// Queue is a leaf's queue discipline, in place of the pfifo of Limit
// packets the kernel gives a leaf by default: the qdisc a leaf spec ends
// with ("leaf 1:2 fq_codel"), which htb dequeues from as the kernel's
// htb_dequeue_tree does from cl->leaf.q. It drops what it refuses or
// manages away itself (and accounts for it); Len is what it holds.
type Queue[P any] interface {
	// Enqueue takes p (size bytes) at now; false: it dropped p.
	Enqueue(p P, size int, now int64) bool
	// Dequeue returns the packet to send at now and its size, or ok
	// false when it holds none (an AQM may have dropped what it held).
	Dequeue(now int64) (p P, size int, ok bool)
	Len() int
	Bytes() uint64
}

// SetQueue makes q the queue of leaf (by index, as Leaf returns it),
// before anything is queued there.
func (t *Tree[P]) SetQueue(leaf int, q Queue[P]) {
	t.classes[t.leaves[leaf]].qd = q
}

func (c *class[P]) qlen() int {
	if c.qd != nil {
		return c.qd.Len()
	}
	return c.q.n
}

func (c *class[P]) qbytes() uint64 {
	if c.qd != nil {
		return c.qd.Bytes()
	}
	return c.q.bytes
}

// Enqueue queues p (size bytes) in leaf at time now. It returns false,
// keeping nothing, when the leaf's queue is full (the caller drops p);
// with a Queue of its own, the Queue decides (and drops).
func (t *Tree[P]) Enqueue(leaf int, p P, size int, now int64) bool {
	c := t.classes[t.leaves[leaf]]
	if c.qd != nil {
		before := c.qd.Len()
		ok := c.qd.Enqueue(p, size, now)
		t.backlog += c.qd.Len() - before
		if !ok {
			c.stats.DroppedQueue++
		}
		t.activate(c)
		return ok
	}
	if c.q.n >= c.cfg.Limit {
		c.stats.DroppedQueue++
		return false
	}
	c.q.push(entry[P]{p: p, size: size})
	t.backlog++
	t.activate(c)
	return true
}

// activate adds leaf c to t.active if it holds packets, keeping the
// leaves' order.
func (t *Tree[P]) activate(c *class[P]) {
	if c.active || c.qlen() == 0 {
		return
	}
	c.active = true
	i := sort.SearchInts(t.active, c.leafIdx)
	t.active = append(t.active, 0)
	copy(t.active[i+1:], t.active[i:])
	t.active[i] = c.leafIdx
}

// pruneActive drops the leaves that hold nothing from t.active.
func (t *Tree[P]) pruneActive() {
	w := 0
	for _, pos := range t.active {
		c := t.classes[t.leaves[pos]]
		if c.qlen() == 0 {
			c.active = false
			continue
		}
		t.active[w] = pos
		w++
	}
	t.active = t.active[:w]
}

// modeAt computes c's mode at time now without changing it.
func (c *class[P]) modeAt(now int64) Mode {
	diff := min(now-c.tc, mbuffer)
	if c.ctokens+diff < 0 {
		return CantSend
	}
	if c.tokens+diff >= 0 {
		return CanSend
	}
	return MayBorrow
}

// sendLevel is the level leaf c can send at now (from the modes computed
// into the classes), or -1.
func (t *Tree[P]) sendLevel(c *class[P]) int {
	for _, i := range c.path {
		switch t.classes[i].mode {
		case CantSend:
			return -1
		case CanSend:
			return t.classes[i].level
		}
	}
	return -1 // MayBorrow up to a root class: nobody to borrow from
}

// Next returns the earliest time at which Dequeue returns a packet (ok
// false: nothing queued). It may be before the last time Dequeue was
// called with, meaning "now".
func (t *Tree[P]) Next() (int64, bool) {
	if t.backlog == 0 {
		return 0, false
	}
	best := int64(math.MaxInt64)
	t.pruneActive()
	for _, pos := range t.active {
		c := t.classes[t.leaves[pos]]
		// Through each ancestor A: every class from the leaf to A needs
		// ctokens >= 0, and A tokens >= 0.
		cready := int64(math.MinInt64)
		for _, i := range c.path {
			x := t.classes[i]
			cready = max(cready, x.tc-x.ctokens)
			if cready >= best {
				break
			}
			best = min(best, max(cready, x.tc-x.tokens))
		}
	}
	return best, true
}

// Dequeue returns the packet htb sends at time now, its leaf and ok, or ok
// false when no leaf may send now. Call it again until it says false.
func (t *Tree[P]) Dequeue(now int64) (p P, leaf int, ok bool) {
	if t.backlog == 0 {
		return p, -1, false
	}
	if now > t.last {
		t.last = now
	}
	now = t.last
	// The modes of the classes above the backlogged leaves: sendLevel
	// reads no other.
	t.pruneActive()
	t.gen++
	for _, pos := range t.active {
		for _, i := range t.classes[t.leaves[pos]].path {
			if x := t.classes[i]; x.modeGen != t.gen {
				x.mode, x.modeGen = x.modeAt(now), t.gen
			}
		}
	}
	bestLevel, bestPrio := MaxDepth, NumPrio
	for _, pos := range t.active {
		c := t.classes[t.leaves[pos]]
		c.servedAt = -1
		l := t.sendLevel(c)
		if l < 0 {
			continue
		}
		c.servedAt = l
		if l < bestLevel || l == bestLevel && int(c.cfg.Prio) < bestPrio {
			bestLevel, bestPrio = l, int(c.cfg.Prio)
		}
	}
	if bestLevel == MaxDepth {
		return p, -1, false
	}
	// Deficit round robin among the leaves eligible at (level, prio),
	// starting at the cursor (htb_dequeue_tree): the backlogged leaves
	// from the cursor's position on, then from the first.
	n := len(t.leaves)
	cur := &t.cursor[bestLevel][bestPrio]
	first := sort.SearchInts(t.active, *cur%n)
	for k := range t.active {
		pos := t.active[(first+k)%len(t.active)]
		c := t.classes[t.leaves[pos]]
		if c.servedAt != bestLevel || int(c.cfg.Prio) != bestPrio {
			continue
		}
		var e entry[P]
		if c.qd != nil {
			before := c.qd.Len()
			p, size, ok := c.qd.Dequeue(now)
			t.backlog -= before - c.qd.Len()
			if !ok {
				// Its AQM dropped all it held: choose again.
				return t.Dequeue(now)
			}
			e = entry[P]{p: p, size: size}
		} else {
			e = c.q.pop()
			t.backlog--
		}
		c.deficit[bestLevel] -= int64(e.size)
		if c.deficit[bestLevel] < 0 {
			c.deficit[bestLevel] += c.quantum
			*cur = pos + 1
		} else {
			*cur = pos
		}
		t.charge(c, bestLevel, e.size, now)
		return e.p, pos, true
	}
	return p, -1, false // unreachable: bestLevel came from an eligible leaf
}

// charge accounts a packet of size bytes sent by leaf c at level at time
// now, up the path (htb_charge_class).
func (t *Tree[P]) charge(c *class[P], level, size int, now int64) {
	bytes := size + t.cfg.Overhead
	if bytes < 1 {
		bytes = 1
	}
	for _, i := range c.path {
		x := t.classes[i]
		diff := min(now-x.tc, mbuffer)
		if x.level >= level {
			if x.level == level && !x.leaf {
				x.stats.LentPackets++
				x.stats.LentBytes += uint64(size)
			}
			toks := min(x.tokens+diff, x.buffer) - int64(float64(bytes)*x.rateNs)
			if toks <= -mbuffer {
				toks = 1 - mbuffer
			}
			x.tokens = toks
		} else {
			x.stats.BorrowedPackets++
			x.stats.BorrowedBytes += uint64(size)
			x.tokens += diff
		}
		ctoks := min(x.ctokens+diff, x.cbuffer) - int64(float64(bytes)*x.ceilNs)
		if ctoks <= -mbuffer {
			ctoks = 1 - mbuffer
		}
		x.ctokens = ctoks
		x.tc = now
		x.stats.Packets++
		x.stats.Bytes += uint64(size)
	}
}

// Stats returns every class's counters at time now (modes and buckets
// as of now), in configuration order. It allocates.
func (t *Tree[P]) Stats(now int64) []ClassStats {
	out := make([]ClassStats, len(t.classes))
	for i, c := range t.classes {
		s := c.stats
		diff := min(max(now-c.tc, 0), mbuffer)
		s.Tokens = min(c.tokens+diff, c.buffer)
		s.CTokens = min(c.ctokens+diff, c.cbuffer)
		s.Mode = c.modeAt(max(now, c.tc)).String()
		if c.leaf {
			s.QueuePackets = uint64(c.qlen())
			s.QueueBytes = c.qbytes()
			if x, ok := c.qd.(xstatsQueue); ok {
				s.XStats = x.XStats(now)
			}
		}
		out[i] = s
	}
	// Inner classes' queue depth is their leaves'.
	for _, li := range t.leaves {
		c := t.classes[li]
		for _, i := range c.path[1:] {
			out[i].QueuePackets += uint64(c.qlen())
			out[i].QueueBytes += c.qbytes()
		}
	}
	return out
}

// Drain removes every queued packet (for a tree being replaced), calling
// fn with each and its leaf.
func (t *Tree[P]) Drain(fn func(p P, leaf int)) {
	defer t.pruneActive()
	for _, li := range t.leaves {
		c := t.classes[li]
		for c.q.n > 0 {
			e := c.q.pop()
			t.backlog--
			fn(e.p, c.leafIdx)
		}
		for c.qd != nil && c.qd.Len() > 0 {
			before := c.qd.Len()
			p, _, ok := c.qd.Dequeue(t.last)
			t.backlog -= before - c.qd.Len()
			if ok {
				fn(p, c.leafIdx)
			}
		}
	}
}
