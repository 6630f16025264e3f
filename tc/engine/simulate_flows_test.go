package engine

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wanlab/wanlab/tc/spec"
)

// TestSimulateFlows: with Flows, Simulate sends each flow's packets at its
// rate for Duration and reports the one class's rates after Warmup: a
// pipeline is a tree of one leaf.
func TestSimulateFlows(t *testing.T) {
	f := Flow{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Protocol: 17, Size: 1000, Rate: 8_000_000}
	cfg := SimConfig{Impairment: spec.PipelineImpairment(spec.MustParse("delay 10ms")), Duration: time.Second, Warmup: 500 * time.Millisecond, Flows: []Flow{f}}
	res, err := Simulate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// 1000-byte packets at 8 Mbit/s: one per ms, 1000 in the second.
	if res.PacketsIn != 1000 || res.Tree == nil || len(res.Tree.Result) != 1 {
		t.Fatalf("packets in %d, tree %+v: want 1000 and one class", res.PacketsIn, res.Tree)
	}
	c := res.Tree.Result[0]
	if c.ID != "default" || !c.Leaf || c.OfferedBps != 8e6 || res.PacketsOut != 991 || c.DelayMeanMs != 10 {
		t.Fatalf("class %+v, %d out: want 8 Mbit/s offered after the warmup, 991 left (those due after the end are not waited for), 10 ms each", c, res.PacketsOut)
	}
	if _, err := Simulate(SimConfig{Flows: cfg.Flows, Duration: time.Second, Warmup: time.Second}); err == nil {
		t.Fatal("a warmup as long as the run: no error")
	}
	if _, err := Simulate(SimConfig{Impairment: spec.Impairment{Classes: &spec.Classes{}}}); err == nil {
		t.Fatal("classes without flows: no error")
	}
}
