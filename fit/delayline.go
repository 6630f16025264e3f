package fit

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// A delay line (netem's delay) holds the packets that entered it within
// its delay, and its limit (netem's limit, 1000 packets by default)
// counts them: a flight that outgrows it loses what arrives while it is
// full, a long run of segments, with no queue to show (the round trip
// stays flat: each packet waits the delay, no more). Where long runs
// came each time the line held the same number of segments, they were
// its overflows, not the path's random loss; and a reproduction whose
// line is shorter than what the original carried drops where the
// original did not.
const (
	// lineMinSegs is the shortest run an overflow makes here: random
	// loss makes runs of three seldom (once in 10,000 runs at 1 %).
	lineMinSegs = 3
	// lineAgree is how close to their median the runs' line counts lie:
	// the segments in the line when the first of each was lost.
	lineAgree = 0.1
	// lineDefault is netem's limit when none is given.
	lineDefault = 1000
	// lineUsual is the most of the limit the line's median level may be.
	lineUsual = 0.8
	// lineClock is the least half-width of the limit's interval.
	lineClock = 0.03
	// lineEpisodeGap is the most half round trips between one run of an
	// overflow's episode and the next: the recovery's hole shows a round
	// trip after the flight's tail (at 200 ms CUBIC overflowed again two
	// round trips after the recovery's hole).
	lineEpisodeGap = 3
	// lineRoom is the limit a spec gives a line that never overflowed,
	// over the most it held, where that came near netem's default.
	lineRoom = 1.5
)

// lineCount is how many segments passed the capture point within d
// before t (t itself left out): what a delay line of d held then. Near
// the sender they entered it (the data's first hop), near the receiver
// they left it, a delay later, in the same order and spacing.
func (f *flow) lineCount(t, d time.Duration) int {
	i := sort.Search(len(f.data), func(k int) bool { return f.data[k].t > t-d })
	n := 0
	for ; i < len(f.data) && f.data[i].t < t; i++ {
		if f.data[i].payload > 0 {
			n += f.segsIn(int64(f.data[i].payload))
		}
	}
	return n
}

// lineTime is when the delay line overflowed for a run timed t: near
// the sender the first lost segment's send, near the receiver just
// after the last arrival before the hole showed (what arrives above it
// may come a round trip later: the overflow took a flight's tail).
func (f *flow) lineTime(t time.Duration, where string) time.Duration {
	if where == "sender" {
		return t
	}
	i := sort.Search(len(f.data), func(k int) bool { return f.data[k].t >= t }) - 1
	if i < 0 {
		return t
	}
	return f.data[i].t + 1
}

// lineLevels are the segments that passed the capture point within d
// up to each data record: the delay line's level over the transfer,
// sorted.
func (f *flow) lineLevels(d time.Duration, where string) []float64 {
	in := f.data
	if where == "sender" {
		// The sends the line dropped passed the capture point but never
		// entered it.
		in = slices.DeleteFunc(slices.Clone(in), f.lostSend)
	}
	out := make([]float64, 0, len(in))
	n, j := 0, 0
	for i := range in {
		n += f.segsIn(int64(max(in[i].payload, 0)))
		for in[i].t-in[j].t >= d {
			n -= f.segsIn(int64(max(in[j].payload, 0)))
			j++
		}
		out = append(out, float64(n))
	}
	return sorted(out)
}

// lostSend says a data record near the sender was a send that was lost:
// the first send of a lost span's bytes.
func (f *flow) lostSend(r record) bool {
	if f.walked == nil || r.payload <= 0 {
		return false
	}
	lost := f.walked.lost // in sequence order
	s := f.off(r.seq)
	i := sort.Search(len(lost), func(k int) bool { return lost[k].start > s }) - 1
	return i >= 0 && s < lost[i].end && lost[i].t == r.t
}

// delayLine is what the capture says of the data's delay line of d
// (the spec's one-way delay): the limit its overflows showed (a Param,
// unknown where none did), the limit a spec should give it (0: netem's
// default will do), and how many loss episodes could have been its
// overflows (two or more: the limit is a finding either way).
type delayLine struct {
	limit    Param
	spec     int
	episodes int
}

