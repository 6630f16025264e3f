package engine

import (
	"math"
	"testing"

	"github.com/wanlab/wanlab/tc/spec"
)

// FuzzPipeline runs arbitrary accepted specs over mixed traffic: no panic,
// no packet leaving before it arrived, every packet accounted for.
func FuzzPipeline(f *testing.F) {
	for _, s := range []string{
		"delay 100ms | tbf rate 50mbit burst 50kb limit 500kb",
		"delay 10ms 20ms 50% distribution pareto loss 30% 50% ecn duplicate 50% corrupt 50% reorder 50% 50% gap 2 limit 20",
		"loss state 10% 20% 30% 40% 5% rate 1mbit -100 48 5 slot distribution normal 1ms 500us packets 3 bytes 2000",
		"loss gemodel 10% 20% 80% 5% slot 1ms 2ms | tbf rate 1kbit burst 1600 limit 10kb peakrate 2kbit mtu 1600 mpu 64",
		"tbf rate 8bit burst 100 latency 1s | delay 1ms 1ms duplicate 100%",
		"delay 1us 4s distribution paretonormal",
		"delay 1ms | tbf rate 1mbit burst 3kb limit 10kb | fq_codel limit 20 flows 4 quantum 256 drop_batch 3 target 1ms interval 10ms",
		"tbf rate 2mbit burst 2kb limit 10kb | codel limit 30 target 1ms interval 5ms ecn ce_threshold 1ms",
		"tbf rate 2mbit burst 2kb limit 10kb | pie limit 30 target 1ms tupdate 1ms ecn bytemode",
		"tbf rate 2mbit burst 2kb limit 10kb | pie dq_rate_estimator",
		"tbf rate 2mbit burst 2kb limit 10kb | red limit 20kb min 2kb max 6kb avpkt 500 ecn adaptive nodrop",
		"tbf rate 2mbit burst 2kb limit 10kb peakrate 3mbit mtu 1600 | pfifo limit 5",
		"delay 5ms 5ms | bfifo limit 3kb",
		"red limit 20kb avpkt 500 harddrop ecn",
	} {
		f.Add(s, uint64(1))
	}
	f.Fuzz(func(t *testing.T, s string, seed uint64) {
		sp, err := spec.Parse(s)
		if err != nil {
			return
		}
		pl, err := NewPipeline(sp, Options{Seed: seed})
		if err != nil {
			return
		}
		sizes := []int{0, 1, 20, 40, 41, 576, 1500, 9000}
		var out []*Packet
		now := int64(1e9)
		for i := 0; i < 300; i++ {
			now += int64(i%7) * 100e3
			size := sizes[i%len(sizes)]
			data := make([]byte, size)
			if size >= 20 {
				copy(data, udpPacket(max(size, 28))[:20])
				data[1] = byte(i % 4)
			}
			out = pl.Dequeue(now, out)
			pl.Enqueue(&Packet{Data: data, Arrival: now}, now)
		}
		out = pl.Dequeue(math.MaxInt64, out)
		for _, p := range out {
			if p.Depart < p.Arrival {
				t.Fatalf("%q: packet %d left %d ns before it arrived", s, p.Seq, p.Arrival-p.Depart)
			}
		}
		tot := pl.Snapshot().Totals
		if tot.PacketsIn != tot.PacketsOut+tot.Drops.Total() || tot.QueuePackets != 0 || uint64(len(out)) != tot.PacketsOut {
			t.Fatalf("%q: totals %+v, %d out", s, tot, len(out))
		}
		// Departures do not depend on when the release loop calls, and
		// NextDeparture never promises later than the truth (releaseRun
		// checks that).
		step := int64(seed%1000+1) * 1000
		eager := releaseRun(t, s, 200, step, true)
		late := releaseRun(t, s, 200, step, false)
		if len(eager) != len(late) {
			t.Fatalf("%q: %d departures eager, %d late", s, len(eager), len(late))
		}
		for i := range eager {
			if eager[i] != late[i] {
				t.Fatalf("%q: departure %d: eager %+v, late %+v", s, i, eager[i], late[i])
			}
		}
	})
}

// FuzzSetCE marks arbitrary bytes: never panics, and a marked IPv4 header
// keeps a valid checksum when it had one.
func FuzzSetCE(f *testing.F) {
	f.Add(udpPacket(40))
	f.Add([]byte{0x60, 0x10, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		valid := len(b) >= 20 && b[0]>>4 == 4 && ipv4Checksum(b[:20]) == 0
		if setCE(b) && valid && ipv4Checksum(b[:20]) != 0 {
			t.Fatalf("checksum broken: % x", b[:20])
		}
	})
}
