package bench

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/spec"
)

// z999 is the two-sided 99.9 % normal quantile.
const z999 = 3.2905267314919255

// quantile returns the q-quantile (0..1) of sorted values, interpolating
// linearly between neighbours; 0 for no values.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	pos := q * float64(len(sorted)-1)
	i := int(pos)
	if i >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	f := pos - float64(i)
	return sorted[i]*(1-f) + sorted[i+1]*f
}

// probeStats is what one probe run realized.
type probeStats struct {
	Sent, Received int // unique sequence numbers sent and received
	Duplicates     int
	Reordered      int // arrivals ahead of an earlier-sent packet that arrived later (overtakers)
	DelayP50       time.Duration
	DelayP99       time.Duration
	LossRuns       int     // maximal runs of consecutive lost sequence numbers
	MeanLossRun    float64 // packets per run
	// RateBps is the IP rate at the receiver over the steady part of the
	// run; Burst1ms the most IP bytes received in any 1 ms window.
	RateBps  float64
	Burst1ms int
}

// arrival is one received probe.
type arrival struct {
	seq      uint64
	sent, rx int64 // ns, CLOCK_REALTIME of the same host
	ipLen    int
}

// analyze computes a run's statistics. sent is the number of probes sent
// (sequence numbers 0..sent-1); the long-run rate skips the arrivals of
// the first steadyAfter (see rateAndBurst).
func analyze(arr []arrival, sent int, steadyAfter time.Duration) probeStats {
	st := probeStats{Sent: sent}
	seen := make([]bool, sent)
	delays := make([]float64, 0, len(arr))
	order := make([]uint64, 0, len(arr))
	for _, a := range arr {
		if a.seq >= uint64(sent) {
			continue
		}
		if seen[a.seq] {
			st.Duplicates++
			continue
		}
		seen[a.seq] = true
		st.Received++
		order = append(order, a.seq)
		delays = append(delays, float64(a.rx-a.sent))
	}
	st.Reordered = int(engine.Overtakers(order))
	slices.Sort(delays)
	st.DelayP50 = time.Duration(quantile(delays, .5))
	st.DelayP99 = time.Duration(quantile(delays, .99))
	run, lost := 0, 0
	for i := range seen {
		if !seen[i] {
			run++
			lost++
			continue
		}
		if run > 0 {
			st.LossRuns++
			run = 0
		}
	}
	if run > 0 {
		st.LossRuns++
	}
	if st.LossRuns > 0 {
		st.MeanLossRun = float64(lost) / float64(st.LossRuns)
	}
	st.RateBps, st.Burst1ms = rateAndBurst(arr, steadyAfter)
	return st
}

// rateAndBurst returns the receive rate in bit/s while the shaper is
// saturated: from the first arrival steadyAfter after the first one (a
// full bucket lets traffic through at the offered rate until it is
// empty) to the arrival at 90 % (so the queue's drain after the sender
// stopped does not count either); and the most bytes in any window of
// 1 ms over all arrivals.
func rateAndBurst(arr []arrival, steadyAfter time.Duration) (float64, int) {
	if len(arr) < 2 {
		return 0, 0
	}
	rx := slices.Clone(arr)
	slices.SortFunc(rx, func(a, b arrival) int { return cmp.Compare(a.rx, b.rx) })
	i, _ := slices.BinarySearchFunc(rx, rx[0].rx+int64(steadyAfter), func(a arrival, t int64) int { return cmp.Compare(a.rx, t) })
	j := len(rx) - 1
	if steadyAfter > 0 {
		j = int(float64(len(rx)-1) * 0.9)
	}
	rate := 0.0
	if j > i && rx[j].rx > rx[i].rx {
		var bytes int64
		for _, a := range rx[i+1 : j+1] { // the first packet opens the interval
			bytes += int64(a.ipLen)
		}
		rate = float64(bytes) * 8 / (float64(rx[j].rx-rx[i].rx) / 1e9)
	}
	best, sum, k := 0, 0, 0
	for i := range rx {
		sum += rx[i].ipLen
		for rx[i].rx-rx[k].rx >= int64(time.Millisecond) {
			sum -= rx[k].ipLen
			k++
		}
		best = max(best, sum)
	}
	return rate, best
}

// geMeanBurst returns the mean length of runs of consecutive losses of a
// Gilbert-Elliott model, by simulating the chain the way netem walks it
// (loss_gilb_ell in net/sched/sch_netem.c: each packet may move the
// state, then is dropped with the loss probability of the state it found).
func geMeanBurst(l spec.Loss, steps int, seed uint64) float64 {
	r := rand.New(rand.NewPCG(seed, 0x6765))
	p, rr, h, k := l.GP.Prob(), l.GR.Prob(), l.GH.Prob(), l.GK.Prob()
	bad := false
	runs, lost, run := 0, 0, 0
	for range steps {
		var drop bool
		if bad {
			if r.Float64() < rr {
				bad = false
			}
			drop = r.Float64() < h
		} else {
			if r.Float64() < p {
				bad = true
			}
			drop = r.Float64() < k
		}
		if drop {
			run++
			lost++
		} else if run > 0 {
			runs++
			run = 0
		}
	}
	if runs == 0 {
		return 0
	}
	return float64(lost) / float64(runs)
}
