package htb

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/spec"
)

const seedClasses = "htb default 2; class 1:1 htb rate 100mbit; " +
	"class 1:2 parent 1:1 htb rate 20mbit ceil 100mbit; class 1:3 parent 1:1 htb rate 50mbit ceil 100mbit; " +
	"class 1:4 parent 1:1 htb rate 20mbit ceil 100mbit; " +
	"filter dst 10.0.2.0/24 flowid 1:2; filter dst 10.0.3.0/24 flowid 1:3; filter dst 10.0.4.0/24 flowid 1:4; " +
	"leaf 1:3 delay 10ms"

func simulate(t *testing.T, classes string, flows ...string) map[string]engine.SimClass {
	t.Helper()
	cs, err := spec.ParseClasses(classes)
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.SimConfig{Impairment: spec.Impairment{Classes: cs}, TreeOptions: EngineOptions, Duration: 3 * time.Second, Warmup: time.Second, Seed: 1}
	for _, f := range flows {
		fl, err := engine.ParseFlow(f)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Flows = append(cfg.Flows, fl)
	}
	res, err := engine.Simulate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := res.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
	out := map[string]engine.SimClass{}
	for _, c := range res.Tree.Result {
		out[c.ID] = c
	}
	return out
}

// Through the engine: the classifier sorts by destination, the leaf's
// netem delays, htb shares 100 Mbit/s among the classes.
func TestSimulateSeedTree(t *testing.T) {
	r := simulate(t, seedClasses, "dst=10.0.2.1,rate=60mbit", "dst=10.0.3.1,rate=60mbit", "dst=10.0.4.1,rate=60mbit")
	// Spare 10 Mbit/s; default quanta all clamp to 200000: evenly.
	within(t, "1:2", r["1:2"].RealizedBps, (20+10.0/3)*mbit, 0.03)
	within(t, "1:3", r["1:3"].RealizedBps, (50+10.0/3)*mbit, 0.03)
	within(t, "1:4", r["1:4"].RealizedBps, (20+10.0/3)*mbit, 0.03)
	within(t, "1:1", r["1:1"].RealizedBps, 100*mbit, 0.01)
	if r["1:2"].BorrowedBytes == 0 || r["1:1"].LentBytes == 0 || r["1:2"].Drops.Queue == 0 {
		t.Errorf("1:2 borrowed %d, 1:1 lent %d, 1:2 queue drops %d: want all > 0", r["1:2"].BorrowedBytes, r["1:1"].LentBytes, r["1:2"].Drops.Queue)
	}
	if d := r["1:3"].DelayMeanMs; d < 10 {
		t.Errorf("1:3's leaf netem delay 10ms: mean delay %.2f ms", d)
	}
	// 1:4 idle: 1:2 and 1:3 share its 20 Mbit/s.
	r = simulate(t, seedClasses, "dst=10.0.2.1,rate=90mbit", "dst=10.0.3.1,rate=90mbit")
	within(t, "1:2 with 1:4 idle", r["1:2"].RealizedBps, 35*mbit, 0.03)
	within(t, "1:3 with 1:4 idle", r["1:3"].RealizedBps, 65*mbit, 0.03)
	// Unmatched traffic goes to the default class 1:2.
	r = simulate(t, seedClasses, "dst=10.0.9.1,rate=50mbit")
	within(t, "default 1:2", r["1:2"].RealizedBps, 50*mbit, 0.01)
}

func TestSimulateNoDefaultIsDirect(t *testing.T) {
	r := simulate(t, strings.Replace(seedClasses, "htb default 2; ", "", 1), "dst=10.0.9.1,rate=300mbit", "dst=10.0.2.1,rate=300mbit")
	within(t, "direct", r[DirectClass].RealizedBps, 300*mbit, 0.01)
	within(t, "1:2 alone", r["1:2"].RealizedBps, 100*mbit, 0.01)
}

// An htb leaf whose spec is a queue discipline holds its packets in it:
// an unresponsive flow at 1.2 times a 10 Mbit/s class's rate fills the
// default pfifo (1000 packets, over a second of delay), pfifo limit 50
// caps it at 50 packets, and a codel leaf drops it down to near its
// target once its drop rate has caught up with the excess (about 2 s).
func TestSimulateQueueLeaf(t *testing.T) {
	const tree = "htb default 2; class 1:1 htb rate 10mbit; class 1:2 parent 1:1 htb rate 10mbit"
	run := func(classes string) engine.SimClass {
		cs, err := spec.ParseClasses(classes)
		if err != nil {
			t.Fatal(err)
		}
		fl, _ := engine.ParseFlow("dst=10.0.2.1,rate=12mbit")
		res, err := engine.Simulate(engine.SimConfig{Impairment: spec.Impairment{Classes: cs}, TreeOptions: EngineOptions, Duration: 10 * time.Second, Warmup: 4 * time.Second, Seed: 1, Flows: []engine.Flow{fl}})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range res.Tree.Result {
			if c.ID == "1:2" {
				return c
			}
		}
		t.Fatal("no class 1:2")
		return engine.SimClass{}
	}
	fifo := run(tree)
	small := run(tree + "; leaf 1:2 pfifo limit 50")
	cd := run(tree + "; leaf 1:2 codel")
	t.Logf("pfifo: %+v\npfifo 50: %+v\ncodel: %+v", fifo, small, cd)
	if fifo.DelayMeanMs < 500 {
		t.Errorf("default pfifo: mean delay %.1f ms, want the full 1000-packet queue", fifo.DelayMeanMs)
	}
	if small.QueueMax > 50 || small.DelayMeanMs > 70 {
		t.Errorf("pfifo limit 50: queue max %d, mean delay %.1f ms", small.QueueMax, small.DelayMeanMs)
	}
	if cd.DelayMeanMs > fifo.DelayMeanMs/4 || cd.Drops.AQM == 0 {
		t.Errorf("codel leaf: mean delay %.1f ms (pfifo %.1f ms), drops %+v", cd.DelayMeanMs, fifo.DelayMeanMs, cd.Drops)
	}
	within(t, "1:2 with codel", cd.RealizedBps, 10*mbit, 0.03)
}
