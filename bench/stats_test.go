package bench

import (
	"math"
	"testing"
	"time"

	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/spec"
)

func TestQuantile(t *testing.T) {
	v := []float64{1, 2, 3, 4, 5}
	for _, c := range []struct{ q, want float64 }{{0, 1}, {.5, 3}, {1, 5}, {.99, 4.96}} {
		if got := quantile(v, c.q); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("quantile(%g) = %g, want %g", c.q, got, c.want)
		}
	}
	if quantile(nil, .5) != 0 {
		t.Error("quantile of nothing is not 0")
	}
}

// A synthetic run: 1000 probes 1 ms apart, 1 ms of delay, seq 10-12 lost
// (one run of 3), 500 and 501 swapped, 100-byte packets.
func TestAnalyze(t *testing.T) {
	var arr []arrival
	for i := range 1000 {
		if i >= 10 && i <= 12 {
			continue
		}
		sent := int64(i) * 1e6
		arr = append(arr, arrival{seq: uint64(i), sent: sent, rx: sent + 1e6, ipLen: 100})
	}
	arr[497], arr[498] = arr[498], arr[497] // seq 500 and 501 (three lost before)
	arr = append(arr, arr[0])               // a duplicate
	st := analyze(arr, 1000, 200*time.Millisecond)
	if st.Received != 997 || st.Duplicates != 1 || st.LossRuns != 1 || st.MeanLossRun != 3 || st.Reordered != 1 {
		t.Errorf("got %+v", st)
	}
	if st.DelayP50 != time.Millisecond || st.DelayP99 != time.Millisecond {
		t.Errorf("delay p50 %v p99 %v, want 1ms", st.DelayP50, st.DelayP99)
	}
	// 100 bytes per ms is 800 kbit/s; the duplicate shares its window
	// with the original, so the busiest 1 ms holds 200 bytes.
	if math.Abs(st.RateBps-800e3) > 1e3 || st.Burst1ms != 200 {
		t.Errorf("rate %.0f bit/s, burst %d B; want 800000 and 200", st.RateBps, st.Burst1ms)
	}
}

func TestGEMeanBurst(t *testing.T) {
	// With 1-h = 100 % and 1-k = 0 a loss run lasts as long as the bad
	// state: geometric with mean 1/r.
	s, err := spec.Parse("loss gemodel 1% 25%")
	if err != nil {
		t.Fatal(err)
	}
	l := s.Stages[0].(*spec.Netem).Loss
	if got := geMeanBurst(l, 2000000, 1); math.Abs(got-4) > 0.2 {
		t.Errorf("mean burst %.3f, want 1/r = 4", got)
	}
}

func TestReplay(t *testing.T) {
	sends := make([]int64, 1000)
	for i := range sends {
		sends[i] = int64(i) * int64(time.Millisecond)
	}
	s, err := spec.Parse("delay 10ms")
	if err != nil {
		t.Fatal(err)
	}
	r, err := replay(s, sends, 200, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.DelayP50 != 10*time.Millisecond || r.DelayP99 != 10*time.Millisecond || r.Reordered != 0 || r.Loss != 0 {
		t.Errorf("delay 10ms: %+v", r)
	}
	// Trains of 10 packets at the same instant with ±1 ms jitter reorder;
	// spread 1 ms apart with ±100 µs they cannot.
	trains := make([]int64, 1000)
	for i := range trains {
		trains[i] = int64(i/10) * int64(10*time.Millisecond)
	}
	s, _ = spec.Parse("delay 10ms 1ms")
	if r, _ := replay(s, trains, 200, 1); r.Reordered < 0.2 {
		t.Errorf("trains with jitter: reordered %.3f, want most", r.Reordered)
	}
	s, _ = spec.Parse("delay 10ms 100us")
	if r, _ := replay(s, sends, 200, 1); r.Reordered != 0 {
		t.Errorf("1 ms spacing, ±100 µs: reordered %.3f, want 0", r.Reordered)
	}
	s, _ = spec.Parse("loss 10%")
	if r, _ := replay(s, sends, 200, 1); r.Loss < 0.05 || r.Loss > 0.15 {
		t.Errorf("loss 10%%: %.3f", r.Loss)
	}
}

func TestOvertakers(t *testing.T) {
	for _, c := range []struct {
		seqs []uint64
		want uint64
	}{{[]uint64{0, 1, 2}, 0}, {[]uint64{1, 0, 2}, 1}, {[]uint64{3, 0, 1, 2}, 1}, {[]uint64{1, 2, 3, 0}, 3}} {
		if got := engine.Overtakers(c.seqs); got != c.want {
			t.Errorf("overtakers(%v) = %d, want %d", c.seqs, got, c.want)
		}
	}
}
