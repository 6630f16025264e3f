package engine

import (
	"math"
	"testing"
)

// releaseRun drives s with arrivals every step ns. With eager, it calls
// Dequeue at every NextDeparture between arrivals (a perfect release
// loop) and checks that NextDeparture is a lower bound: nothing leaves
// before it. Without eager, it dequeues only at arrivals (a very late
// release loop). It returns every departure as (seq, depart, flags).
func releaseRun(t *testing.T, s string, n int, step int64, eager bool) []rec {
	t.Helper()
	pl, err := NewPipeline(mustParse(t, s), Options{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	var recs []rec
	var out []*Packet
	keep := func() {
		for _, p := range out {
			recs = append(recs, rec{p.Seq, p.Arrival, p.Depart, len(p.Data), p.Flags})
		}
	}
	wakeups := 0
	for i := 0; i < n; i++ {
		a := int64(1e9) + int64(i)*step
		for eager {
			nd, ok := pl.NextDeparture()
			if !ok || nd >= a {
				break
			}
			if nd > pl.last {
				if out = pl.Dequeue(nd-1, out[:0]); len(out) != 0 {
					t.Fatalf("%s: packet %d left at %d, before NextDeparture %d", s, out[0].Seq, out[0].Depart, nd)
				}
			}
			out = pl.Dequeue(nd, out[:0])
			keep()
			wakeups++
			if n2, ok := pl.NextDeparture(); ok && n2 <= nd {
				t.Fatalf("%s: no progress: NextDeparture %d after Dequeue(%d)", s, n2, nd)
			}
		}
		if !eager {
			out = pl.Dequeue(a, out[:0])
			keep()
		}
		size := 200 + (i*37)%1300
		pl.Enqueue(&Packet{Data: udpPacket(size), Arrival: a}, a)
	}
	out = pl.Dequeue(math.MaxInt64, out[:0])
	keep()
	return recs
}

// TestLateReleaseSameDepartures: departures are computed from the
// packets' times, not from when the release loop calls; and NextDeparture
// never promises later than the truth.
func TestLateReleaseSameDepartures(t *testing.T) {
	for _, s := range []string{
		"delay 10ms 3ms loss 2% duplicate 3% reorder 5% | tbf rate 20mbit burst 8kb limit 60kb",
		"delay 5ms | tbf rate 10mbit burst 4kb limit 40kb peakrate 20mbit mtu 1600 | netem delay 1ms 1ms",
		"delay 2ms slot 1ms 3ms packets 3 | tbf rate 50mbit burst 10kb limit 100kb",
		"tbf rate 5mbit burst 3kb limit 30kb | netem delay 20ms 10ms rate 4mbit",
		"delay 1ms 5ms distribution pareto limit 50",
		// Sparse: tbf mostly empty but short of tokens when a packet arrives.
		"delay 1ms 200us | tbf rate 40mbit burst 1600 limit 1mb peakrate 80mbit mtu 1500",
	} {
		eager := releaseRun(t, s, 5000, 300e3, true)
		late := releaseRun(t, s, 5000, 300e3, false)
		if len(eager) != len(late) {
			t.Fatalf("%s: %d departures with an eager release loop, %d with a late one", s, len(eager), len(late))
		}
		for i := range eager {
			if eager[i] != late[i] {
				t.Fatalf("%s: departure %d differs: eager %+v, late %+v", s, i, eager[i], late[i])
			}
		}
	}
}

// TestNextDepartureSkipsBackloggedMoves: with tbf backlogged behind netem,
// a perfect release loop wakes about once per departure, not also for
// every packet moving from netem into the queue.
func TestNextDepartureSkipsBackloggedMoves(t *testing.T) {
	pl := newPL(t, "delay 10ms | tbf rate 10mbit burst 3kb limit 1mb")
	wakes, departures := 0, 0
	var out []*Packet
	for i := 0; i < 2000; i++ {
		a := int64(1e9) + int64(i)*600e3 // 1500 B every 0.6 ms = 20 Mbit/s offered
		for {
			nd, ok := pl.NextDeparture()
			if !ok || nd >= a {
				break
			}
			out = pl.Dequeue(nd, out[:0])
			wakes++
			departures += len(out)
		}
		pl.Enqueue(&Packet{Data: udpPacket(1500), Arrival: a}, a)
	}
	if departures < 900 || wakes > departures+departures/20 {
		t.Errorf("%d wake-ups for %d departures", wakes, departures)
	}
}
