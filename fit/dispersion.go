package fit

import (
	"fmt"
	"math"
	"slices"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/units"
)

// A bottleneck busy with a flight's packets sends them a packet time
// apart: behind it they arrive spaced by their size over its rate
// (packet-pair dispersion), whatever the queue, however short the time
// it was busy. Near the receiver the data's spacing shows it; near the
// sender the ACKs', which the receiver sends as the data arrives.
const (
	// dispersionWindow is the half-width of the band, as a share of the
	// rate, that the pairs at the bottleneck's rate fall into: the
	// capture's timestamps (microseconds) and the header model's error.
	dispersionWindow = 0.03
	// dispersionShare is the share of all pairs the band must hold: a
	// bottleneck spaces a third to two thirds of them so in the lab
	// (10 Mbit/s-1 Gbit/s behind the receiver, 10-100 Mbit/s behind
	// the sender); a path without one, set by the hosts and the veth
	// at several Gbit/s, 1-8 % per 2 % band.
	dispersionShare = 0.25
	// dispersionAgreeShare is the share that does where the band's
	// rate agrees with what the path carried at its best (from a
	// quarter below it, a bucket's burst, to dispersionOverPeak above):
	// a queue a quarter of the bandwidth-delay product long empties
	// often, and the pairs it spaced were a fifth of them behind the
	// sender in the lab (100 Mbit/s, 10 and 50 ms), where a path
	// without one had up to a fifth in a band too, at least five times
	// above or below its best delivery.
	dispersionAgreeShare = 0.15
	// dispersionUnderPeak is how far below the path's best delivery an
	// agreeing band's rate may be: a bottleneck passes no more than its
	// rate but a token bucket's burst.
	dispersionUnderPeak = 1.25
	// dispersionPairs is the fewest pairs to look at.
	dispersionPairs = 200
	// dispersionOverPeak bounds the band's rate by the path's best
	// delivery over a few round trips: a bottleneck's rate is what a
	// flight reaches when it fills it (a quarter of the
	// bandwidth-delay product's buffer leaves the link idle a while
	// each round: 70 % of it at 200 ms and 100 Mbit/s, 62 % at 10 ms
	// and 1 Gbit/s, where the proxy fell short too); the spacing of a
	// path with none is the hosts', 11 times what it carried and more
	// in the lab.
	dispersionOverPeak = 2
	// dispersionOverPeakBand is the bound for a band of a quarter of
	// the pairs or more: one that strong is a bottleneck's spacing even
	// where the path carried less than half its rate (a quarter-BDP
	// buffer behind 1 Gbit/s through the userspace proxy: 30-42 % of
	// the data's pairs at the bucket's rate, the path's best 2.0-2.4
	// times under it), while the hosts' spacing and a link the sender's
	// buffer kept far from full lie 7 times or more above what the path
	// carried (the grid runs of 2026-12-04).
	dispersionOverPeakBand = 3
)

// dispersion is the pair rates and how they were taken.
type dispersion struct {
	rates []float64 // bits/s, IP bytes
	what  string
}

// pairRates are the rates of consecutive packets' spacing near the
// receiver (new data: an earlier record's IP bytes over the time to the
// next; a record of several segments the receiver's offload joined is
// stamped at its first, and the next comes its bytes later) or near the
// sender (ACKs with no SACK blocks that each moved the cumulative ACK:
// the data they acknowledged over the time since the one before).
func (f *flow) pairRates(where string) dispersion {
	var d dispersion
	switch where {
	case "receiver":
		d.what = "consecutive new data segments' arrival spacing"
		var high int64 = -1
		var prev *record
		for i := range f.data {
			r := &f.data[i]
			if r.payload <= 0 {
				continue
			}
			s, e := f.off(r.seq), f.off(r.seq)+int64(r.payload)
			isNew := s >= high && r.aflags&analyzer.AnyRetransmission == 0
			if isNew && prev != nil && r.t > prev.t {
				d.rates = append(d.rates, float64(prev.payload)*f.ipFact*8/(r.t-prev.t).Seconds())
			}
			if isNew {
				prev = r
			} else {
				prev = nil // a re-send or one out of order: a gap of another kind
			}
			high = max(high, e)
		}
	case "sender":
		d.what = "consecutive ACKs' spacing (each moving the cumulative ACK, with no SACK blocks)"
		var prev *record
		for i := range f.acks {
			a := &f.acks[i]
			if a.nsack > 0 {
				prev = nil
				continue
			}
			if prev != nil {
				if n := f.off(a.ack) - f.off(prev.ack); n > 0 && n < 1<<30 && a.t > prev.t {
					d.rates = append(d.rates, float64(n)*f.ipFact*8/(a.t-prev.t).Seconds())
				}
			}
			prev = a
		}
	}
	return d
}

