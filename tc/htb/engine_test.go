package htb

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

func mustClasses(t testing.TB, s string) *spec.Classes {
	t.Helper()
	cs, err := spec.ParseClasses(s)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// udp builds an IPv4/UDP packet of size bytes to dst (10.0.X.1).
func udp(pool *engine.Pool, x byte, size int, at int64) *engine.Packet {
	p := pool.Get()
	p.SetLen(size)
	for i := range p.Data {
		p.Data[i] = 0
	}
	p.Data[0], p.Data[9] = 0x45, 17
	p.Data[2], p.Data[3] = byte(size>>8), byte(size)
	copy(p.Data[16:20], []byte{10, 0, x, 1})
	p.Arrival = at
	return p
}

// Replacing the tree while packets wait in it loses none of them.
func TestReplaceKeepsPackets(t *testing.T) {
	pl, err := NewPipeline(mustClasses(t, seedClasses), engine.Options{Seed: 1}, Options{Now: 1})
	if err != nil {
		t.Fatal(err)
	}
	pool := engine.NewPool(0)
	now := int64(1e9)
	const n = 300
	for i := 0; i < n; i++ {
		pl.Enqueue(udp(pool, byte(2+i%3), 1500, now), now) // 450 kB at once: most wait
	}
	out := pl.Dequeue(now, nil)
	if err := Replace(pl, mustClasses(t, "class 1:1 htb rate 10mbit; class 1:2 parent 1:1 htb rate 10mbit; default 1:2"), Options{Now: now + 1}); err != nil {
		t.Fatal(err)
	}
	got := len(out)
	var last int64
	for {
		next, ok := pl.NextDeparture()
		if !ok {
			break
		}
		ps := pl.Dequeue(next, nil)
		got += len(ps)
		for _, p := range ps {
			last = max(last, p.Depart)
		}
	}
	// 1:2's waiting packets moved to the new 1:2 and leave at its 10
	// Mbit/s (about 100 of them: over 100 ms); 1:3's and 1:4's, which
	// have no class of their name any more, left at once.
	if d := last - now; d < 100e6 {
		t.Errorf("last departure %v ms after the replace: the moved queue was not shaped", float64(d)/1e6)
	}
	snap := pl.Snapshot()
	if dropped := snap.Totals.Drops.Total(); uint64(got)+dropped != n || dropped != 0 {
		t.Fatalf("%d out, %d dropped of %d", got, dropped, n)
	}
	if snap.Swaps != 1 || len(snap.Classes) != 1 || snap.Classes[0].Name != "1:2" {
		t.Fatalf("after replace: %+v", snap.Classes)
	}
}

// An idle class sends its burst at once, then its rate: burst 15k lets
// ten 1500-byte packets leave together.
func TestBurst(t *testing.T) {
	tr, err := New[int](Config{Classes: []ClassConfig{{ID: "1:1", HTBClass: spec.HTBClass{Rate: 8 * units.Mbit, Burst: 15000, CBurst: 15000}}}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		tr.Enqueue(0, i, 1500, 0)
	}
	at := int64(5e9) // idle long enough to be full
	n := 0
	for {
		if _, _, ok := tr.Dequeue(at); !ok {
			break
		}
		n++
	}
	// Tokens may go negative by one packet (the kernel charges after
	// sending): the burst lets 10 leave plus the one that empties it.
	if n != 11 {
		t.Fatalf("%d packets at once after idling, want 11 (15000-byte burst)", n)
	}
	next, _ := tr.Next()
	if want := at + 1500*8*1e9/8e6; next-at > int64(want)+1 || next <= at {
		t.Fatalf("next packet %d ns later, want about one packet time %v", next-at, want)
	}
}

func BenchmarkPipelineClasses(b *testing.B) {
	pl, err := NewPipeline(mustClasses(b, seedClasses), engine.Options{Seed: 1}, Options{Now: 1})
	if err != nil {
		b.Fatal(err)
	}
	pool := engine.NewPool(0)
	out := make([]*engine.Packet, 0, 1024)
	b.ReportAllocs()
	b.SetBytes(1500)
	now := int64(1e9)
	for i := 0; i < b.N; i++ {
		now += 120000 // 100 Mbit/s offered
		pl.Enqueue(udp(pool, byte(2+i%3), 1500, now), now)
		out = pl.Dequeue(now, out[:0])
		for _, p := range out {
			pool.Put(p)
		}
	}
}

// A packet leaves no earlier than its leaf's stages release it, even when
// the class has tokens to spare: htb never sends a packet before it
// reached it.
func TestLeafDelayKept(t *testing.T) {
	pl, err := NewPipeline(mustClasses(t, seedClasses), engine.Options{Seed: 1}, Options{Now: 1})
	if err != nil {
		t.Fatal(err)
	}
	pool := engine.NewPool(0)
	now := int64(1e9)
	n := 0
	check := func(ps []*engine.Packet) {
		for _, p := range ps {
			if p.Depart-p.Arrival < 10e6 {
				t.Fatalf("a 1:3 packet left %v ms after arriving; its leaf delays 10ms", float64(p.Depart-p.Arrival)/1e6)
			}
			n++
			pool.Put(p)
		}
	}
	for i := 0; i < 2000; i++ {
		now += 300000 // 40 Mbit/s: below 1:3's rate, tokens to spare
		pl.Enqueue(udp(pool, 3, 1500, now), now)
		check(pl.Dequeue(now, nil))
	}
	for {
		next, ok := pl.NextDeparture()
		if !ok {
			break
		}
		check(pl.Dequeue(next, nil))
	}
	if n != 2000 {
		t.Fatalf("%d of 2000 packets left", n)
	}
}

// TestSetupStartsChainsWithTree checks that the class chains start when
// the tree does (a trace in a class replays from its start, not from the
// tree's time since 0).
func TestSetupStartsChainsWithTree(t *testing.T) {
	s, err := NewSetup(mustClasses(t, seedClasses), Options{Now: 5e9})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Options(engine.Options{Start: 1}).Start; got != 5e9 {
		t.Errorf("chains start at %d, the tree at %d", got, int64(5e9))
	}
}

// A leaf's queue discipline shows its xstats in the scheduler's stats.
func TestLeafXStats(t *testing.T) {
	pl, err := NewPipeline(mustClasses(t, "class 1:1 htb rate 1mbit; class 1:2 parent 1:1 htb rate 1mbit; leaf 1:2 codel; default 1:2"), engine.Options{Seed: 1}, Options{Now: 1})
	if err != nil {
		t.Fatal(err)
	}
	pool := engine.NewPool(0)
	now := int64(1e9)
	for i := 0; i < 50; i++ {
		pl.Enqueue(udp(pool, 2, 1500, now), now)
	}
	pl.Dequeue(now+100e6, nil)
	stats := pl.Snapshot().Scheduler
	if len(stats) == 0 {
		t.Fatal("no scheduler stats")
	}
	for _, s := range stats {
		switch {
		case s.Leaf && (s.XStats == nil || s.XStats.CoDel == nil || s.XStats.CoDel.MaxPacket != 1500):
			t.Errorf("leaf %s: xstats %+v", s.ID, s.XStats)
		case !s.Leaf && s.XStats != nil:
			t.Errorf("inner class %s has xstats", s.ID)
		}
	}
}

// BenchmarkPipelineManyClasses is BenchmarkPipelineClasses in a tree of
// 10,000 leaves of which three receive traffic: the cost per packet
// follows the classes holding packets, not the tree's size. With last,
// every packet matches the last of the 10,000 filters, which are tried
// in order (first match wins).
func BenchmarkPipelineManyClasses(b *testing.B) {
	for _, last := range []bool{false, true} {
		b.Run(fmt.Sprintf("last=%v", last), func(b *testing.B) { benchManyClasses(b, last) })
	}
}

func benchManyClasses(b *testing.B, last bool) {
	var sb strings.Builder
	sb.WriteString("htb default 2; class 1:1 htb rate 10gbit")
	for i := 2; i < 10002; i++ {
		fmt.Fprintf(&sb, "; class 1:%x parent 1:1 htb rate 1mbit ceil 10gbit", i)
	}
	for i := 2; i < 10002; i++ {
		fmt.Fprintf(&sb, "; filter dst 10.%d.%d.0/24 flowid 1:%x", i/250, i%250, i)
	}
	pl, err := NewPipeline(mustClasses(b, sb.String()), engine.Options{Seed: 1}, Options{Now: 1})
	if err != nil {
		b.Fatal(err)
	}
	pool := engine.NewPool(0)
	out := make([]*engine.Packet, 0, 1024)
	b.ResetTimer()
	b.ReportAllocs()
	b.SetBytes(1500)
	now := int64(1e9)
	for i := 0; i < b.N; i++ {
		now += 120000 // 100 Mbit/s offered
		p := udp(pool, byte(2+i%3), 1500, now)
		if last {
			copy(p.Data[16:20], []byte{10, 40, 1, 1}) // 10.40.1.0/24: the last filter
		}
		pl.Enqueue(p, now)
		out = pl.Dequeue(now, out[:0])
		for _, p := range out {
			pool.Put(p)
		}
	}
}

// NewPipeline builds an engine pipeline running cs.
func NewPipeline(cs *spec.Classes, opt engine.Options, o Options) (*engine.Pipeline, error) {
	s, err := NewSetup(cs, o)
	if err != nil {
		return nil, err
	}
	return engine.NewPipeline(nil, s.Options(opt))
}

// Replace swaps pl's classes for cs at time now (engine.Pipeline.Replace).
func Replace(pl *engine.Pipeline, cs *spec.Classes, o Options) error {
	o.Now = max(o.Now, 0)
	s, err := NewSetup(cs, o)
	if err != nil {
		return err
	}
	return s.Install(pl, o.Now)
}
