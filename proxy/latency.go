package proxy

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/wanlab/wanlab/proxy/control"
)

// latencyHistogram counts durations in control.LatencyBoundsNs buckets
// with atomic counters, so that Stats reads it without taking the locks
// of the hot path. Its writers are few (a direction's writer under wmu,
// or one reader), so the adds are uncontended; a batch adds through a
// tally, which costs one add per run of samples in the same bucket.
type latencyHistogram struct {
	counts [len(control.LatencyBoundsNs) + 1]atomic.Uint64
	sum    atomic.Int64
	max    atomic.Int64
}

// latencyBucket is the index of the bucket holding ns: a binary search
// over the 51 bounds, 6 comparisons.
func latencyBucket(ns int64) int {
	lo, hi := 0, len(control.LatencyBoundsNs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ns <= control.LatencyBoundsNs[m] {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// tally gathers one batch's samples for a histogram on the caller's
// stack and adds them with flush: the sum and the maximum once per batch,
// the counts once per run of samples in the same bucket (a batch's
// samples mostly share one).
type tally struct {
	h        *latencyHistogram
	bucket   int
	run      uint64
	sum, max int64
}

// addN counts n samples of ns (negative ones as 0: the clock is
// monotonic, so only a stamp taken before the time it is compared with
// could give one).
func (t *tally) addN(ns int64, n uint64) {
	ns = max(ns, 0)
	b := latencyBucket(ns)
	if b != t.bucket && t.run > 0 {
		t.h.counts[t.bucket].Add(t.run)
		t.run = 0
	}
	t.bucket = b
	t.run += n
	t.sum += ns * int64(n)
	t.max = max(t.max, ns)
}

func (t *tally) flush() {
	if t.run == 0 {
		return
	}
	t.h.counts[t.bucket].Add(t.run)
	t.run = 0
	t.h.sum.Add(t.sum)
	t.sum = 0
	for {
		cur := t.h.max.Load()
		if t.max <= cur || t.h.max.CompareAndSwap(cur, t.max) {
			return
		}
	}
}

// mergeInto adds h's counts, sum and maximum to the plain accumulators
// of a reading (Stats merges the readers' histograms this way).
func (h *latencyHistogram) mergeInto(counts []uint64, sum, maxSample *int64) {
	for i := range h.counts {
		counts[i] += h.counts[i].Load()
	}
	*sum += h.sum.Load()
	*maxSample = max(*maxSample, h.max.Load())
}

// readHistograms merges hs into one served histogram.
func readHistograms(hs ...*latencyHistogram) control.LatencyHistogram {
	counts := make([]uint64, len(control.LatencyBoundsNs)+1)
	var sum, maxSample int64
	for _, h := range hs {
		h.mergeInto(counts, &sum, &maxSample)
	}
	return control.NewLatencyHistogram(counts, time.Duration(sum), time.Duration(maxSample))
}

// latency returns d's Latency: the release side's histograms and the
// readers' merged.
func (d *direction) latency() *control.Latency {
	readers := make([]*latencyHistogram, len(d.readers))
	for i, r := range d.readers {
		readers[i] = &r.readToEnqueue
	}
	return &control.Latency{
		BoundsNs:         slices.Clone(control.LatencyBoundsNs[:]),
		Added:            readHistograms(&d.late.added),
		ReadToEnqueue:    readHistograms(readers...),
		DueToDequeue:     readHistograms(&d.late.dueToDequeue),
		DequeueToWritten: readHistograms(&d.late.dequeueToWritten),
	}
}
