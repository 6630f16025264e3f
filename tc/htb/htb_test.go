package htb

import (
	"math"
	"testing"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// flow offers packets of size bytes to a leaf at rate (0: idle) from
// start to stop (stop 0: the whole run).
type flow struct {
	leaf        string
	rate        units.Rate
	size        int
	start, stop int64
}

// result is what each leaf sent in the measurement window, and the
// largest number of bytes a class sent in any window of span ns.
type result struct {
	bps     map[string]float64
	maxSpan map[string]uint64 // per class id (leaves and inner), bytes in the busiest span window
	drops   map[string]uint64
	tree    *Tree[int]
}

// run drives the tree on a virtual clock for dur ns: flows enqueue at
// their rates (leaf queues keep them backlogged), the scheduler sends at
// its own event times. Rates are measured from warm to dur.
func run(t *testing.T, cfg Config, flows []flow, dur, warm, span int64) result {
	t.Helper()
	tr, err := New[int](cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	next := make([]int64, len(flows))
	leaves := make([]int, len(flows))
	for i, f := range flows {
		next[i] = f.start
		if leaves[i] = tr.Leaf(f.leaf); leaves[i] < 0 {
			t.Fatalf("no leaf %s", f.leaf)
		}
	}
	sent := make(map[string]uint64)
	// Sliding windows per class: departures within the last span ns.
	type dep struct {
		t    int64
		size int
	}
	windows := make(map[string][]dep)
	inWin := make(map[string]uint64)
	maxSpan := make(map[string]uint64)
	ids := tr.Leaves()
	account := func(leaf int, size int, now int64) {
		c := tr.classes[tr.leaves[leaf]]
		for _, i := range c.path {
			id := tr.classes[i].cfg.ID
			w := append(windows[id], dep{now, size})
			inWin[id] += uint64(size)
			k := 0
			for k < len(w) && w[k].t <= now-span {
				inWin[id] -= uint64(w[k].size)
				k++
			}
			windows[id] = w[k:]
			if now >= warm && inWin[id] > maxSpan[id] {
				maxSpan[id] = inWin[id]
			}
		}
		if now >= warm {
			sent[ids[leaf]] += uint64(size)
		}
	}
	now := int64(0)
	for now < dur {
		// Next event: an arrival or the scheduler.
		ev := int64(math.MaxInt64)
		for i, f := range flows {
			if f.rate > 0 && (f.stop == 0 || next[i] < f.stop) {
				ev = min(ev, next[i])
			}
		}
		if s, ok := tr.Next(); ok {
			ev = min(ev, max(s, now))
		}
		if ev == math.MaxInt64 || ev >= dur {
			break
		}
		now = ev
		for i, f := range flows {
			for f.rate > 0 && (f.stop == 0 || next[i] < f.stop) && next[i] <= now {
				tr.Enqueue(leaves[i], 0, f.size, next[i])
				next[i] += int64(float64(f.size*8) / float64(f.rate) * 1e9)
			}
		}
		for {
			_, leaf, ok := tr.Dequeue(now)
			if !ok {
				break
			}
			account(leaf, 1500, now)
		}
	}
	res := result{bps: map[string]float64{}, maxSpan: maxSpan, drops: map[string]uint64{}, tree: tr}
	for id, b := range sent {
		res.bps[id] = float64(b) * 8 / (float64(dur-warm) / 1e9)
	}
	for _, s := range tr.Stats(now) {
		res.drops[s.ID] = s.DroppedQueue
	}
	return res
}

const mbit = float64(units.Mbit)

// seedTree is seed 004's tree in bits (100, 20, 50, 20 Mbit/s), with
// the children's ceil given.
func seedTree(ceil units.Rate, r2q uint32) Config {
	c := func(id string, r units.Rate) ClassConfig {
		cc := r
		if ceil > r {
			cc = ceil
		}
		return ClassConfig{ID: id, Parent: "1:1", HTBClass: spec.HTBClass{Rate: r, Ceil: cc}}
	}
	return Config{R2Q: r2q, Classes: []ClassConfig{
		{ID: "1:1", Parent: "1:", HTBClass: spec.HTBClass{Rate: 100 * units.Mbit, Ceil: 100 * units.Mbit}},
		c("1:2", 20*units.Mbit), c("1:3", 50*units.Mbit), c("1:4", 20*units.Mbit),
	}}
}

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*want {
		t.Errorf("%s: %.3f Mbit/s, want %.3f Mbit/s ±%.1f%%", what, got/mbit, want/mbit, tol*100)
	}
}

const sec = int64(1e9)

func greedy(leaf string) flow {
	return flow{leaf: leaf, rate: 200 * units.Mbit, size: 1500}
}

// Under contention every class gets its rate, the seed's ceil = rate
// keeps them there, and nothing exceeds ceil or the parent.
func TestRateUnderContention(t *testing.T) {
	r := run(t, seedTree(0, 0), []flow{greedy("1:2"), greedy("1:3"), greedy("1:4")}, 3*sec, sec, 10e6)
	within(t, "1:2", r.bps["1:2"], 20*mbit, 0.01)
	within(t, "1:3", r.bps["1:3"], 50*mbit, 0.01)
	within(t, "1:4", r.bps["1:4"], 20*mbit, 0.01)
	checkCaps(t, r, map[string]units.Rate{"1:1": 100 * units.Mbit, "1:2": 20 * units.Mbit, "1:3": 50 * units.Mbit, "1:4": 20 * units.Mbit}, 10e6)
	if r.drops["1:2"] == 0 {
		t.Errorf("an overloaded leaf dropped nothing")
	}
}

// checkCaps: in every window of span ns no class sent more than its
// ceil allows plus one burst (1600 b) plus one packet.
func checkCaps(t *testing.T, r result, ceil map[string]units.Rate, span int64) {
	t.Helper()
	for id, c := range ceil {
		limit := float64(c)/8*float64(span)/1e9 + 1600 + 1500
		if got := float64(r.maxSpan[id]); got > limit {
			t.Errorf("class %s sent %.0f bytes in %d ms, ceil %s allows %.0f", id, got, span/1e6, c, limit)
		}
	}
}

// With siblings idle a class borrows up to its ceil; with all busy the
// spare parent rate is split by quantum (r2q 200: quanta 12500, 31250,
// 12500 bytes, in proportion to the rates).
func TestBorrowing(t *testing.T) {
	t.Run("alone up to ceil", func(t *testing.T) {
		cfg := seedTree(60*units.Mbit, 0)
		r := run(t, cfg, []flow{greedy("1:2")}, 3*sec, sec, 10e6)
		within(t, "1:2 alone", r.bps["1:2"], 60*mbit, 0.01)
		checkCaps(t, r, map[string]units.Rate{"1:2": 60 * units.Mbit}, 10e6)
		st := r.tree.Stats(3 * sec)
		if st[1].BorrowedBytes == 0 || st[0].LentBytes == 0 {
			t.Errorf("borrowed %d lent %d bytes, want both > 0", st[1].BorrowedBytes, st[0].LentBytes)
		}
	})
	t.Run("alone up to parent", func(t *testing.T) {
		r := run(t, seedTree(150*units.Mbit, 0), []flow{greedy("1:3")}, 3*sec, sec, 10e6)
		within(t, "1:3 alone", r.bps["1:3"], 100*mbit, 0.01)
		checkCaps(t, r, map[string]units.Rate{"1:1": 100 * units.Mbit}, 10e6)
	})
	t.Run("idle sibling shared by quantum", func(t *testing.T) {
		r := run(t, seedTree(100*units.Mbit, 200), []flow{greedy("1:2"), greedy("1:3")}, 3*sec, sec, 10e6)
		// 30 Mbit/s spare, shared 12500:31250 = 2:5.
		within(t, "1:2", r.bps["1:2"], (20+30*2.0/7)*mbit, 0.02)
		within(t, "1:3", r.bps["1:3"], (50+30*5.0/7)*mbit, 0.02)
		within(t, "sum", r.bps["1:2"]+r.bps["1:3"], 100*mbit, 0.01)
		checkCaps(t, r, map[string]units.Rate{"1:1": 100 * units.Mbit}, 10e6)
	})
	t.Run("default quanta clamp to 200000", func(t *testing.T) {
		// rate/r2q is 250000 and 625000 bytes: both clamp to 200000
		// (htb_change_class), so the spare is split evenly.
		r := run(t, seedTree(100*units.Mbit, 0), []flow{greedy("1:2"), greedy("1:3")}, 3*sec, sec, 10e6)
		within(t, "1:2", r.bps["1:2"], 35*mbit, 0.03)
		within(t, "1:3", r.bps["1:3"], 65*mbit, 0.03)
	})
	t.Run("all busy", func(t *testing.T) {
		r := run(t, seedTree(100*units.Mbit, 200), []flow{greedy("1:2"), greedy("1:3"), greedy("1:4")}, 3*sec, sec, 10e6)
		// 10 Mbit/s spare in 2:5:2.
		within(t, "1:2", r.bps["1:2"], (20+10*2.0/9)*mbit, 0.02)
		within(t, "1:3", r.bps["1:3"], (50+10*5.0/9)*mbit, 0.02)
		within(t, "1:4", r.bps["1:4"], (20+10*2.0/9)*mbit, 0.02)
		checkCaps(t, r, map[string]units.Rate{"1:1": 100 * units.Mbit}, 10e6)
	})
}

// The spare rate goes to the lowest prio first; rates stay guaranteed.
func TestPrio(t *testing.T) {
	cfg := seedTree(100*units.Mbit, 200)
	cfg.Classes[2].Prio = 1 // 1:3
	r := run(t, cfg, []flow{greedy("1:2"), greedy("1:3")}, 3*sec, sec, 10e6)
	within(t, "1:2 (prio 0)", r.bps["1:2"], 50*mbit, 0.02)
	within(t, "1:3 (prio 1)", r.bps["1:3"], 50*mbit, 0.02)
}

// A class that goes idle lends its rate; when it comes back it gets its
// rate again at once.
func TestComeBack(t *testing.T) {
	cfg := seedTree(100*units.Mbit, 200)
	f2 := greedy("1:2")
	f3 := greedy("1:3")
	f3.start = 2 * sec
	r := run(t, cfg, []flow{f2, f3}, 4*sec, 3*sec, 10e6)
	within(t, "1:3 after coming back", r.bps["1:3"], (50+30*5.0/7)*mbit, 0.02)
}

// Three levels: 1:1 (100) > 1:10 (60, ceil 100) > leaves 1:11, 1:12
// (20 each, ceil 100), and 1:20 (40, ceil 40) a leaf under 1:1.
func TestThreeLevels(t *testing.T) {
	M := units.Mbit
	cfg := Config{R2Q: 200, Classes: []ClassConfig{
		{ID: "1:1", HTBClass: spec.HTBClass{Rate: 100 * M}},
		{ID: "1:10", Parent: "1:1", HTBClass: spec.HTBClass{Rate: 60 * M, Ceil: 100 * M}},
		{ID: "1:11", Parent: "1:10", HTBClass: spec.HTBClass{Rate: 20 * M, Ceil: 100 * M}},
		{ID: "1:12", Parent: "1:10", HTBClass: spec.HTBClass{Rate: 20 * M, Ceil: 100 * M}},
		{ID: "1:20", Parent: "1:1", HTBClass: spec.HTBClass{Rate: 40 * M, Ceil: 40 * M}},
	}}
	r := run(t, cfg, []flow{greedy("1:11"), greedy("1:12"), greedy("1:20")}, 3*sec, sec, 10e6)
	within(t, "1:20", r.bps["1:20"], 40*mbit, 0.01)
	within(t, "1:11", r.bps["1:11"], 30*mbit, 0.02)
	within(t, "1:12", r.bps["1:12"], 30*mbit, 0.02)
	checkCaps(t, r, map[string]units.Rate{"1:1": 100 * M, "1:20": 40 * M, "1:10": 100 * M}, 10e6)
	// 1:20 idle: the 1:10 subtree borrows from 1:1 up to 100.
	r = run(t, cfg, []flow{greedy("1:11"), greedy("1:12")}, 3*sec, sec, 10e6)
	within(t, "1:11 with 1:20 idle", r.bps["1:11"], 50*mbit, 0.02)
	within(t, "1:12 with 1:20 idle", r.bps["1:12"], 50*mbit, 0.02)
}

// A flow below its rate is not delayed by a busy sibling beyond one
// packet and gets everything it offers.
func TestUnderRateFlowGetsAll(t *testing.T) {
	f := flow{leaf: "1:2", rate: 10 * units.Mbit, size: 1500}
	r := run(t, seedTree(100*units.Mbit, 0), []flow{f, greedy("1:3")}, 3*sec, sec, 10e6)
	within(t, "1:2 at 10 of 20", r.bps["1:2"], 10*mbit, 0.01)
	within(t, "1:3 takes the rest", r.bps["1:3"], 90*mbit, 0.01)
	if r.drops["1:2"] != 0 {
		t.Errorf("1:2 dropped %d packets below its rate", r.drops["1:2"])
	}
}

func TestConfigErrors(t *testing.T) {
	M := units.Mbit
	for name, cfg := range map[string]Config{
		"class 1:2: parent 1:9: no such class":   {Classes: []ClassConfig{{ID: "1:1", HTBClass: spec.HTBClass{Rate: M}}, {ID: "1:2", Parent: "1:9", HTBClass: spec.HTBClass{Rate: M}}}},
		"class 1:1: ceil 1mbit below rate 2mbit": {Classes: []ClassConfig{{ID: "1:1", HTBClass: spec.HTBClass{Rate: 2 * M, Ceil: M}}}},
		"class 1:1: defined twice":               {Classes: []ClassConfig{{ID: "1:1", HTBClass: spec.HTBClass{Rate: M}}, {ID: "1:01", HTBClass: spec.HTBClass{Rate: M}}}},
		"class id \"x\"":                         {Classes: []ClassConfig{{ID: "x", HTBClass: spec.HTBClass{Rate: M}}}},
		"class 1:1: prio 8":                      {Classes: []ClassConfig{{ID: "1:1", HTBClass: spec.HTBClass{Rate: M, Prio: 8}}}},
		"is its own ancestor":                    {Classes: []ClassConfig{{ID: "1:1", Parent: "1:2", HTBClass: spec.HTBClass{Rate: M}}, {ID: "1:2", Parent: "1:1", HTBClass: spec.HTBClass{Rate: M}}}},
	} {
		_, err := New[int](cfg, 0)
		if err == nil || !contains(err.Error(), name) {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func BenchmarkDequeue(b *testing.B) {
	tr, err := New[int](seedTree(100*units.Mbit, 0), 0)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(1500)
	now := int64(0)
	for i := 0; i < b.N; i++ {
		tr.Enqueue(i%3, i, 1500, now)
		if t, ok := tr.Next(); ok && t > now {
			now = t
		}
		tr.Dequeue(now)
	}
}
