package engine

import (
	"testing"

	"github.com/wanlab/wanlab/tc/spec"
)

func TestPool(t *testing.T) {
	pool := NewPool(Headroom + 1500)
	p := pool.Get()
	if len(p.Buf()) != Headroom+1500 || len(p.Data) != 0 {
		t.Fatalf("buf %d data %d", len(p.Buf()), len(p.Data))
	}
	p.SetLen(1500)
	if &p.Data[0] != &p.Buf()[Headroom] {
		t.Fatal("Data does not start after the headroom")
	}
	p.Arrival, p.Seq, p.Flags = 5, 6, FlagCorrupted
	pool.Put(p)
	q := pool.Get()
	if q.Arrival != 0 || q.Seq != 0 || q.Flags != 0 || len(q.Data) != 0 {
		t.Fatalf("recycled packet keeps metadata: %+v", q)
	}
	// A packet not from a pool (or with a short buffer) is not pooled.
	pool.Put(&Packet{Data: make([]byte, 10)})
	for i := 0; i < 100; i++ {
		if got := pool.Get(); len(got.Buf()) != Headroom+1500 {
			t.Fatalf("pool handed out a %d-byte buffer", len(got.Buf()))
		}
	}
	// Duplicates come from the original's pool.
	o := pool.Get()
	o.SetLen(100)
	o.Data[0] = 0x45
	c := clone(o)
	if c.pool != pool || len(c.Data) != 100 || c.Data[0] != 0x45 || &c.Data[0] == &o.Data[0] {
		t.Fatal("clone must be a copy from the same pool")
	}
}

func BenchmarkSimulate(b *testing.B) {
	sp := mustParse(b, "delay 50ms loss 1% | tbf rate 1gbit burst 64kb limit 1mb")
	b.ReportAllocs()
	for range b.N {
		if _, err := Simulate(SimConfig{Impairment: spec.PipelineImpairment(sp), Packets: 100000, PPS: 80000, Size: 1500, Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
}
