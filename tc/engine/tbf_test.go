package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/wanlab/wanlab/units"
)

// maxWindowExcess returns max over windows [d_i, d_j] of
// bytes(i..j) - rate*(d_j - d_i), the quantity a token bucket bounds by
// its size.
func maxWindowExcess(out []rec, bytesPerSec float64) float64 {
	worst := math.Inf(-1)
	minG := math.Inf(1)
	var s float64 // bytes of packets before j
	for _, p := range out {
		d := float64(p.Depart) / 1e9 * bytesPerSec
		// g_i = S_{i-1} - r*d_i; f_j = S_j - r*d_j
		minG = math.Min(minG, s-d)
		s += float64(p.Len)
		worst = math.Max(worst, s-d-minG)
	}
	return worst
}

func outputRate(out []rec) float64 {
	first, last := out[0], out[len(out)-1]
	var bytes float64
	for _, p := range out[1:] {
		bytes += float64(p.Len)
	}
	return bytes * 8 / (float64(last.Depart-first.Depart) / 1e9)
}

func TestTBFRateAndBurstBound(t *testing.T) {
	for _, c := range []struct {
		rate  string
		burst string
		size  int
	}{
		{"64kbit", "3kb", 1000},
		{"1mbit", "10kb", 1500},
		{"50mbit", "50kb", 1500},
		{"1gbit", "64kb", 1500},
		{"10gbit", "64kb", 1500},
		{"10gbit", "1mb", 9000},
	} {
		s := fmt.Sprintf("tbf rate %s burst %s limit 1mb", c.rate, c.burst)
		r, _ := units.ParseRate(c.rate)
		burst, _ := units.ParseSize(c.burst)
		pps := 2 * float64(r) / float64(c.size*8) // offer twice the rate
		out, pl := run(t, s, 100000, pps, c.size, 1)
		got := outputRate(out)
		if dev := got/float64(r) - 1; math.Abs(dev) > 0.005 {
			t.Errorf("%s: output %.6g bit/s, %.3f%% off the rate", s, got, 100*dev)
		}
		ex := maxWindowExcess(out, float64(r)/8)
		t.Logf("%-44s output %.6g bit/s (%+.3f%%), worst window %.0f B above rate*window (burst %d)",
			s, got, 100*(got/float64(r)-1), ex, burst)
		if ex > float64(burst)+1e-6*float64(burst) {
			t.Errorf("%s: some window carried %.1f bytes more than rate*window, burst is %d", s, ex, burst)
		}
		snap := pl.Snapshot()
		if snap.Totals.Drops.Queue == 0 {
			t.Errorf("%s: offered twice the rate into a finite limit, yet no queue drops", s)
		}
	}
}

func TestTBFPeakRate(t *testing.T) {
	const s = "tbf rate 10mbit burst 20kb limit 100kb peakrate 20mbit mtu 1600"
	out, _ := run(t, s, 50000, 2000, 1500, 1) // 24 Mbit/s offered
	if got := outputRate(out); math.Abs(got/10e6-1) > 0.005 {
		t.Errorf("output %.6g bit/s, want 10 Mbit/s", got)
	}
	if ex := maxWindowExcess(out, 20e6/8); ex > 1600+1e-3 {
		t.Errorf("peak bucket: a window carried %.1f bytes above peakrate*window, mtu is 1600", ex)
	}
	if ex := maxWindowExcess(out, 10e6/8); ex > 20*1024+1e-3 {
		t.Errorf("rate bucket: excess %.1f above burst", ex)
	}
	// Right after idle the burst goes out at the peak rate, not at once:
	// after the first two (the 1600 B bucket held 100 B after the first),
	// departures are at least 1500 B / 20 Mbit/s = 600 µs apart.
	for i := 2; i < 10; i++ {
		if gap := out[i].Depart - out[i-1].Depart; gap < 600e3-1 {
			t.Fatalf("departures %d and %d only %d ns apart", i-1, i, gap)
		}
	}
}

