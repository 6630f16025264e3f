package engine

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/tc/trace"
)

func traceSpec(t testing.TB, tr *trace.Trace, extra string) *spec.Spec {
	t.Helper()
	return mustParse(t, "trace test data "+tr.Encode()+extra)
}

// saturate offers packets of size bytes at pps from time 0 for d through a
// pipeline running s (built at time 0) and returns the departures.
func saturate(t testing.TB, s *spec.Spec, d time.Duration, pps float64, size int) ([]rec, *Pipeline) {
	t.Helper()
	pl, err := NewPipeline(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pool := NewPool(Headroom + size)
	tmpl := udpPacket(size)
	var recs []rec
	var batch []*Packet
	keep := func() {
		for _, p := range batch {
			recs = append(recs, rec{p.Seq, p.Arrival, p.Depart, len(p.Data), p.Flags})
			pool.Put(p)
		}
	}
	n := int(d.Seconds() * pps)
	for i := 0; i < n; i++ {
		now := 1 + int64(float64(i)*1e9/pps)
		batch = pl.Dequeue(now, batch[:0])
		keep()
		p := pool.Get()
		p.SetLen(size)
		copy(p.Data, tmpl)
		p.Arrival = now
		pl.Enqueue(p, now)
	}
	batch = pl.Dequeue(int64(d), batch[:0])
	keep()
	return recs, pl
}

// TestTraceMahimahiSemantics checks the rules of mahimahi's link queue
// one by one on a hand-made trace.
func TestTraceMahimahiSemantics(t *testing.T) {
	// Opportunities at 5 ms (two), 10 ms and 20 ms (the period).
	tr := &trace.Trace{Times: []uint32{5, 5, 10, 20}}
	s := traceSpec(t, tr, "")
	pl, err := NewPipeline(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pool := NewPool(Headroom + 3000)
	send := func(at int64, size int) {
		p := pool.Get()
		p.SetLen(size)
		copy(p.Data, udpPacket(size))
		p.Arrival = at
		pl.Enqueue(p, at)
	}
	var out []*Packet
	collect := func(until int64) []string {
		out = pl.Dequeue(until, out[:0])
		var got []string
		for _, p := range out {
			got = append(got, fmt.Sprintf("%d@%dms", len(p.Data), p.Depart/1e6))
			pool.Put(p)
		}
		return got
	}
	ms := int64(1e6)
	// Ten 300-byte packets at 1 ms: the two 1500-byte opportunities at
	// 5 ms carry all ten (bytes are counted across packets).
	for i := 0; i < 10; i++ {
		send(1*ms, 300)
	}
	if got := fmt.Sprint(collect(6 * ms)); got != "[300@5ms 300@5ms 300@5ms 300@5ms 300@5ms 300@5ms 300@5ms 300@5ms 300@5ms 300@5ms]" {
		t.Fatalf("repeated timestamps: %s", got)
	}
	// The 10 ms opportunity passes unused (lost); a 2000-byte packet at
	// 11 ms starts at 20 ms and needs the next loop's 25 ms (20+5).
	if got := collect(11 * ms); got != nil {
		t.Fatalf("nothing queued, got %v", got)
	}
	send(11*ms, 2000)
	if got := fmt.Sprint(collect(24 * ms)); got != "[]" {
		t.Fatalf("2000 bytes left before its second opportunity: %s", got)
	}
	if got := fmt.Sprint(collect(30 * ms)); got != "[2000@25ms]" {
		t.Fatalf("packet larger than an opportunity: %s", got)
	}
	// An arrival exactly at an opportunity's time is served by the next
	// one (mahimahi burns opportunities up to now before it enqueues).
	send(45*ms, 100)
	if got := fmt.Sprint(collect(60 * ms)); got != "[100@50ms]" {
		t.Fatalf("arrival at an opportunity: %s", got)
	}
}

// TestTraceOnce checks that a trace given "once" stops: after its last
// opportunity nothing leaves, what it holds stays queued and its buffer
// (here a pfifo child) refuses arrivals beyond its limit.
func TestTraceOnce(t *testing.T) {
	tr := &trace.Trace{Times: []uint32{10, 20}}
	recs, pl := saturate(t, traceSpec(t, tr, " once"), 100*time.Millisecond, 1000, 1500)
	if len(recs) != 2 {
		t.Fatalf("%d packets left a two-opportunity once trace, want 2", len(recs))
	}
	if _, ok := pl.NextDeparture(); ok {
		t.Fatal("a once trace that ran out still promises a departure")
	}
	st := pl.Snapshot().Classes[0].Stages[0]
	if st.Drops.Queue != 0 || st.QueuePackets != 98 {
		t.Fatalf("drops %d, queued %d; want 0, 98", st.Drops.Queue, st.QueuePackets)
	}
	recs, pl = saturate(t, traceSpec(t, tr, " once | pfifo limit 5"), 100*time.Millisecond, 1000, 1500)
	snap := pl.Snapshot().Classes[0].Stages
	if len(recs) != 2 || len(snap) != 2 || snap[1].Kind != "pfifo" || snap[1].Drops.Queue != 93 || snap[0].QueuePackets != 5 {
		t.Fatalf("once | pfifo limit 5: %d left, stages %+v", len(recs), snap)
	}
}

// TestTraceChildQueue checks that the stage after a trace is its buffer:
// a bfifo's byte limit bounds what waits for opportunities.
func TestTraceChildQueue(t *testing.T) {
	tr, _ := trace.Constant(1_200_000, time.Second) // 100 opportunities/s
	recs, pl := saturate(t, traceSpec(t, tr, " | bfifo limit 15kb"), time.Second, 1000, 1500)
	snap := pl.Snapshot().Classes[0].Stages
	if snap[1].Kind != "bfifo" || snap[0].QueueBytes > 15000 || snap[1].Drops.Queue < 800 {
		t.Fatalf("stages %+v", snap)
	}
	if len(recs) < 99 || len(recs) > 100 {
		t.Fatalf("%d packets left a 100-opportunity second", len(recs))
	}
}

// TestTraceDeliversCapacity is the accuracy requirement on the virtual
// clock: saturated, a trace stage delivers the trace's capacity within
// 1 % over its length and within one packet over every 100 ms window.
func TestTraceDeliversCapacity(t *testing.T) {
	cell := trace.DefaultMarkov
	cell.Duration = 10 * time.Second
	cellular, err := trace.Cellular(cell)
	if err != nil {
		t.Fatal(err)
	}
	steps, _ := trace.Steps([]trace.Segment{{Rate: 24_000_000, Duration: 2 * time.Second}, {Rate: 3_000_000, Duration: 3 * time.Second}})
	for _, c := range []struct {
		name string
		tr   *trace.Trace
		size int
	}{
		{"cellular-1500", cellular, 1500},
		{"cellular-1000", cellular, 1000},
		{"steps-576", steps, 576},
	} {
		t.Run(c.name, func(t *testing.T) {
			period := c.tr.Period()
			// Offer 30 % more than the peak of any 100 ms window; the
			// default buffer (10000 packets) does not empty.
			peak := 0.0
			for _, b := range trace.Capacity(c.tr, 100*time.Millisecond) {
				peak = max(peak, b)
			}
			pps := math.Max(peak*1.3/8/float64(c.size), 100)
			recs, _ := saturate(t, traceSpec(t, c.tr, ""), period, pps, c.size)
			var total int64
			win := make([]int64, int(period/(100*time.Millisecond)))
			for _, r := range recs {
				total += int64(r.Len)
				// A departure at t ms belongs to (t-1, t]: the window
				// of the opportunity that carried it.
				i := int((r.Depart - 1) / 1e8)
				if i < len(win) {
					win[i] += int64(r.Len)
				}
			}
			want := c.tr.Bytes()
			if d := math.Abs(float64(total-want)) / float64(want); d > 0.01 {
				t.Fatalf("delivered %d bytes over the trace, capacity %d (%.2f%% off)", total, want, d*100)
			}
			capw := trace.Capacity(c.tr, 100*time.Millisecond)
			for i, got := range win {
				wantw := int64(math.Round(capw[i] * 0.1 / 8))
				if d := got - wantw; d > int64(c.size) || d < -int64(c.size) {
					t.Fatalf("window %d (%d-%d ms): delivered %d bytes, capacity %d", i, i*100, (i+1)*100, got, wantw)
				}
			}
		})
	}
}

// TestTraceBufferLimit checks the default buffer's bound and that a trace
// under a netem delay combines as a chain.
func TestTraceBufferLimit(t *testing.T) {
	tr, _ := trace.Constant(1_200_000, time.Second) // 100 opportunities/s
	s := mustParse(t, "limit 100000 delay 20ms | trace x data "+tr.Encode())
	recs, pl := saturate(t, s, time.Second, 20000, 1500)
	st := pl.Snapshot().Classes[0].Stages[1]
	if st.PacketsIn < 19000 || st.Drops.Queue == 0 || st.QueuePackets > spec.DefaultTraceLimit+1 {
		t.Fatalf("trace stage: in %d, queue drops %d, queued %d", st.PacketsIn, st.Drops.Queue, st.QueuePackets)
	}
	for _, r := range recs {
		if r.Depart-r.Arrival < 20e6 {
			t.Fatalf("packet left %d ns after arrival, before the 20 ms delay", r.Depart-r.Arrival)
		}
	}
}

// TestTraceCodelChild checks an AQM as the trace's buffer: overloaded by
// an unresponsive flow, codel drops (at dequeue, and at its limit) and the
// trace still delivers its capacity.
func TestTraceCodelChild(t *testing.T) {
	tr, _ := trace.Constant(12_000_000, 2*time.Second)
	recs, pl := saturate(t, traceSpec(t, tr, " | codel"), 4*time.Second, 2000, 1500)
	snap := pl.Snapshot().Classes[0].Stages
	if len(snap) != 2 || snap[1].Kind != "codel" || snap[1].Drops.Total() == 0 || snap[1].Sojourn.Count == 0 {
		t.Fatalf("stages %+v", snap)
	}
	// 4 s of a 1000-opportunity-per-second trace, less the first
	// millisecond: within one packet of 4000.
	if n := len(recs); n < 3998 || n > 4000 {
		t.Fatalf("%d packets left, want about 4000", n)
	}
}
