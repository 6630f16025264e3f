package engine

import (
	"testing"

	"github.com/wanlab/wanlab/proxy/spec"
)

func mustParse(t testing.TB, s string) *spec.Spec {
	t.Helper()
	sp, err := spec.Parse(s)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return sp
}

// run pushes n packets of size bytes, evenly spaced at pps, through a
// pipeline for s on the virtual clock and returns every packet that left,
// in departure order, plus the pipeline. Packets are not returned to the
// pool, so the caller may inspect them.
func run(t testing.TB, s string, n int, pps float64, size int, seed uint64) ([]*Packet, *Pipeline) {
	t.Helper()
	pl, err := NewPipeline(mustParse(t, s), Options{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := udpPacket(size)
	var out []*Packet
	interval := 1e9 / pps
	for i := 0; i < n; i++ {
		now := int64(1e9) + int64(float64(i)*interval)
		out = pl.Dequeue(now, out)
		p := &Packet{Data: append([]byte(nil), tmpl...), Arrival: now}
		pl.Enqueue(p, now)
	}
	for {
		next, ok := pl.NextDeparture()
		if !ok {
			break
		}
		out = pl.Dequeue(next, out)
	}
	return out, pl
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
