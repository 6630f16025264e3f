package proxy

import (
	"context"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/proxy/device"
)

// TestQueueMemoryBoundsBothDirections: with a spec that holds every
// packet ("delay 1e9s limit 4294967295") in both directions, what the two
// directions hold together stays within --queue-memory; every packet
// beyond it is a queue drop, and the spec is warned about.
func TestQueueMemoryBoundsBothDirections(t *testing.T) {
	fa := device.NewFake("fa", 1500, 8, 256)
	fb := device.NewFake("fb", 1500, 8, 256)
	const budget = 1 << 20
	p, err := New(context.Background(), [2]device.Device{fa, fb}, Options{
		Ifaces:      [2]string{"eth-a", "eth-b"},
		Specs:       mustSpecs(t, [2]string{"delay 1e9s limit 4294967295", "delay 1e9s limit 4294967295"}),
		Seed:        1,
		HasSeed:     true,
		QueueMemory: budget,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	pkt := ipv4(17, make([]byte, 1200), 0, false)
	const per = 1000 // per direction; a packet costs at least its 1500-byte buffer
	for i := 0; i < per; i++ {
		for _, f := range []*device.Fake{fa, fb} {
			testenv.WaitFor(t, "room in the fake device", func() bool { return f.Inject(pkt) })
		}
	}
	var in, dropped uint64
	testenv.WaitFor(t, "every packet read", func() bool {
		in, dropped = 0, 0
		for _, d := range p.Stats().Directions {
			in += d.Engine.Totals.PacketsIn
			dropped += d.Engine.Totals.Drops.Queue
		}
		return in == 2*per
	})
	if held := in - dropped; dropped == 0 || held*1500 > budget {
		t.Fatalf("%d packets in, %d queue drops: %d held within a %d-byte budget", in, dropped, held, budget)
	}
	// The budget's warning, after the delay's (no limit holds 1e9 s).
	for iface, w := range p.Warnings() {
		if len(w) != 2 || !strings.Contains(w[1], "queue memory budget") {
			t.Errorf("%s warnings %q: want the delay's and the budget's", iface, w)
		}
	}
}
