package proxy

import (
	"context"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/proxy/device"
	"github.com/wanlab/wanlab/tc/schedule"
)

// TestScheduleSteps runs a schedule on one direction of a forwarder over
// fake devices: its steps replace the spec (a Swap each), the stats show
// the step in force and the next one, and proxy set ends it.
func TestScheduleSteps(t *testing.T) {
	s, err := schedule.Parse("t.sched", []byte("0s delay 1ms\n300ms delay 2ms\nend\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	fa := device.NewFake("fa", 1500, 8, 256)
	fb := device.NewFake("fb", 1500, 8, 256)
	p, err := New(context.Background(), [2]device.Device{fa, fb}, Options{
		Ifaces: [2]string{"eth-a", "eth-b"}, Seed: 1, HasSeed: true,
		Schedules: [2]*schedule.Schedule{nil, s},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	testenv.WaitFor(t, "eth-b at the first step", func() bool { return p.Specs()["eth-b"] == "delay 1ms" })
	st := p.Stats()
	if st.Directions[0].Schedule != nil {
		t.Fatal("eth-a has no schedule but its stats show one")
	}
	// The step at 300 ms may already be in force on a loaded machine.
	if sc := st.Directions[1].Schedule; sc == nil || sc.File != "t.sched" || sc.Step == 1 && (sc.NextStep != 2 || sc.NextMs != 300) {
		t.Fatalf("schedule state %+v", sc)
	}
	// The step counts once applied: after the spec shows.
	testenv.WaitFor(t, "the second step applied", func() bool {
		return p.Specs()["eth-b"] == "delay 2ms" && p.Stats().Directions[1].Schedule.Applied == 2
	})
	if sc := p.Stats().Directions[1].Schedule; sc.Step != 2 || sc.NextStep != 0 || sc.Applied != 2 || sc.Line != 2 {
		t.Fatalf("after the last step: %+v", sc)
	}
	if err := p.SetSpec("eth-b", "delay 3ms"); err != nil {
		t.Fatal(err)
	}
	sc := p.Stats().Directions[1].Schedule
	if !sc.Stopped || !strings.Contains(sc.Describe(nil), "stopped by proxy set") || p.Specs()["eth-b"] != "delay 3ms" {
		t.Fatalf("after proxy set: %+v", sc)
	}
	if n := p.Stats().Directions[1].Engine.Swaps; n != 3 {
		t.Fatalf("%d swaps, want 3 (two steps and the set)", n)
	}
}
