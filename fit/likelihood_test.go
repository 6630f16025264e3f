package fit

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/tc/spec"
)

// syntheticSender is a capture near a sender whose data went through
// path (nil: none): bursts of 10 to 90 full segments back to back every
// 60 ms, their first ACKs a 20 ms round trip after they left the path
// plus up to 0.4 ms of the receiver's and hosts' timing (seeded), the
// segments the path dropped lost (never ACKed, their bytes the walk's
// losses).
func syntheticSender(t *testing.T, path *spec.Spec) *flow {
	t.Helper()
	const (
		mss     = 1448
		ip      = mss + 52
		rtt     = 20 * time.Millisecond
		bursts  = 100
		spacing = 60 * time.Millisecond
	)
	rng := rand.New(rand.NewPCG(7, 11))
	f := &flow{mss: mss, ipFact: float64(ip) / mss, base: rtt, st: &analyzer.Direction{}}
	var off uint32
	for b := range bursts {
		n := 10 + rng.IntN(81)
		for k := range n {
			f.data = append(f.data, record{t: time.Duration(b)*spacing + time.Duration(k)*1200*time.Nanosecond,
				seq: off, payload: mss, ipLen: ip, karn: -1, inflight: -1})
			off += mss
		}
		f.st.MaxInFlightBytes = max(f.st.MaxInFlightBytes, int64(n*mss))
	}
	sends := make([]send, len(f.data))
	for i, r := range f.data {
		sends[i] = send{t: r.t, ip: ip, rec: i}
	}
	depart := make([]time.Duration, len(f.data))
	for i, r := range f.data {
		depart[i] = r.t
	}
	w := &walked{where: "sender"}
	if path != nil {
		rp, err := replay(sends, len(f.data), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		copy(depart, rp.depart)
		for i, r := range f.data {
			if rp.dropped[i] != 0 {
				w.lost = append(w.lost, lostSpan{start: int64(r.seq), end: int64(r.seq) + mss, t: r.t})
			}
		}
	}
	f.walked = w
	for i, r := range f.data {
		if depart[i] < 0 {
			continue
		}
		at := depart[i] + rtt + time.Duration(rng.Float64()*0.4*float64(time.Millisecond))
		f.covs = append(f.covs, cover{sent: r.t, at: at, end: int64(r.seq) + mss})
		f.acks = append(f.acks, record{t: at, dir: 1, ack: r.seq + mss, karn: -1, inflight: -1})
	}
	slices.SortStableFunc(f.covs, func(a, b cover) int { return int(a.at - b.at) })
	slices.SortStableFunc(f.acks, func(a, b record) int { return int(a.t - b.t) })
	return f
}

func TestFitBucketRecoversTheBucket(t *testing.T) {
	const rate, buffer = 20e6, 60000
	path, err := spec.Parse("tbf rate 20mbit burst 32kb limit 60000b")
	if err != nil {
		t.Fatal(err)
	}
	f := syntheticSender(t, path)
	if len(f.walked.lost) == 0 {
		t.Fatal("the synthetic bursts overflowed no bucket: no drops to fit the buffer on")
	}
	b := f.fitBucket(DefaultMaxPackets)
	t.Log(b.Why)
	if !b.Bucket || b.RateOpen || b.BufferOpen {
		t.Fatalf("bucket %v, rate open %v, buffer open %v: want a bucket with both identified", b.Bucket, b.RateOpen, b.BufferOpen)
	}
	if e := b.Rate/rate - 1; math.Abs(e) > 0.05 {
		t.Errorf("rate %.4g, want %.4g within 5 %% (off %.1f %%)", b.Rate, rate, e*100)
	}
	if e := b.Buffer/buffer - 1; math.Abs(e) > 0.25 {
		t.Errorf("buffer %.4g, want %.4g within 25 %% (off %.1f %%)", b.Buffer, float64(buffer), e*100)
	}
	if b.RateLo > b.Rate || b.RateHi < b.Rate || b.BufferLo > b.Buffer || b.BufferHi < b.Buffer {
		t.Errorf("intervals [%.4g, %.4g] and [%.4g, %.4g] do not hold their estimates %.4g and %.4g",
			b.RateLo, b.RateHi, b.BufferLo, b.BufferHi, b.Rate, b.Buffer)
	}
	if b.Evals*b.Sends > likPacketBudget*2 {
		t.Errorf("%d replays of %d sends: beyond twice the budget of %d packets", b.Evals, b.Sends, likPacketBudget)
	}
}

func TestFitBucketPrefersNoneWithoutOne(t *testing.T) {
	f := syntheticSender(t, nil)
	b := f.fitBucket(DefaultMaxPackets)
	t.Log(b.Why)
	if b.Bucket && !b.RateOpen {
		t.Fatalf("a bucket of %.4g bit/s claimed on a path without one: %s", b.Rate, b.Why)
	}
}
