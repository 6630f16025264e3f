package engine

import (
	"strings"
	"testing"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// TestMemoryBudgetBoundsAHoldingSpec: a spec that holds every packet
// ("delay 1e9s limit 4294967295") under a flood keeps at most the budget
// inside; the rest are queue drops, and the budget is all given back.
func TestMemoryBudgetBoundsAHoldingSpec(t *testing.T) {
	s, err := spec.Parse("delay 1e9s limit 4294967295")
	if err != nil {
		t.Fatal(err)
	}
	const budget = 8 << 20
	const packets = 50000
	res, err := Simulate(SimConfig{Impairment: spec.PipelineImpairment(s), Packets: packets, PPS: 1e6, Size: 1500, QueueMemory: budget})
	if err != nil {
		t.Fatal(err)
	}
	perPacket := int64(Headroom+1500) + packetOverhead
	held := int64(packets) - int64(res.Drops.Queue)
	if res.Drops.Queue == 0 || held*perPacket > budget || held < budget/perPacket-1 {
		t.Fatalf("%d queue drops of %d: %d packets (%d B each) held within a %d B budget", res.Drops.Queue, packets, held, perPacket, budget)
	}
	if res.PacketsOut != uint64(held) {
		t.Fatalf("%d left, want the %d held", res.PacketsOut, held)
	}
	found := false
	for _, w := range res.Warnings {
		found = found || strings.Contains(w, "queue memory budget")
	}
	if !found {
		t.Fatalf("no budget warning for a limit of 4294967295 packets: %q", res.Warnings)
	}

	// Shared between pipelines, given back as packets leave.
	b := NewMemoryBudget(units.Size(10 * perPacket))
	var pls [2]*Pipeline
	pool := NewPool(Headroom + 1500)
	for i := range pls {
		if pls[i], err = NewPipeline(s, Options{Memory: b, Start: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		p := pool.Get()
		p.SetLen(100)
		pls[i%2].Enqueue(p, int64(2+i))
	}
	var dropped uint64
	for _, pl := range pls {
		dropped += pl.Snapshot().Totals.Drops.Queue
	}
	if dropped != 10 || b.Held() != units.Size(10*perPacket) {
		t.Fatalf("two pipelines on one budget of 10 packets: %d dropped, %d B held", dropped, b.Held())
	}
	for _, pl := range pls {
		for _, p := range pl.Drain(nil) {
			pool.Put(p)
		}
	}
	if b.Held() != 0 {
		t.Fatalf("%d B still held after every packet left", b.Held())
	}
}

func TestQueueCapacity(t *testing.T) {
	for text, want := range map[string]units.Size{
		"delay 10ms":                          1000 * 1500,
		"delay 1e9s limit 4294967295":         4294967295 * 1500,
		"tbf rate 1mbit burst 10kb limit 1mb": 1 << 20,
		"delay 5ms | pfifo limit 10":          1000*1500 + 10*1500,
	} {
		s, err := spec.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		if got := QueueCapacity(s); got != want {
			t.Errorf("%s: capacity %d, want %d", text, got, want)
		}
	}
	if w := BudgetWarning(1<<20, 2<<20); w != "" {
		t.Errorf("within the budget: %q", w)
	}
}
