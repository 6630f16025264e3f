package fit

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/wanlab/wanlab/analyzer"
)

// maxCoverSegments bounds the wire segments covers times one by one:
// twice the packets a fit holds by default (DefaultMaxPackets).
const maxCoverSegments = 2 * DefaultMaxPackets

// covers times each wire segment sent once (Karn's rule: its range never
// sent again) by the first ACK that holds it, in a SACK block or below
// its cumulative ACK, in the ACKs' order. The SACK blocks' are what
// Karn's samples miss near the sender when the receiver got data out of
// order: a segment a jitter delayed less than those before it arrives
// early, and its cumulative ACK waits for them; its SACK comes back at
// once.
func (f *flow) covers() []cover {
	type seg struct {
		lo, hi int64
		t      time.Duration
	}
	var segs []seg
	var resent [][2]int64 // what was sent again: below the highest sent before it
	var high int64
	// An offloaded record's wire segments each (a jitter delays them
	// apart), up to twice the records a fit holds; beyond, per record.
	step := int64(f.mss)
	if n, _ := f.segmentsSent(); n > maxCoverSegments {
		step = math.MaxInt64
	}
	for _, d := range f.data {
		lo := f.off(d.seq)
		hi := lo + int64(d.payload)
		if lo < high || d.aflags&analyzer.AnyRetransmission != 0 {
			resent = append(resent, [2]int64{lo, hi})
		} else {
			for p := lo; p < hi; {
				next := hi
				if hi-p > step {
					next = p + step
				}
				segs = append(segs, seg{p, next, d.t})
				p = next
			}
		}
		high = max(high, hi)
	}
	if len(segs) == 0 {
		return nil
	}
	// Leave out what was sent again (its SACK may be the re-send's).
	slices.SortFunc(resent, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	reach := make([]int64, len(resent)+1) // reach[j]: the furthest end of resent[:j]
	for j, r := range resent {
		reach[j+1] = max(reach[j], r[1])
	}
	kept := segs[:0]
	for _, s := range segs {
		j := sort.Search(len(resent), func(k int) bool { return resent[k][0] >= s.hi })
		if j > 0 && reach[j] > s.lo {
			continue
		}
		kept = append(kept, s)
	}
	segs = kept
	// next[i] is the first segment at i or above not yet timed (a
	// forest with its paths halved).
	next := make([]int, len(segs)+1)
	for i := range next {
		next[i] = i
	}
	find := func(i int) int {
		for next[i] != i {
			next[i] = next[next[i]]
			i = next[i]
		}
		return i
	}
	var out []cover
	for _, a := range f.acks {
		cum := f.off(a.ack)
		for i := find(0); i < len(segs) && segs[i].hi <= cum; i = find(i) {
			if s := segs[i]; s.t < a.t {
				out = append(out, cover{s.t, a.t, s.hi, false})
			}
			next[i] = i + 1
		}
		for bi, b := range a.sack[:min(a.nsack, 4)] {
			l, r := f.off(b.Left), f.off(b.Right)
			if r <= cum || bi == 0 && a.nsack > 1 && l >= f.off(a.sack[1].Left) && r <= f.off(a.sack[1].Right) {
				continue // a duplicate report (D-SACK)
			}
			l = max(l, cum)
			i := sort.Search(len(segs), func(k int) bool { return segs[k].hi > l })
			for i = find(i); i < len(segs) && segs[i].hi <= r; i = find(i) {
				if s := segs[i]; s.lo >= l && s.t < a.t {
					out = append(out, cover{s.t, a.t, s.hi, true})
				}
				next[i] = i + 1
			}
		}
	}
	return out
}

// cover is when a wire segment left and when the first ACK holding it
// came, by a SACK block or the cumulative ACK.
type cover struct {
	sent, at time.Duration
	end      int64 // the segment's end, as an offset
	sack     bool
}

// sackSamples are the covers by a SACK block as samples (at the ACK's
// time), in the ACKs' order.
func sackSamples(cs []cover) []sample {
	var out []sample
	for _, c := range cs {
		if c.sack {
			out = append(out, sample{c.at, c.at - c.sent})
		}
	}
	return out
}
