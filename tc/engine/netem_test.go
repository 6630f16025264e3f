package engine

import (
	"bytes"
	"fmt"
	"math"
	"math/bits"
	"testing"

	"github.com/wanlab/wanlab/tc/spec"
)

// feed enqueues one packet per arrival time (copies of data) and returns
// every packet that left, in departure order, with their data.
func feed(t *testing.T, pl *Pipeline, arrivals []int64, data []byte) []*Packet {
	t.Helper()
	var out []*Packet
	for _, a := range arrivals {
		out = pl.Dequeue(a, out)
		pl.Enqueue(&Packet{Data: append([]byte(nil), data...), Arrival: a}, a)
	}
	return pl.Dequeue(math.MaxInt64, out)
}

func newPL(t *testing.T, s string) *Pipeline {
	t.Helper()
	pl, err := NewPipeline(mustParse(t, s), Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

func every(n int, start, step int64) []int64 {
	a := make([]int64, n)
	for i := range a {
		a[i] = start + int64(i)*step
	}
	return a
}

const msec = int64(1e6)

func TestReorderGap(t *testing.T) {
	// tc-netem(8): "every 5th (10th, 15th, ...) packet is going to be sent
	// immediately, and every other packet will be delayed by 10ms".
	for _, s := range []string{
		"delay 10ms reorder 100% gap 5",
		// Reordered packets bypass netem's child, as __qdisc_dequeue_head
		// in netem_dequeue does: tbf does not hold them.
		"delay 10ms reorder 100% gap 5 | tbf rate 100kbit burst 1600 limit 1mb",
	} {
		pl := newPL(t, s)
		out := feed(t, pl, every(20, 1000*msec, msec), udpPacket(100))
		if len(out) != 20 {
			t.Fatalf("%s: %d packets out", s, len(out))
		}
		for _, p := range out {
			immediate := p.Seq%5 == 0
			if immediate != (p.Flags&FlagReordered != 0) {
				t.Errorf("%s: packet %d flags %b", s, p.Seq, p.Flags)
			}
			if immediate && p.Depart != p.Arrival {
				t.Errorf("%s: packet %d left %d ns after arrival, want immediately", s, p.Seq, p.Depart-p.Arrival)
			}
			if !immediate && p.Depart-p.Arrival < 10*msec {
				t.Errorf("%s: packet %d delayed only %d ns", s, p.Seq, p.Depart-p.Arrival)
			}
		}
		if got := pl.Snapshot().Classes[0].Stages[0].Reordered; got != 4 {
			t.Errorf("%s: reordered counter %d, want 4", s, got)
		}
	}
}

func TestReorderProbability(t *testing.T) {
	out, pl := run(t, "delay 10ms reorder 25% 50%", 100000, 10000, 100, 4)
	n := 0
	for _, p := range out {
		if p.Flags&FlagReordered != 0 {
			n++
			if p.Depart != p.Arrival {
				t.Fatalf("reordered packet %d delayed", p.Seq)
			}
		}
	}
	// get_crandom's correlated values crowd around the middle (an AR(1)
	// of uniform values has a third of their variance at 50%), so, as in
	// the kernel, "reorder 25% 50%" reorders far fewer than 25%; the
	// uncorrelated case must be binomial.
	if n < 2000 || n > 15000 {
		t.Errorf("reorder 25%% 50%%: %d of 100000 reordered", n)
	}
	out, _ = run(t, "delay 10ms reorder 25%", 100000, 10000, 100, 4)
	n = 0
	for _, p := range out {
		if p.Flags&FlagReordered != 0 {
			n++
		}
	}
	if ok, lo, hi := binomialOK(n, 100000, 0.25); !ok {
		t.Errorf("reorder 25%%: %d reordered, want [%.0f, %.0f]", n, lo, hi)
	}
	_ = pl
}

func TestDuplicate(t *testing.T) {
	pl := newPL(t, "delay 10ms 5ms duplicate 100% | tbf rate 100mbit burst 64kb limit 1mb")
	out := feed(t, pl, every(1000, 1000*msec, msec), udpPacket(500))
	if len(out) != 2000 {
		t.Fatalf("duplicate 100%%: %d packets out of 1000, want 2000 (a copy is never copied again)", len(out))
	}
	copies := map[uint64]int{}
	differ := 0
	delays := map[uint64]int64{}
	for _, p := range out {
		copies[p.Seq]++
		d := p.Depart - p.Arrival
		if prev, ok := delays[p.Seq]; ok && prev != d {
			differ++
		}
		delays[p.Seq] = d
	}
	for seq, n := range copies {
		if n != 2 {
			t.Fatalf("packet %d left %d times", seq, n)
		}
	}
	// The copy is re-enqueued at the root and draws its own delay.
	if differ < 900 {
		t.Errorf("only %d of 1000 copies had a delay different from their original", differ)
	}
	snap := pl.Snapshot()
	if snap.Totals.PacketsIn != 2000 || snap.Totals.PacketsOut != 2000 || snap.Classes[0].Stages[0].Duplicated != 1000 {
		t.Errorf("totals %+v", snap.Totals)
	}
	if st := snap.Classes[0].Stages[0]; st.PacketsIn != 2000 {
		t.Errorf("netem saw %d packets, want 2000 (originals and copies)", st.PacketsIn)
	}
}

func TestCorruptFlipsOneBit(t *testing.T) {
	tmpl := udpPacket(300)
	pl := newPL(t, "corrupt 100%")
	out := feed(t, pl, every(2000, 1000*msec, msec), tmpl)
	offsets := map[int]bool{}
	for _, p := range out {
		flipped := 0
		for i := range p.Data {
			if d := p.Data[i] ^ tmpl[i]; d != 0 {
				flipped += bits.OnesCount8(d)
				offsets[i] = true
			}
		}
		if flipped != 1 || p.Flags&FlagCorrupted == 0 {
			t.Fatalf("packet %d: %d bits flipped, flags %b", p.Seq, flipped, p.Flags)
		}
	}
	// Any byte may be hit, headers included (skb->data + random offset).
	if len(offsets) < 250 {
		t.Errorf("corruption hit only %d distinct offsets of 300", len(offsets))
	}
	recs, _ := run(t, "corrupt 2%", 100000, 10000, 200, 9)
	n := 0
	for _, p := range recs {
		if p.Flags&FlagCorrupted != 0 {
			n++
		}
	}
	if ok, lo, hi := binomialOK(n, 100000, 0.02); !ok {
		t.Errorf("corrupt 2%%: %d corrupted, want [%.0f, %.0f]", n, lo, hi)
	}
}

func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i < len(h); i += 2 {
		sum += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func TestECNMarking(t *testing.T) {
	ect := udpPacket(100) // ECT(0)
	notECT := udpPacket(100)
	notECT[1] = 0
	notECT[10], notECT[11] = 0, 0
	cs := ipv4Checksum(notECT[:20])
	notECT[10], notECT[11] = byte(cs>>8), byte(cs)

	pl := newPL(t, "loss 100% ecn")
	out := feed(t, pl, every(10, 1000*msec, msec), ect)
	out = append(out, feed(t, pl, every(10, 2000*msec, msec), notECT)...)
	if len(out) != 10 {
		t.Fatalf("%d packets out, want the 10 ECN-capable ones", len(out))
	}
	for _, p := range out {
		if p.Data[1]&3 != 3 || p.Flags&FlagECNMarked == 0 {
			t.Errorf("packet %d: tos %#x flags %b, want CE", p.Seq, p.Data[1], p.Flags)
		}
		if ipv4Checksum(p.Data[:20]) != 0 {
			t.Errorf("packet %d: header checksum broken after marking", p.Seq)
		}
	}
	st := pl.Snapshot().Classes[0].Stages[0]
	if st.ECNMarked != 10 || st.Drops.Loss != 10 {
		t.Errorf("ecn_marked %d loss drops %d, want 10 and 10", st.ECNMarked, st.Drops.Loss)
	}
	if snap := pl.Snapshot(); snap.Classes[0].Totals.ECNMarked != 10 || snap.Totals.ECNMarked != 10 {
		t.Errorf("class and pipeline totals: ecn_marked %d and %d, want 10 (the metrics read them)", snap.Classes[0].Totals.ECNMarked, snap.Totals.ECNMarked)
	}

	// IPv6: traffic class ECN bits; CE stays CE; too short is not ECN.
	v6 := make([]byte, 40)
	v6[0], v6[1] = 0x60, 0x10 // ECT(1)
	if !setCE(v6) || v6[0] != 0x60 || v6[1] != 0x30 {
		t.Errorf("IPv6 ECT(1) -> %#x %#x", v6[0], v6[1])
	}
	if !setCE(v6) || v6[1] != 0x30 {
		t.Error("IPv6 CE must stay CE and count as marked")
	}
	v6[1] = 0
	if setCE(v6) {
		t.Error("IPv6 not-ECT marked")
	}
	if setCE([]byte{0x45, 0x02}) || setCE(nil) {
		t.Error("truncated packet marked")
	}
}

func TestNetemRateOverheadAndCells(t *testing.T) {
	for _, c := range []struct {
		spec    string
		size    int
		spacing int64
	}{
		// 1000 B at 1mbit (125000 B/s): 8 ms.
		{"rate 1mbit", 1000, 8 * msec},
		// +20 B overhead, 100 B cells with 5 B cell overhead:
		// ceil(1020/100) = 11 cells of 105 B = 1155 B -> 9.24 ms.
		{"rate 1mbit 20 100 5", 1000, 9240000},
		// Negative overhead: 1000-100 = 900 B -> 7.2 ms.
		{"rate 1mbit -100", 1000, 7200000},
	} {
		pl := newPL(t, c.spec)
		out := feed(t, pl, every(50, 1000*msec, 0), udpPacket(c.size))
		for i, p := range out {
			if want := 1000*msec + int64(i+1)*c.spacing; p.Depart != want {
				t.Fatalf("%s: packet %d left at %d, want %d", c.spec, i, p.Depart, want)
			}
		}
	}
}

func TestJitterReordersUnlessRate(t *testing.T) {
	count := func(s string) (uint64, []rec) {
		out, _ := run(t, s, 20000, 10000, 100, 2)
		seqs := make([]uint64, len(out))
		for i, p := range out {
			seqs[i] = p.Seq
		}
		return Overtakers(seqs), out
	}
	if n, _ := count("delay 10ms 5ms"); n < 10000 {
		t.Errorf("delay 10ms 5ms at 10000 pkt/s: only %d packets overtook, want most", n)
	}
	// With a rate, time_to_send anchors on the last queued packet: no
	// reordering, and delays still vary.
	n, out := count("delay 10ms 5ms rate 100mbit")
	if n != 0 {
		t.Errorf("delay with jitter and rate: %d packets overtook, want 0", n)
	}
	lo, hi := int64(math.MaxInt64), int64(0)
	for _, p := range out {
		lo, hi = min(lo, p.Depart-p.Arrival), max(hi, p.Depart-p.Arrival)
	}
	if hi-lo < 4*msec {
		t.Errorf("delays with rate span only %d ns", hi-lo)
	}
}

func TestNetemLimitCountsChild(t *testing.T) {
	// 20 packets at once into limit 10: 10 queue drops.
	pl := newPL(t, "delay 1s limit 10")
	if out := feed(t, pl, every(20, 1000*msec, 0), udpPacket(100)); len(out) != 10 {
		t.Errorf("limit 10: %d packets out, want 10", len(out))
	}
	// netem's qlen includes packets its tbf child holds: with tbf holding
	// them for seconds, netem admits only 10 more after the first (which
	// left at once on tbf's full bucket).
	pl = newPL(t, "delay 1ms limit 10 | tbf rate 8kbit burst 1500 limit 1mb")
	out := feed(t, pl, every(30, 1000*msec, 10*msec), udpPacket(1000))
	if len(out) != 11 {
		t.Errorf("limit 10 with a slow child: %d packets out, want 11", len(out))
	}
	snap := pl.Snapshot()
	if d := snap.Classes[0].Stages[0].Drops.Queue; d != 19 {
		t.Errorf("netem queue drops %d, want 19", d)
	}
}

func TestSlot(t *testing.T) {
	for _, c := range []struct {
		spec    string
		perSlot int
	}{
		{"slot 10ms 10ms", 0},
		// The byte budget is checked after sending, as netem_dequeue
		// does: 300 B packets, 1000 B per slot -> 4 packets.
		{"slot 10ms 10ms bytes 1000", 4},
		{"slot 10ms 10ms packets 2", 2},
	} {
		pl := newPL(t, c.spec)
		out := feed(t, pl, every(200, 1000*msec, msec/2), udpPacket(300))
		if len(out) != 200 {
			t.Fatalf("%s: %d out", c.spec, len(out))
		}
		groups := map[int64]int{}
		var times []int64
		for _, p := range out {
			if p.Depart < p.Arrival {
				t.Fatalf("%s: packet %d left before it arrived", c.spec, p.Seq)
			}
			if groups[p.Depart] == 0 {
				times = append(times, p.Depart)
			}
			groups[p.Depart]++
		}
		for i := 1; i < len(times); i++ {
			if times[i]-times[i-1] < 10*msec && c.perSlot == 0 {
				t.Fatalf("%s: departures %d ns apart, want slots of 10 ms", c.spec, times[i]-times[i-1])
			}
		}
		for tm, n := range groups {
			if c.perSlot != 0 && n > c.perSlot {
				t.Fatalf("%s: %d packets left at %d, budget %d per slot", c.spec, n, tm, c.perSlot)
			}
		}
		if c.perSlot == 0 && len(times) > 200/10 {
			t.Errorf("%s: %d distinct departure times for 100 ms of traffic", c.spec, len(times))
		}
	}
}

func TestDelayDistributions(t *testing.T) {
	const n = 100000
	for _, d := range []spec.Distribution{spec.DistUniform, spec.DistNormal, spec.DistPareto, spec.DistParetoNormal} {
		s := "delay 100ms 20ms limit 200000"
		if d != spec.DistUniform {
			s += " distribution " + d.String()
		}
		ds := delaysBySeq(t, s, n, 10000)
		got := delayStats(ds)
		tm, tsd := tableMoments(d)
		wantMean, wantStd := 100+20*tm, 20*tsd
		if se := wantStd / math.Sqrt(n); math.Abs(got.Mean-wantMean) > 4*se+0.001 {
			t.Errorf("%s: mean %.4f ms, want %.4f ± %.4f", s, got.Mean, wantMean, 4*se)
		}
		if math.Abs(got.Stddev-wantStd)/wantStd > 0.02 {
			t.Errorf("%s: stddev %.4f ms, want %.4f", s, got.Stddev, wantStd)
		}
		t.Logf("%-12s mean %.3f ms (table %.3f) stddev %.3f ms (table %.3f)", d, got.Mean, wantMean, got.Stddev, wantStd)
	}
	// The normal table is N(0,1): stddev = jitter.
	got := delayStats(delaysBySeq(t, "delay 100ms 20ms distribution normal limit 200000", n, 10000))
	if math.Abs(got.Stddev-20) > 0.4 {
		t.Errorf("normal: stddev %.3f ms, want 20", got.Stddev)
	}
}

func TestEmptySpecPassesThrough(t *testing.T) {
	pl := newPL(t, "")
	data := udpPacket(60)
	out := feed(t, pl, every(100, 1000*msec, 1000), data)
	for i, p := range out {
		if p.Depart != p.Arrival || p.Seq != uint64(i+1) || !bytes.Equal(p.Data, data) {
			t.Fatalf("packet %d changed: %+v", i, p)
		}
	}
}

func ExampleSimulate() {
	sp, _ := spec.Parse("delay 100ms | tbf rate 50mbit burst 50kb limit 500kb")
	res, _ := Simulate(SimConfig{Impairment: spec.PipelineImpairment(sp), Packets: 20000, PPS: 4000, Size: 1500, Seed: 1})
	fmt.Printf("out %d, delay p50 %.1f ms, rate %.2f Mbit/s\n", res.PacketsOut, res.Delay.P50, res.RateBps/1e6)
	// Output: out 20000, delay p50 100.0 ms, rate 48.00 Mbit/s
}