// TestTBFLimitExact checks every enqueue decision against a replay of the
// queue: a packet is dropped exactly when the bytes still queued (accepted
// earlier, departing later than its arrival) plus its own exceed limit.
func TestTBFLimitExact(t *testing.T) {
	const limit = 10000
	pl, err := NewPipeline(mustParse(t, "tbf rate 1mbit burst 1000 limit 10000"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	// 12 packets of 1000 B at the same instant: the first leaves at once
	// on the full bucket, 10 fill the queue to exactly 10000 B, the 12th
	// is dropped.
	var drops []uint64
	pl.opt.OnDrop = func(p *Packet, r DropReason) {
		if r != DropQueue {
			t.Errorf("drop reason %v, want queue", r)
		}
		drops = append(drops, p.Seq)
	}
	for i := 0; i < 12; i++ {
		pl.Enqueue(&Packet{Data: make([]byte, 1000), Arrival: 1e9}, 1e9)
	}
	if len(drops) != 1 || drops[0] != 12 {
		t.Fatalf("dropped %v, want only packet 12", drops)
	}

	// Random sizes and arrivals, checked against the replay.
	rng := rand.New(rand.NewPCG(1, 2))
	pl, _ = NewPipeline(mustParse(t, "tbf rate 8mbit burst 3000 limit 10000"), Options{})
	dropped := map[uint64]bool{}
	pl.opt.OnDrop = func(p *Packet, _ DropReason) { dropped[p.Seq] = true }
	type arrival struct {
		t    int64
		size int
	}
	var arr []arrival
	var out []*Packet
	now := int64(1e9)
	for i := 0; i < 100000; i++ {
		now += int64(rng.ExpFloat64() * 1000e3 / 1.2) // ~1.2x the rate on average
		size := 40 + rng.IntN(1461)
		arr = append(arr, arrival{now, size})
		out = pl.Dequeue(now, out)
		pl.Enqueue(&Packet{Data: make([]byte, size), Arrival: now}, now)
	}
	out = pl.Dequeue(math.MaxInt64, out)
	depart := make([]int64, len(arr)+1)
	for _, p := range out {
		depart[p.Seq] = p.Depart
	}
	var queued []uint64 // accepted seqs, FIFO
	backlog, nd := 0, 0
	for i, a := range arr {
		seq := uint64(i + 1)
		for len(queued) > 0 && depart[queued[0]] <= a.t {
			backlog -= arr[queued[0]-1].size
			queued = queued[1:]
		}
		wantDrop := backlog+a.size > limit
		if wantDrop != dropped[seq] {
			t.Fatalf("packet %d (%d B at backlog %d): dropped=%v, want %v", seq, a.size, backlog, dropped[seq], wantDrop)
		}
		if !wantDrop {
			queued = append(queued, seq)
			backlog += a.size
		} else {
			nd++
		}
	}
	if nd < 1000 {
		t.Errorf("only %d drops: the test does not exercise the limit", nd)
	}
}

func TestTBFOversize(t *testing.T) {
	pl, _ := NewPipeline(mustParse(t, "tbf rate 1mbit burst 1000 limit 100kb"), Options{})
	var reason DropReason
	pl.opt.OnDrop = func(_ *Packet, r DropReason) { reason = r }
	pl.Enqueue(&Packet{Data: make([]byte, 1001), Arrival: 1}, 1)
	if reason != DropOversize {
		t.Fatalf("1001 B packet with burst 1000: reason %v, want oversize", reason)
	}
	pl.Enqueue(&Packet{Data: make([]byte, 1000), Arrival: 2}, 2)
	if out := pl.Dequeue(2, nil); len(out) != 1 {
		t.Fatalf("1000 B packet with burst 1000: got %d packets out", len(out))
	}
	s := pl.Snapshot().Classes[0].Stages[0]
	if s.Drops.Oversize != 1 || s.PacketsOut != 1 || s.PacketsIn != 2 {
		t.Errorf("counters %+v", s.Counters)
	}
}
