package engine

import (
	"testing"
)

// benchPipeline drives spec s with size-byte packets at pps on the virtual
// clock: per iteration one packet is enqueued and everything due is
// dequeued and recycled, as the proxy's reader and release loop do.
func benchPipeline(b *testing.B, s string, pps float64, size int) {
	pl, err := NewPipeline(mustParse(b, s), Options{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	pool := NewPool(Headroom + size)
	tmpl := udpPacket(size)
	batch := make([]*Packet, 0, 1024)
	interval := 1e9 / pps
	now := int64(1e9)
	i := 0
	step := func() {
		i++
		now = int64(1e9) + int64(float64(i)*interval)
		batch = pl.Dequeue(now, batch[:0])
		for _, p := range batch {
			pool.Put(p)
		}
		p := pool.Get()
		p.SetLen(size)
		copy(p.Data[:28], tmpl) // headers; the payload is whatever the buffer held
		p.Arrival = now
		pl.Enqueue(p, now)
	}
	// Warm up past the delay so queues, rings and pools reach steady state.
	for range int(pps) / 5 {
		step()
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		step()
	}
}

// BenchmarkPipeline is the engine's cost target: at most 300 ns and no
// allocation per packet for the seeds' kind of spec at 1 Gbit/s.
func BenchmarkPipeline(b *testing.B) {
	benchPipeline(b, "delay 50ms loss 1% | tbf rate 1gbit burst 64kb limit 1mb", 80000, 1500)
}

func BenchmarkPipelineEmpty(b *testing.B) {
	benchPipeline(b, "", 1e6, 1500)
}

func BenchmarkPipelineNetemFull(b *testing.B) {
	benchPipeline(b, "delay 20ms 5ms 25% distribution normal loss 1% duplicate 1% corrupt 0.1% reorder 1% limit 10000", 100000, 1500)
}

func BenchmarkPipelineSeed(b *testing.B) {
	benchPipeline(b, "delay 100ms | tbf rate 50mbit burst 50kb limit 500kb", 4000, 1500)
}

// BenchmarkPipelineAQM: the queue disciplines as tbf's child, offered
// twice tbf's rate so they queue and drop: no allocation per packet.
func BenchmarkPipelineAQM(b *testing.B) {
	for _, q := range []string{"bfifo limit 500kb", "codel", "fq_codel", "pie", "red limit 500kb avpkt 1500 adaptive"} {
		b.Run(q, func(b *testing.B) {
			benchPipeline(b, "delay 20ms | tbf rate 1gbit burst 64kb limit 1mb | "+q, 160000, 1500)
		})
	}
}
