package proxy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/proxy/device"
)

// stallDevice is a fake device whose next Write, once armed, blocks until
// the test opens the gate: a release loop that fell behind (its thread not
// scheduled on a loaded machine, as the issue-7 bench saw for 1 to 48 ms).
type stallDevice struct {
	*device.Fake
	armed   chan struct{} // receives once: the next Write blocks
	entered chan struct{}
	gate    chan struct{}
}

func (s *stallDevice) Write(bufs [][]byte, offset int) (int, error) {
	select {
	case <-s.armed:
		s.entered <- struct{}{}
		<-s.gate
	default:
	}
	return s.Fake.Write(bufs, offset)
}

// TestLatenessCountsStalledWrites checks that packets written after
// their engine departure are counted with how late they were, so a
// burst above a tbf's bound at the receiver can be told apart from the
// engine's schedule (whose 1 ms bursts stay within burst + rate × 1 ms).
func TestLatenessCountsStalledWrites(t *testing.T) {
	fa := &stallDevice{Fake: device.NewFake("fa", 1500, 8, 256), armed: make(chan struct{}, 1),
		entered: make(chan struct{}), gate: make(chan struct{})}
	fb := device.NewFake("fb", 1500, 8, 256)
	p, err := New(context.Background(), [2]device.Device{fa, fb}, Options{
		Ifaces:  [2]string{"eth-a", "eth-b"},
		Seed:    1,
		HasSeed: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	pkt := ipv4(17, []byte("on time"), 0, false)

	// The count follows the write the fake delivers (the forwarder
	// records a batch once Write returns): take it until it holds every
	// packet written, summing what each take returns.
	take := func(want uint64) [2]Lateness {
		var sum [2]Lateness
		testenv.WaitFor(t, fmt.Sprintf("%d writes counted", want), func() bool {
			l := p.TakeLateness()
			for i := range sum {
				sum[i].Iface = l[i].Iface
				sum[i].Packets += l[i].Packets
				sum[i].Late1ms += l[i].Late1ms
				sum[i].Max = max(sum[i].Max, l[i].Max)
			}
			return sum[0].Packets+sum[1].Packets >= want
		})
		return sum
	}
	const n = 5
	for range n {
		fa.Inject(pkt)
		receive(t, fa.Fake, 5*time.Second)
	}
	l := take(n)
	if l[0].Iface != "eth-a" || l[0].Packets != n || l[1].Packets != 0 {
		t.Fatalf("after %d packets one way: %+v, want %d packets on eth-a, none on eth-b", n, l, n)
	}

	const stall = 3 * time.Millisecond
	fa.armed <- struct{}{}
	fa.Inject(pkt)
	<-fa.entered
	time.AfterFunc(stall, func() { close(fa.gate) })
	receive(t, fa.Fake, 5*time.Second)
	l = take(1)
	if l[0].Packets != 1 || l[0].Late1ms != 1 || l[0].Max < stall {
		t.Errorf("a write stalled %v: %+v, want 1 packet, 1 late by ≥ 1 ms, max ≥ %v", stall, l[0], stall)
	}
	if l = p.TakeLateness(); l[0].Packets != 0 || l[0].Max != 0 {
		t.Errorf("TakeLateness did not start again: %+v", l[0])
	}
}