// delayLineDrops marks the runs of the loss episodes (runs not taken
// for a bottleneck's tail drops, with no queue before them, one at least
// long) that came when the line held the same number of segments (within
// 10 % of their median; two episodes or more, and two thirds of them),
// that number its ceiling (the most it held, 10 % more at most) and not
// its usual level (its median at 80 % of it or less: the flight grew
// into the limit and fell back, as a congestion window does at
// overflows, where a window-limited flight that a bursty channel hits
// holds its level all along): the line's overflows. They are tail drops
// (full, line); the limit is their median count. Where none overflowed, a line that held 90 % of
// netem's default or more needs room in a reproduction: half as much
// again as it held.
func (f *flow) delayLineDrops(runs []lossRun, where string, d time.Duration) delayLine {
	var out delayLine
	if d <= 0 || len(f.data) == 0 || (where != "sender" && where != "receiver") {
		out.limit = unknown("no one-way delay, or captured between the ends: the delay line's contents are not known")
		return out
	}
	// An overflow's episode: the flight's tail, then what the recovery
	// sent into the line still full (near the receiver the second hole
	// shows after a few arrivals, a round trip later). Runs not taken
	// for a bottleneck's, each within one and a half round trips of the
	// one before; the episode's level is its runs' highest count (the first may be
	// short: a flight's tail a segment or two past the limit), and one of
	// them at least is long.
	type episode struct {
		runs  []int
		level float64
		long  bool
	}
	var eps []episode
	for i, r := range runs {
		if r.full {
			continue
		}
		if n := len(eps); n == 0 || r.t-runs[eps[n-1].runs[len(eps[n-1].runs)-1]].t > lineEpisodeGap*f.base/2 {
			eps = append(eps, episode{})
		}
		e := &eps[len(eps)-1]
		e.runs = append(e.runs, i)
		if r.before < f.theta || f.theta <= 0 {
			e.long = e.long || r.segs >= lineMinSegs
			e.level = max(e.level, float64(f.lineCount(f.lineTime(r.t, where), d)))
		}
	}
	eps = slices.DeleteFunc(eps, func(e episode) bool { return !e.long })
	out.episodes = len(eps)
	counts := make([]float64, len(eps))
	for k, e := range eps {
		counts[k] = e.level
	}
	levels := f.lineLevels(d, where)
	most, usual := levels[len(levels)-1], quantile(levels, 0.5)
	var agree []int
	med := 0.0
	if len(eps) >= 2 {
		med = quantile(sorted(counts), 0.5)
		for k, c := range counts {
			if math.Abs(c-med) <= lineAgree*med {
				agree = append(agree, k)
			}
		}
	}
	if len(agree) < 2 || 3*len(agree) < 2*len(eps) || most > (1+lineAgree)*med || usual > lineUsual*med {
		out.limit = unknown(fmt.Sprintf("no overflow of the delay line (%s): at most %.0f segments passed within it", ms(d), most))
		if most >= lineDefault*9/10 {
			out.spec = int(math.Ceil(most * lineRoom))
		}
		if len(eps) >= 2 {
			out.limit = unknown(fmt.Sprintf("%d loss episodes with long runs and no queue before them, the delay line (%s) holding %.0f-%.0f segments at their first (%d within %.0f %% of the median, %.0f), at most %.0f, usually %.0f: no limit it overflowed (two thirds of the episodes at one level, its most and more than its usual level by a quarter)",
				len(eps), ms(d), slices.Min(counts), slices.Max(counts), len(agree), lineAgree*100, med, most, usual))
		}
		return out
	}
	lo, hi := math.Inf(1), 0.0
	segs := 0
	for _, k := range agree {
		for _, i := range eps[k].runs {
			r := &runs[i]
			r.full, r.line = true, true
			segs += r.segs
		}
		lo, hi = math.Min(lo, counts[k]), math.Max(hi, counts[k])
	}
	n := int(math.Round(med))
	out.spec = n
	// The capture's clock against the line's: segments pass the capture
	// point a little before or after they enter or leave the line.
	atLo, atHi := lo, hi
	lo, hi = math.Min(lo, med*(1-lineClock)), math.Max(hi, med*(1+lineClock))
	out.limit = withSamples(known(float64(n), lo, hi, fmt.Sprintf(
		"%d loss episodes (runs within one and a half round trips of each other) of %d segments in all, each when the %s delay line held %.0f-%.0f segments at its highest (the segments that passed the capture point within %s before it), its most (%.0f) and more than it usually held (%.0f), with no queue before them: the line's limit overflowed (netem's limit, %d packets by default); tail drops, not random loss",
		len(agree), segs, ms(d), atLo, atHi, ms(d), most, usual, lineDefault)), len(agree))
	return out
}
