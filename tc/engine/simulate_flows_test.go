package engine

import (
	"testing"
	"time"

	"github.com/wanlab/wanlab/tc/spec"
)

// TestSimulateFlows: with Flows, Simulate sends each flow's packets at its
// rate for Duration and counts the one class's bytes after Warmup.
func TestSimulateFlows(t *testing.T) {
	cfg := SimConfig{Spec: spec.MustParse("delay 10ms"), Duration: time.Second, Warmup: 500 * time.Millisecond,
		Flows: []SimFlow{{Packet: udpPacket(1000), Rate: 8_000_000}}}
	res, err := Simulate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// 1000-byte packets at 8 Mbit/s: one per ms, 1000 in the second.
	if res.PacketsIn != 1000 || len(res.Classes) != 1 {
		t.Fatalf("packets in %d, classes %d: want 1000 and 1", res.PacketsIn, len(res.Classes))
	}
	c := res.Classes[0]
	if c.OfferedBytes != 500*1000 || c.Departed != 991 || c.DelaySumNs != 991*10e6 {
		t.Fatalf("class counts %+v: want 500 packets offered after the warmup, 991 left (those due after the end are not waited for), 10 ms each", c)
	}
	if _, err := Simulate(SimConfig{Flows: cfg.Flows}); err == nil {
		t.Fatal("flows without a duration: no error")
	}
}
