package engine

import (
	"testing"

	"github.com/wanlab/wanlab/tc/spec"
)

func mustParse(t testing.TB, s string) *spec.Spec {
	t.Helper()
	sp, err := spec.Parse(s)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return sp
}

// rec is what the tests keep of a departed packet.
type rec struct {
	Seq             uint64
	Arrival, Depart int64
	Len             int
	Flags           Flags
}

// run pushes n packets of size bytes, evenly spaced at pps, through a
// pipeline for s on the virtual clock and returns a record of every
// packet that left, in departure order, plus the pipeline. Packets come
// from a pool and go back to it.
func run(t testing.TB, s string, n int, pps float64, size int, seed uint64) ([]rec, *Pipeline) {
	t.Helper()
	pl, err := NewPipeline(mustParse(t, s), Options{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	pool := NewPool(Headroom + size)
	tmpl := udpPacket(size)
	recs := make([]rec, 0, n)
	var batch []*Packet
	keep := func() {
		for _, p := range batch {
			recs = append(recs, rec{p.Seq, p.Arrival, p.Depart, len(p.Data), p.Flags})
			pool.Put(p)
		}
	}
	interval := 1e9 / pps
	for i := 0; i < n; i++ {
		now := int64(1e9) + int64(float64(i)*interval)
		batch = pl.Dequeue(now, batch[:0])
		keep()
		p := pool.Get()
		p.SetLen(size)
		copy(p.Data, tmpl)
		p.Arrival = now
		pl.Enqueue(p, now)
	}
	for {
		next, ok := pl.NextDeparture()
		if !ok {
			break
		}
		batch = pl.Dequeue(next, batch[:0])
		keep()
	}
	return recs, pl
}

// delaysBySeq returns each delivered packet's delay in ms indexed by
// arrival order (for autocorrelation over arrivals).
func delaysBySeq(t testing.TB, s string, n int, pps float64) []float64 {
	t.Helper()
	out, _ := run(t, s, n, pps, 200, 1)
	ds := make([]float64, n)
	for _, p := range out {
		ds[p.Seq-1] = float64(p.Depart-p.Arrival) / 1e6
	}
	return ds
}

// udpPacket is an ECN-capable (ECT(0)) UDPPacket of size bytes.
func udpPacket(size int) []byte { return UDPPacket(size, 0x02) }