// dispersionRate is the bottleneck's rate from the pairs' spacing: the
// band of +-3 % holding the most pairs, when it holds a quarter of them
// or more and the path carried a third of its rate or more at its best, or
// 15 % of them and the path's best was also at most a quarter above it;
// the rate is the median of the band's pairs. Otherwise it is unknown,
// and says why.
func (f *flow) dispersionRate(where string) Param {
	if where != "receiver" && where != "sender" {
		return unknown("captured between the ends: whether the packets' spacing is from before the bottleneck or after it is not known")
	}
	d := f.pairRates(where)
	ls := make([]float64, 0, len(d.rates))
	for _, r := range d.rates {
		if r > 0 && !math.IsInf(r, 0) {
			ls = append(ls, math.Log(r))
		}
	}
	if len(ls) < dispersionPairs {
		return unknown(fmt.Sprintf("%d pairs of %s: too few for a dispersion", len(ls), d.what))
	}
	slices.Sort(ls)
	w := 2 * math.Log1p(dispersionWindow)
	best, bi, bj := 0, 0, 0
	j := 0
	for i := range ls {
		for j < len(ls) && ls[j] <= ls[i]+w {
			j++
		}
		if j-i > best {
			best, bi, bj = j-i, i, j
		}
	}
	band := make([]float64, 0, best)
	for _, l := range ls[bi:bj] {
		band = append(band, math.Exp(l))
	}
	rate, lo, hi := medianInterval(band)
	share := float64(best) / float64(len(ls))
	peak := f.peakRate(f.delivered())
	head := fmt.Sprintf("%d pairs of %s: %.0f %% of them within %.0f %% of %s", len(ls), d.what, share*100, dispersionWindow*100, units.Rate(rate).Human())
	over := float64(dispersionOverPeak)
	if share >= dispersionShare {
		over = dispersionOverPeakBand
	}
	switch {
	case share < dispersionAgreeShare:
		return unknown(head + fmt.Sprintf(": no one spacing (a bottleneck spaces %.0f %% or more so)", dispersionShare*100))
	case rate > over*peak:
		return unknown(head + fmt.Sprintf(", but the path carried at most %s over a few round trips, under 1/%.0f of it: the hosts' spacing, or a link the transfer never came near filling", units.Rate(peak).Human(), over))
	case share < dispersionShare && rate*dispersionUnderPeak < peak:
		return unknown(head + fmt.Sprintf(": no one spacing (a bottleneck spaces %.0f %% or more so, or %.0f %% at the rate the path carried at its best), and the path carried up to %s over a few round trips, more than a bottleneck at this rate passes",
			dispersionShare*100, dispersionAgreeShare*100, units.Rate(peak).Human()))
	}
	// The band's median by order statistics, widened by 1 % for the
	// header model, as the ACK clock's.
	lo, hi = min(lo, rate*0.99), max(hi, rate*1.01)
	return withSamples(known(rate, lo, hi, head+fmt.Sprintf(
		" (packet-pair dispersion: a bottleneck sends a flight's packets a packet time apart at its rate, however short its queue); the path carried up to %s over a few round trips", units.Rate(peak).Human())), best)
}
