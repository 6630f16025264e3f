package fit

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/analyzer/decode"
	"github.com/wanlab/wanlab/internal/binom"
	"github.com/wanlab/wanlab/units"
)

// sample is one timed measurement.
type sample struct {
	t time.Duration
	v time.Duration
}

// flow is the data direction being fitted: its packets split into data
// segments and the receiver's ACKs, and what is derived from them.
type flow struct {
	dir    int // the data's direction (0: client to server)
	st     *analyzer.Direction
	data   []record
	acks   []record
	isn    uint32 // sequence number the data's offsets count from
	mss    int
	ipFact float64 // IP bytes per payload byte of full segments

	karn, echo []sample
	// covs times each wire segment sent once by the first ACK that
	// holds it (covers), in the ACKs' order.
	covs       []cover
	kmin, emin time.Duration
	conn       *analyzer.Connection // the analyzer's connection, of the same pass
	base       time.Duration
	baseSrc    string

	queue []sample // the bottleneck queue's delay over time
	// queueSent is the same queue by when the data met it: a data-to-ACK
	// sample at its segment's send time, an echo at its data's arrival
	// (loss runs are timed so too), sorted.
	queueSent []sample
	qShare    float64 // share of queue samples at theta or more
	qRho      float64 // their lag-1 autocorrelation
	qLeg      string
	qTick     time.Duration // the echo leg's grain: a tick of the receiver's TSval clock (0: the data-to-ACK leg)
	qmax      time.Duration
	qp95      time.Duration
	theta     time.Duration // queue delay that counts as "a queue exists"
	rate      float64       // bits/s while a queue held (0: unknown)
	rateLo    float64
	rateHi    float64
	rateWhy   string
	// walked is the capture's losses as walked, before they are classed
	// (walkLosses; nil: not yet).
	walked *walked
	// unsentHoles is holesFilledUnsent, counted once by rtts.
	unsentHoles int
	// del is delivered's answer for the first delAcks ACKs.
	del     []sample
	delAcks int
}

func newFlow(recs []record, c *analyzer.Connection, dir int) *flow {
	f := &flow{dir: dir, st: c.Directions[dir], conn: c}
	for _, r := range recs {
		switch {
		case r.dir == dir && r.payload > 0:
			f.data = append(f.data, r)
		case r.dir != dir && r.flags&decode.FlagACK != 0:
			f.acks = append(f.acks, r)
		}
	}
	if len(f.data) > 0 {
		f.isn = f.data[0].seq
		for _, d := range f.data { // the lowest sequence number seen (a retransmission may come first)
			if int32(d.seq-f.isn) < 0 {
				f.isn = d.seq
			}
		}
	}
	// The segment the wire carries: the receiver's MSS option less the
	// timestamp option's 12 bytes; without the handshake the largest
	// segment seen (a capture with offload shows larger ones).
	f.mss = f.st.MaxSegmentBytes
	if peer := c.Directions[1-dir]; peer != nil && peer.MSS > 0 {
		f.mss = peer.MSS
		if f.st.Timestamps && peer.Timestamps {
			f.mss -= 12
		}
	}
	if f.mss <= 0 {
		f.mss = 1448
	}
	// IP bytes per payload byte on the wire: one header per MSS (a
	// capture with segmentation offload shows one per super-segment).
	hdr := 52
	if len(f.data) > 0 {
		hdr = f.data[0].ipLen - f.data[0].payload
	}
	f.ipFact = 1 + float64(hdr)/float64(f.mss)
	f.rtts()
	return f
}

// off is a sequence number as an offset from the data's first byte.
func (f *flow) off(seq uint32) int64 { return int64(int32(seq - f.isn)) }

// rtts gathers both legs of the round trip seen from the capture point:
// data to the ACK that covers it (Karn's samples: capture point to the
// receiver and back) and the receiver's TSval to the first new data that
// echoes it (capture point to the sender and back).
func (f *flow) rtts() {
	// A cumulative ACK that fills a hole covers the segments above it
	// the receiver had SACKed, and Karn's sample times the highest of
	// them: one sent ahead of the hole's own (a reordering), its sample
	// short by how much later it left, up to a delay line. Not those.
	sacked := map[int64]bool{}
	f.covs = f.covers()
	for _, c := range f.covs {
		if c.sack {
			sacked[c.end] = true
		}
	}
	for _, a := range f.acks {
		if a.karn >= 0 && !sacked[f.off(a.ack)] {
			f.karn = append(f.karn, sample{a.t, a.karn})
		}
	}
	first := make(map[uint32]time.Duration)
	for _, a := range f.acks {
		if a.hasTS {
			if _, ok := first[a.tsval]; !ok {
				first[a.tsval] = a.t
			}
		}
	}
	f.echo = f.echoes(first, nil)
	allEchoes := f.echo
	f.kmin, f.emin = minSample(f.karn), minSample(f.echo)
	// A segment netem's reorder sent ahead of its delay line echoes what
	// its neighbours echo but arrives a delay line sooner: its echo is
	// below the round trip, whose legs then add up to the round trip less
	// the delay line. Those that arrived above a hole filled within twice
	// the legs' sum (the segments overtaken come at most a delay line
	// later; a hole a retransmission fills may be taken too, and its
	// samples are lost, no more) are left out, and the legs measured
	// again.
	// A few holes of a loss recovery close so too (a hole's retransmission
	// before the capture saw its SACK): 1 % of the segments or more is a
	// reordering path (the grid's 1 % shows 30 %, tail drops 0.2-0.5 %).
	f.unsentHoles = f.holesFilledUnsent()
	reordered := f.unsentHoles >= max(5, len(f.data)/100)
	if f.kmin >= 0 && f.emin >= 0 {
		if ahead := f.overtakers(2 * (f.kmin + f.emin)); len(ahead) > 0 {
			reordered = true
			f.echo = f.echoes(first, ahead)
			f.emin = minSample(f.echo)
		}
	}
	// Where the capture shows reordering (holes filled early near the
	// receiver, SACKed holes closed with nothing sent again from either
	// end): one sent ahead when nothing was in the delay line (after a
	// pause) arrives in order, and shows only as a sample far below the samples
	// on both sides of it, in either leg (its ACK, near the sender, comes
	// early too): no queue drains and fills again so between two samples,
	// and the lowest of thousands does not miss one.
	// A queue drains a packet per packet time: two of them, at the
	// transfer's rate, are as far as a genuine sample falls below its
	// neighbours (at 10 Mbit/s, 2.4 ms, a quarter of a 10 ms round trip).
	grain := time.Duration(0)
	if f.st.DataRateBps > 0 {
		grain = time.Duration(2 * float64(f.mss) * 8 / f.st.DataRateBps * 1e9)
	}
	if reordered {
		f.echo, f.karn = dropLoneLows(f.echo, grain), dropLoneLows(f.karn, grain)
		f.kmin, f.emin = minSample(f.karn), minSample(f.echo)
		// A jitter reorders too, and its early segments are the lowest
		// delays, not a delay line skipped: the echoes left out that the
		// kept ones' minimum reaches through steps of a twentieth of it or
		// less come back (a jitter spreads them evenly; netem's reorder
		// sends its segments a delay line ahead). At 10 ms with 2 ms of
		// jitter, 8 echoes were left of 188, the lowest 0.9 ms above
		// the least of all.
		if f.emin > 0 {
			if joined := joinedBelow(f.emin, allEchoes, f.emin/20); len(joined) > 0 {
				f.echo = append(f.echo, joined...)
				slices.SortStableFunc(f.echo, func(a, b sample) int { return cmp.Compare(a.t, b.t) })
				f.emin = minSample(f.echo)
			}
		}
	}
	// Near the sender, a jitter's early segments time the round trip
	// by their SACKs: the lowest of those that join the Karn samples'
	// minimum through steps of a twentieth of it or less (a jitter spreads
	// them evenly; a reordering's segments sent ahead of a delay line sit
	// a delay line below, and a stray sample alone).
	if f.kmin > 0 {
		if joined := joinedBelow(f.kmin, sackSamples(f.covs), f.kmin/20); len(joined) > 0 {
			f.karn = append(f.karn, joined...)
			slices.SortStableFunc(f.karn, func(a, b sample) int { return cmp.Compare(a.t, b.t) })
			f.kmin = minSample(f.karn)
		}
	}
}

// holesFilledUnsent counts the holes the receiver's SACK blocks showed
// that closed with no segment of them sent again: what arrived above them
// overtook them (a reordering), seen from either end. A hole filled by a
// retransmission counts not.
func (f *flow) holesFilledUnsent() int {
	type hole struct{ lo, hi int64 }
	var open []hole
	n, di := 0, 0
	var resent []hole // retransmitted ranges so far
	for _, a := range f.acks {
		for ; di < len(f.data) && f.data[di].t <= a.t; di++ {
			if d := f.data[di]; d.aflags&analyzer.AnyRetransmission != 0 {
				resent = append(resent, hole{f.off(d.seq), f.off(d.seq) + int64(d.payload)})
			}
		}
		cum := f.off(a.ack)
		kept := open[:0]
		for _, h := range open {
			if cum < h.hi {
				kept = append(kept, h)
				continue
			}
			sent := false
			for _, r := range resent {
				if r.lo < h.hi && r.hi > h.lo {
					sent = true
					break
				}
			}
			if !sent {
				n++
			}
		}
		open = kept
		if a.nsack > 0 {
			left := f.off(a.sack[0].Left)
			for _, b := range a.sack[:a.nsack] {
				left = min(left, f.off(b.Left))
			}
			if left > cum && (len(open) == 0 || open[len(open)-1].lo < cum) {
				open = append(open, hole{cum, left})
			}
		}
		// Holes open at the cumulative ACK or above: a re-send wholly
		// below the lowest can fill none, and goes (the list stays the
		// re-sends in flight, not the capture's).
		floor := cum
		for _, h := range open {
			floor = min(floor, h.lo)
		}
		resent = slices.DeleteFunc(resent, func(r hole) bool { return r.hi <= floor })
	}
	return n
}

// joinedBelow are the samples of s below m that a chain of steps of step
// or less joins to m, walking down from it.
func joinedBelow(m time.Duration, s []sample, step time.Duration) []sample {
	var below []sample
	for _, x := range s {
		if x.v < m {
			below = append(below, x)
		}
	}
	slices.SortFunc(below, func(a, b sample) int { return cmp.Compare(b.v, a.v) })
	low := m
	for i, x := range below {
		if low-x.v > step {
			below = below[:i]
			break
		}
		low = x.v
	}
	return below
}

// dropLoneLows leaves out the samples below both their neighbours by a
// tenth of them and grain or more.
func dropLoneLows(s []sample, grain time.Duration) []sample {
	kept := s[:0:0]
	for i, e := range s {
		if i > 0 && i+1 < len(s) {
			if n := min(s[i-1].v, s[i+1].v); n-e.v > max(n/10, grain) {
				continue
			}
		}
		kept = append(kept, e)
	}
	return kept
}

// echoes are the ACK-to-data samples: the receiver's TSval (first, when
// the first ACK carrying it was seen) to the first new data segment
// echoing it, less the segments in skip (indices into f.data).
func (f *flow) echoes(first map[uint32]time.Duration, skip map[int]int64) []sample {
	var out []sample
	done := make(map[uint32]bool)
	var high int64
	for i, d := range f.data {
		end := f.off(d.seq) + int64(d.payload)
		isNew := end > high
		high = max(high, end)
		if !isNew || !d.hasTS || d.aflags&analyzer.AnyRetransmission != 0 || skipped(skip, i) || done[d.tsecr] {
			continue
		}
		if ta, ok := first[d.tsecr]; ok && d.t >= ta {
			out = append(out, sample{d.t, d.t - ta})
			done[d.tsecr] = true
		}
	}
	return out
}

func skipped(skip map[int]int64, i int) bool { _, ok := skip[i]; return ok }

// fewerAhead says the segments ahead of a hole (indices into f.data) hold
// no more data than the hole: a reordering sends a few ahead of many (one
// or a correlated burst past netem's delay line); a hole that a
// retransmission filled early has a window's worth above it.
func (f *flow) fewerAhead(ahead []int, size int64) bool {
	var n int64
	for _, i := range ahead {
		n += int64(f.data[i].payload)
	}
	return n <= size
}

// overtakers are the data segments (indices into f.data) that arrived
// above a hole in the sequence space which was filled all within soon,
// fewer than it held: segments sent ahead of others (a reordering), not
// after a loss. Each maps to the size of the first such hole it overtook.
func (f *flow) overtakers(soon time.Duration) map[int]int64 {
	out := map[int]int64{}
	f.walkHoles(soon, true, holeVisits{closed: func(h *overtaking) {
		if !h.late && f.fewerAhead(h.above, h.size) {
			for _, a := range h.above {
				if _, ok := out[a]; !ok { // ahead of several holes: the first
					out[a] = h.size
				}
			}
		}
	}})
	return out
}

// overtaking is what opened a hole near the receiver: the segments that
// arrived above it while it was open (one, or a burst sent ahead
// together), how many bytes it held, its pieces still open, and whether
// any piece came late (a loss, not a reordering).
type overtaking struct {
	above []int // indices into f.data
	open  int
	size  int64
	late  bool
}

// hole is an open piece of the sequence space below the highest data
// seen: since t, opened by by.
type hole struct {
	start, end int64
	t          time.Duration
	by         *overtaking
}

// holeVisits are what walkHoles calls: new for a segment above everything
// before it (once the open holes have counted it), below for one below
// the highest when no holes are kept, fill for the part of a hole a
// segment filled (late: soon or more after the hole showed), closed for a
// hole whose last piece was filled. Any may be nil.
type holeVisits struct {
	new    func(di int, d record, s, e int64)
	below  func(d record, s, e, high int64)
	fill   func(d record, s, e int64, h *hole, late bool)
	closed func(h *overtaking)
}

// walkHoles walks the data in capture order, keeping the holes in the
// sequence space when open (near the receiver: a segment above the
// highest leaves one below it), and tells v what each segment did.
func (f *flow) walkHoles(soon time.Duration, open bool, v holeVisits) {
	var holes []*hole
	var high int64
	for di, d := range f.data {
		s := f.off(d.seq)
		e := s + int64(d.payload)
		if e <= s {
			continue
		}
		if s >= high {
			// It arrived above every open hole: ahead of each (once per
			// hole, however many pieces it is in).
			for i, h := range holes {
				if !slices.ContainsFunc(holes[:i], func(o *hole) bool { return o.by == h.by }) {
					h.by.above = append(h.by.above, di)
				}
			}
			if s > high && open {
				holes = append(holes, &hole{start: high, end: s, t: d.t, by: &overtaking{above: []int{di}, open: 1, size: s - high}})
			}
			if v.new != nil {
				v.new(di, d, s, e)
			}
			high = e
			continue
		}
		if !open {
			if v.below != nil {
				v.below(d, s, e, high)
			}
			continue
		}
		for i, h := range holes {
			if s < h.start || s >= h.end {
				continue
			}
			late := d.t-h.t >= soon
			if late {
				h.by.late = true
			}
			if v.fill != nil {
				v.fill(d, s, e, h, late)
			}
			// The hole shrinks by what arrived.
			switch {
			case s <= h.start && e >= h.end:
				holes = append(holes[:i], holes[i+1:]...)
				h.by.open--
			case s <= h.start:
				h.start = e
			case e >= h.end:
				h.end = s
			default:
				holes = append(holes, &hole{start: e, end: h.end, t: h.t, by: h.by})
				h.by.open++
				h.end = s
			}
			if h.by.open == 0 && v.closed != nil {
				v.closed(h.by)
			}
			break
		}
	}
}

// msDur is v milliseconds.
func msDur(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func minSample(s []sample) time.Duration {
	m := time.Duration(-1)
	for _, x := range s {
		if m < 0 || x.v < m {
			m = x.v
		}
	}
	return m
}

// baseRTT is the propagation round trip: the two legs' minima added (each
// leg's minimum is its share of the path without queueing), or the
// handshake where the timestamps give no second leg (the analyzer's, of
// the same pass: the last SYN to its SYN-ACK, that to the ACK). where is
// the capture point (capturePoint).
func (f *flow) baseRTT(where string) Param {
	g1, g2 := msDur(f.conn.HandshakeServerMs), msDur(f.conn.HandshakeClientMs)
	hs, hsOK := g1+g2, f.conn.HandshakeRTTMs > 0
	switch {
	case f.kmin >= 0 && f.emin >= 0:
		f.base, f.baseSrc = f.kmin+f.emin, "legs"
		ev := fmt.Sprintf("lowest data-to-ACK time %s (of %d Karn samples) plus lowest ACK-to-data time %s (of %d timestamp echoes)",
			ms(f.kmin), len(f.karn), ms(f.emin), len(f.echo))
		if hsOK {
			ev += fmt.Sprintf("; the handshake took %s", ms(hs))
		}
		return f.rttParam(ev)
	case hsOK && hs > 0 && (f.kmin < 0 || where != "sender"):
		f.base, f.baseSrc = hs, "handshake"
		return f.rttParam(fmt.Sprintf("the handshake (SYN to SYN-ACK %s, SYN-ACK to ACK %s); no TCP timestamps to measure both legs of data", ms(g1), ms(g2)))
	case f.kmin >= 0:
		if where == "receiver" {
			return unknown("no timestamps and no handshake, and the capture was taken near the receiver: its data-to-ACK time is the receiver's delay, not the round trip")
		}
		f.base, f.baseSrc = f.kmin, "karn"
		return f.rttParam(fmt.Sprintf("lowest data-to-ACK time %s of %d Karn samples (no timestamps: the sender's own reaction time is taken as nil)", ms(f.kmin), len(f.karn)))
	}
	return unknown("no RTT sample: no handshake, no data acknowledged in the capture")
}

// baseSamples is how many samples the base round trip is the lowest of:
// the fewer leg's where two legs add up, one handshake.
func (f *flow) baseSamples() int {
	switch f.baseSrc {
	case "legs":
		return min(len(f.karn), len(f.echo))
	case "karn":
		return len(f.karn)
	}
	return 1
}

// jitteredMin widens a base round trip's interval for a jitter of j ms:
// the lowest of n samples of delays spread uniformly over 2j lies above
// their least by up to 2j (1 - 0.05^(1/n)) at 95 % (8 samples at 2 ms:
// up to 1.3 ms; 93 samples: 0.13 ms).
func jitteredMin(rtt Param, j float64, n int) Param {
	if !rtt.Known() || j <= 0 || n <= 0 {
		return rtt
	}
	up := 2 * j * (1 - math.Pow(0.05, 1/float64(n)))
	if rtt.Value-up < rtt.Low {
		rtt.Low = max(0, rtt.Value-up)
		rtt.Evidence += units.Sprintf("; the lowest of %d samples with %.3g ms of jitter lies up to %.3g ms above the delays' sum (95 %%)", n, j, up)
	}
	return rtt
}

func (f *flow) rttParam(ev string) Param {
	v := f.base.Seconds() * 1000
	// The base is a minimum: the path's fixed delay is at most that and
	// at least that less the hosts' processing (a few tens of µs) and the
	// capture's timestamp resolution.
	return known(v, v-max(0.05, v*0.005), v, ev)
}

// capturePoint is where the capture was taken for the data's direction:
// the analyzer's placement, from the same pass (analyzer.Direction's
// CapturedNear, from the capture point's round trips to each end). Where
// it cannot tell and had both round trips, the capture lies between the
// ends ("middle": a tap, or a LAN where the ends are a millisecond
// apart); where it had one leg only (no timestamps, no handshake), the
// ends' reactions place it, or nothing does.
func (f *flow) capturePoint() (where, ev string) {
	st := f.st
	ev = fmt.Sprintf("the analyzer's placement (from %s): the capture point %s from the receiver and back, %s from the sender",
		st.CapturedNearFrom, ms(msDur(st.CaptureToReceiverMs)), ms(msDur(st.CaptureToSenderMs)))
	switch {
	case st.CapturedNear == "sender" || st.CapturedNear == "receiver":
		return st.CapturedNear, ev
	case st.CapturedNearFrom == "data" || st.CapturedNearFrom == "handshake":
		return "middle", ev + ": neither end much nearer"
	}
	if where, rev := f.reactionPlacement(); where != "" {
		return where, rev
	}
	return "unknown", "neither timestamps, the handshake nor the ends' reactions place it"
}

// minReactions is how many ACKs with a reaction on both sides place a
// capture by the ends' reactions.
const minReactions = 50

// reactionPlacement places a capture without timestamps or a handshake
// by which end reacts at once, as the capture point sees it. Each ACK is
// timed from the data segment before it (the receiver's reaction: next to
// the receiver, its delay in answering data, tens of microseconds) and to
// the first new data after it, before the next ACK (the sender's: next to
// the sender, the ACK clock releasing data at once). Next to one end its
// reaction is a host's and the other's a spacing of the flow (about the
// ACKs' own spacing, a packet time or more at the bottleneck), so the
// medians differ by far: a quarter or less. Near the sender the ACK leg is
// then the whole round trip, well above the sender's reaction (ten times
// or more). Neither: "" (the middle, or a pacing sender, looks alike).
func (f *flow) reactionPlacement() (string, string) {
	var rx, tx []float64
	var high int64
	di := 0
	lastData := time.Duration(-1)
	var lastAck int64 = -1
	for k, a := range f.acks {
		ack := f.off(a.ack)
		if a.payload > 0 || ack <= lastAck || ack > 1<<40 {
			continue // data, or no new data acknowledged
		}
		lastAck = ack
		for di < len(f.data) && f.data[di].t <= a.t {
			if end := f.off(f.data[di].seq) + int64(f.data[di].payload); end > high {
				high, lastData = end, f.data[di].t
			}
			di++
		}
		if lastData < 0 {
			continue
		}
		next := time.Duration(math.MaxInt64)
		if k+1 < len(f.acks) {
			next = f.acks[k+1].t
		}
		h := high
		for j := di; j < len(f.data) && f.data[j].t < next; j++ {
			if end := f.off(f.data[j].seq) + int64(f.data[j].payload); end > h {
				rx = append(rx, float64(a.t-lastData))
				tx = append(tx, float64(f.data[j].t-a.t))
				break
			}
		}
	}
	if len(rx) < minReactions {
		return "", ""
	}
	r, s := time.Duration(quantile(sorted(rx), 0.5)), time.Duration(quantile(sorted(tx), 0.5))
	switch {
	case 4*s <= r && f.kmin >= 10*s:
		return "sender", fmt.Sprintf("no timestamps, no handshake: new data followed the ACKs in %s (median of %d), the ACKs the data before them in %s, and data took %s or more to its ACK: the sender's reaction, next to it",
			ms(s), len(tx), ms(r), ms(f.kmin))
	case 4*r <= s:
		return "receiver", fmt.Sprintf("no timestamps, no handshake: the ACKs followed the data before them in %s (median of %d), new data the ACKs in %s: the receiver's reaction, next to it",
			ms(r), len(rx), ms(s))
	}
	return "", ""
}

// queueing builds the bottleneck queue's delay over time from the leg
// that varies: each sample less its leg's minimum.
func (f *flow) queueing() {
	spread := func(s []sample, m time.Duration) time.Duration {
		if len(s) < 10 {
			return -1
		}
		vs := make([]float64, len(s))
		for i, x := range s {
			vs[i] = float64(x.v - m)
		}
		return time.Duration(quantile(sorted(vs), 0.9))
	}
	ks, es := spread(f.karn, f.kmin), spread(f.echo, f.emin)
	src, m, bySend := f.karn, f.kmin, true
	f.qLeg = "data to ACK"
	if es > ks {
		src, m, bySend = f.echo, f.emin, false
		f.qLeg = "ACK to data (timestamp echoes)"
		f.qTick = f.tsTick()
	}
	// The ACKs of loss recovery: those with SACK blocks and the one after
	// them (the cumulative ACK jumping over a filled hole). Their
	// data-to-ACK samples hold the recovery's wait.
	var recovery map[time.Duration]bool
	if bySend {
		recovery = map[time.Duration]bool{}
		prevSACK := false
		for _, a := range f.acks {
			if a.nsack > 0 || prevSACK {
				recovery[a.t] = true
			}
			prevSACK = a.nsack > 0
		}
	}
	for _, s := range src {
		f.queue = append(f.queue, sample{s.t, s.v - m})
		// The data-to-ACK leg's sample belongs to when its segment
		// left; the echo leg's to when its data came.
		at := s.t
		if bySend {
			if recovery[s.t] {
				continue
			}
			at = s.t - s.v
		}
		f.queueSent = append(f.queueSent, sample{at, s.v - m})
	}
	sort.Slice(f.queueSent, func(i, j int) bool { return f.queueSent[i].t < f.queueSent[j].t })
	f.theta = max(time.Millisecond, f.base/10)
	if len(f.queue) == 0 {
		return
	}
	vs := make([]float64, len(f.queue))
	for i, q := range f.queue {
		vs[i] = float64(q.v)
	}
	s := sorted(vs)
	f.qmax = time.Duration(quantile(s, 0.995)) // a lone outlier (a host's hiccup) is no buffer
	f.qp95 = time.Duration(quantile(s, 0.95))
	above := len(s) - sort.SearchFloat64s(s, float64(f.theta))
	f.qShare = float64(above) / float64(len(s))
	f.qRho = lag1(vs)
}

// smoothQueue is the lag-1 autocorrelation at which the RTT's rise moves
// as a queue's does (filling and draining), not as the hosts' spread.
const smoothQueue = 0.6

// lag1 is the lag-1 autocorrelation of xs: near 1 for a queue, which
// fills and drains smoothly; near 0 for a delay drawn anew per packet.
func lag1(xs []float64) float64 {
	mean, _ := meanStd(xs)
	var num, den float64
	for i := range xs {
		den += (xs[i] - mean) * (xs[i] - mean)
		if i > 0 {
			num += (xs[i] - mean) * (xs[i-1] - mean)
		}
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// queueAt is the queue delay nearest to t (-1: no sample within a round
// trip).
func (f *flow) queueAt(t time.Duration) time.Duration {
	i := sort.Search(len(f.queue), func(i int) bool { return f.queue[i].t >= t })
	best, bd := time.Duration(-1), time.Duration(math.MaxInt64)
	for _, j := range []int{i - 1, i} {
		if j < 0 || j >= len(f.queue) {
			continue
		}
		if d := absDur(f.queue[j].t - t); d < bd {
			best, bd = f.queue[j].v, d
		}
	}
	if bd > max(f.base, 10*time.Millisecond) {
		return -1
	}
	return best
}

// queueNear is the largest queue delay from a round trip before t to two
// after (what the segments sent around a loss met: a tail drop's
// neighbours show the queue at its peak), or the
// nearest within five (samples thin out around losses: Karn's rule gives
// none for retransmitted data and the ACKs recovery delays); -1: none.
func (f *flow) queueNear(t time.Duration) time.Duration {
	w := max(f.base, 5*time.Millisecond)
	lo := sort.Search(len(f.queue), func(i int) bool { return f.queue[i].t >= t-5*w })
	best, bd := time.Duration(-1), time.Duration(math.MaxInt64)
	var inRTT time.Duration = -1
	for i := lo; i < len(f.queue) && f.queue[i].t <= t+5*w; i++ {
		d := absDur(f.queue[i].t - t)
		if f.queue[i].t >= t-w && f.queue[i].t <= t+2*w {
			inRTT = max(inRTT, f.queue[i].v)
		}
		if d < bd {
			best, bd = f.queue[i].v, d
		}
	}
	if inRTT >= 0 {
		return inRTT
	}
	return best
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// delivered is the data the receiver has, by its ACKs: the cumulative ACK
// plus what its SACK blocks hold above it, in payload bytes, over time.
// Walked once per flow (the rate's measures, the burst's, the losses'
// and the deciles' all read it); again only if the ACKs changed.
func (f *flow) delivered() []sample {
	if f.del != nil && f.delAcks == len(f.acks) {
		return f.del
	}
	f.del, f.delAcks = f.walkDelivered(), len(f.acks)
	return f.del
}

func (f *flow) walkDelivered() []sample {
	out := make([]sample, 0, len(f.acks))
	var last int64 = -1
	for _, a := range f.acks {
		ack := f.off(a.ack)
		if ack < 0 || ack > 1<<40 {
			continue
		}
		d := ack
		for i := range min(a.nsack, 4) {
			l, r := f.off(a.sack[i].Left), f.off(a.sack[i].Right)
			if i == 0 && a.nsack > 1 && l >= f.off(a.sack[1].Left) && r <= f.off(a.sack[1].Right) {
				continue // a duplicate report inside the next block (D-SACK)
			}
			if l >= ack && r > l {
				d += r - l
			}
		}
		if d > last {
			out = append(out, sample{a.t, time.Duration(d)}) // v holds bytes here
			last = d
		}
	}
	return out
}

// rateReach is how many of bottleneckRate's intervals away from the
// nearest delivery (an ACK that moved what the receiver holds) an
// interval is still measured. Farther, the bottleneck delivered nothing
// for 8 intervals (80-400 ms) either way: a stall or a timeout, not its
// rate; only a path under about 300 kbit/s (a delayed ACK's two segments
// every 80 ms) spaces its ACKs so. It bounds the walk to 2 x rateReach + 1
// intervals a delivery, whatever the capture's span.
const rateReach = 8

// bottleneckRate measures the delivery rate over intervals of about a
// round trip during which a queue held at the bottleneck (the queue says
// the bottleneck was busy: it sent at its rate all along).
func (f *flow) bottleneckRate(where string) Param {
	del := f.delivered()
	if len(del) < 10 || f.base <= 0 {
		return unknown("too few ACKs to measure a delivery rate")
	}
	if f.qmax < f.theta || f.qShare < 0.2 || f.qRho < smoothQueue {
		peak := f.peakRate(del)
		if f.qmax >= f.theta && f.qShare >= 0.2 {
			f.rateWhy = fmt.Sprintf("the RTT rose %s and more in %.0f %% of the samples but not smoothly (lag-1 correlation %.2f): the hosts' spread (delayed ACKs, loss recovery), not a queue; the path carries at least %s",
				ms(f.theta), f.qShare*100, f.qRho, units.Rate(peak).Human())
			return unknown(f.rateWhy)
		}
		if f.qmax >= f.theta {
			f.rateWhy = fmt.Sprintf("a queue of %s or more held in only %.0f %% of the RTT samples (it peaked at %s): no sustained bottleneck; the path carries at least %s",
				ms(f.theta), f.qShare*100, ms(f.qmax), units.Rate(peak).Human())
			return unknown(f.rateWhy)
		}
		f.rateWhy = fmt.Sprintf("no queue built at any bottleneck (the RTT rose at most %s above its minimum): the path was never full; it carries at least %s",
			ms(f.qmax), units.Rate(peak).Human())
		return unknown(f.rateWhy)
	}
	T := min(max(f.base/2, 10*time.Millisecond), 50*time.Millisecond)
	var rates []float64
	j := 0
	start := del[0].t
	busyAt := func(t time.Duration) bool { q := f.queueAt(t); return q >= f.theta }
	// ACKs with SACK blocks: loss recovery, when the cumulative ACK and
	// the few blocks an ACK carries undercount what the receiver holds.
	var sackT []time.Duration
	for _, a := range f.acks {
		if a.nsack > 0 {
			sackT = append(sackT, a.t)
		}
	}
	recovering := func(a, b time.Duration) bool {
		i := sort.Search(len(sackT), func(i int) bool { return sackT[i] >= a })
		return i < len(sackT) && sackT[i] <= b
	}
	// Intervals farther than rateReach intervals from every delivery are
	// stepped over in one jump: the walk costs what the ACKs do, not the
	// time the capture spans (250 packets over years took 4.3 GB).
	reach := rateReach * T
	k := 0 // the first delivery at or after t
	for t := start; t+T <= del[len(del)-1].t; t += T {
		for k < len(del) && del[k].t < t {
			k++
		}
		if (k == 0 || t-del[k-1].t > reach) && del[k].t-(t+T) > reach {
			// The first step within reach of del[k], less one (the
			// loop adds it).
			t = start + (del[k].t-reach-T-start+T-1)/T*T - T
			continue
		}
		// Busy all along: a queue at the start, the middle and the end,
		// and no loss recovery.
		if !busyAt(t) || !busyAt(t+T/2) || !busyAt(t+T) || recovering(t, t+T) {
			continue
		}
		a, b := at(del, t, &j), at(del, t+T, &j)
		r := float64(b-a) * 8 * f.ipFact / T.Seconds()
		rates = append(rates, r)
	}
	if len(rates) < 3 {
		return unknown(fmt.Sprintf("the queue held for only %d intervals of %s: too short to measure its rate", len(rates), ms(T)))
	}
	// The mean of the intervals' middle 80 %: a bottleneck sends at its
	// rate while busy; an interval the capture's host spent elsewhere (a
	// stalled CPU delays ACKs, then releases them together) is an outlier
	// either way. Not the median: an interval holds a whole number of
	// ACKs, each two packets, and the median of such counts is off by up
	// to one ACK's bytes (-4 % at 10 Mbit/s and 10 ms, where an interval
	// holds 8 or 9). Its 95 % interval is the median's by order
	// statistics, widened by 1 % for the header model.
	s := sorted(rates)
	_, lo, hi := medianInterval(s)
	rate := trimmedMean(s, 0.1)
	if rate <= 0 || (hi-lo)/2 > 0.2*rate {
		return unknown(fmt.Sprintf("the delivery rate while a queue held was not steady (mean of the middle 80 %% %s, 95 %% interval %s-%s over %d intervals): no fixed bottleneck rate",
			units.Rate(rate).Human(), units.Rate(lo).Human(), units.Rate(hi).Human(), len(rates)))
	}
	// A bottleneck with a queue sends at its rate: the intervals agree
	// with one another, not only their median with itself. The middle
	// half of them within 15 % of that mean and two packets an interval
	// (the ACK clock's grain). A host that was not scheduled holds its
	// ACKs (or its data) and the RTT rises with no link busy: the
	// intervals then range from nothing to a burst of catch-up.
	// The grain is also a millisecond at the rate: the capture's host
	// takes ACKs in as it is scheduled, and a millisecond's moves between
	// intervals (at 1 Gbit/s a tenth of 10 ms; the grid's 1 Gbit/s bucket
	// at a BDP, seen from the server, had its middle half 798-1070 Mbit/s
	// over 11 intervals, and 877-1080 over 42).
	p25, p75 := quantile(s, 0.25), quantile(s, 0.75)
	grain := max(2*float64(f.mss)*f.ipFact*8, rate*0.001) / T.Seconds()
	if p75-p25 > 0.15*rate+grain {
		f.rateWhy = fmt.Sprintf("the RTT rose %s and more (in %.0f %% of the samples) but the delivery rate while it held was no one rate (over %d intervals of %s: mean of the middle 80 %% %s, middle half %s-%s, more than 15 %% and two packets an interval apart): a bottleneck's queue paces the ACKs, the hosts' scheduling delays them; the path carries at least %s",
			ms(f.theta), f.qShare*100, len(rates), ms(T), units.Rate(rate).Human(), units.Rate(p25).Human(), units.Rate(p75).Human(), units.Rate(f.peakRate(del)).Human())
		return unknown(f.rateWhy)
	}
	// Nor a tenth of them far below their mean: a bottleneck busy all along
	// delivers its rate each interval, to the ACK clock's grain (the
	// grid's claims: their 10th percentile 2-33 % under the rate); a
	// host stalled under load delays the ACKs, the RTT rises with the
	// link idle, and such intervals deliver a fraction of it (a tenth
	// under 24 Mbit/s behind 100 Mbit/s, the mean 93.5).
	if p10 := quantile(s, 0.1); p10 < 0.6*rate-grain {
		f.rateWhy = fmt.Sprintf("the RTT rose %s and more (in %.0f %% of the samples) but a tenth of the %d intervals of %s while it held delivered under %s, far below their mean of the middle 80 %% (%s): the queue's samples held while the link idled (a host's stall delays the ACKs); the path carries at least %s",
			ms(f.theta), f.qShare*100, len(rates), ms(T), units.Rate(p10).Human(), units.Rate(rate).Human(), units.Rate(f.peakRate(del)).Human())
		return unknown(f.rateWhy)
	}
	// Near the sender the data in flight is known: a bottleneck's queue
	// is the flight beyond what the path holds, so its delay grows with
	// the flight (a correlation of 0.39-0.67 in the lab's token buckets,
	// loaded or not); a host's scheduling delay does not (-0.14-0.20).
	if where == "sender" {
		if r, n := f.queueFollowsFlight(); n >= 100 && r < 0.3 {
			f.rateWhy = fmt.Sprintf("the RTT rose %s and more (in %.0f %% of the samples) but not with the data in flight (correlation %.2f over %d segments; a bottleneck's queue is the flight beyond the path's own, 0.3 or more): the hosts' scheduling, not a queue; the path carries at least %s",
				ms(f.theta), f.qShare*100, r, n, units.Rate(f.peakRate(del)).Human())
			return unknown(f.rateWhy)
		}
	}
	// A claim is a rate within 5 %: an interval wider than that either
	// way is too few intervals, or too varied, to claim (the grid,
	// 2026-12-03 14:19: 18 intervals at 10 ms, 1 Gbit/s gave 929 Mbit/s,
	// 846-1002; the claims within 5 % were 1.0-2.9 % either way).
	if (hi-lo)/2 > 0.05*rate {
		f.rateWhy = fmt.Sprintf("the delivery rate while a queue of %s or more held was %s over %d intervals of %s, but its 95 %% interval %s-%s is more than 5 %% either way (p10-p90 %s-%s): too few or too varied to claim; the path carries at least %s",
			ms(f.theta), units.Rate(rate).Human(), len(rates), ms(T), units.Rate(lo).Human(), units.Rate(hi).Human(),
			units.Rate(quantile(s, 0.1)).Human(), units.Rate(quantile(s, 0.9)).Human(), units.Rate(f.peakRate(del)).Human())
		return unknown(f.rateWhy)
	}
	f.rate = rate
	f.rateLo, f.rateHi = min(lo, rate*0.99), max(hi, rate*1.01)
	return withSamples(known(f.rate, f.rateLo, f.rateHi, fmt.Sprintf(
		"ACK clocking over %d intervals of %s while a queue of %s or more held and no loss was being recovered: mean of the middle 80 %% %s (p10-p90 %s-%s), in IP bytes",
		len(rates), ms(T), ms(f.theta), units.Rate(f.rate).Human(),
		units.Rate(quantile(s, 0.1)).Human(), units.Rate(quantile(s, 0.9)).Human())), len(rates))
}

// queueFollowsFlight is the rank correlation (Spearman's) between each
// Karn sample's RTT and the data in flight when its segment left (near
// the sender, where the capture knows the flight), and how many samples
// it is over. Ranks, not values: slow start's overshoot counts the
// segments a full buffer dropped as in flight until the sender learns of
// them (twice the flight at the base RTT), and a few such samples would
// outweigh a transfer's worth of queue that grew with the flight.
func (f *flow) queueFollowsFlight() (float64, int) {
	var xs, ys []float64
	for _, k := range f.karn {
		sent := k.t - k.v
		i := sort.Search(len(f.data), func(i int) bool { return f.data[i].t > sent }) - 1
		if i < 0 || f.data[i].inflight < 0 {
			continue
		}
		xs = append(xs, float64(f.data[i].inflight))
		ys = append(ys, float64(k.v))
	}
	if len(xs) < 3 {
		return 0, len(xs)
	}
	return pearson(ranks(xs), ranks(ys)), len(xs)
}

// rateAtLosses finds a bottleneck from the loss episodes when no queue
// showed one (a buffer of a fraction of the bandwidth-delay product holds
// too little delay to see): an overflow happens with the link full, so the
// delivery rate in the round trip before each episode is the link's rate,
// the same every time; random losses come at whatever rate the sender had.
// With five episodes or more whose rates agree within 10 % (coefficient of
// variation), the runs are a bottleneck's drops. The rate itself is not
// claimed: without a sustained queue nothing shows the link was saturated
// over the steady part (the rate before drops may be a sender or a host
// falling short of it), so it is "at least" their median. The runs of one
// episode (slow start's overshoot) count once.
func (f *flow) rateAtLosses(runs []lossRun) (Param, bool) {
	if f.rate > 0 || len(runs) < 5 || f.base <= 0 {
		return Param{}, false
	}
	del := f.delivered()
	if len(del) < 10 {
		return Param{}, false
	}
	sorted_ := append([]lossRun(nil), runs...)
	sort.Slice(sorted_, func(i, j int) bool { return sorted_[i].t < sorted_[j].t })
	T := max(f.base, 10*time.Millisecond)
	var rates []float64
	j := 0
	for _, e := range episodesOf(f, sorted_) {
		t := e.t
		if t-T < del[0].t {
			continue
		}
		a, b := at(del, t-T, &j), at(del, t, &j)
		rates = append(rates, float64(b-a)*8*f.ipFact/T.Seconds())
	}
	if len(rates) < 5 {
		return Param{}, false
	}
	mean, sd := meanStd(rates)
	if mean <= 0 || sd/mean > 0.10 {
		return Param{}, false
	}
	med := quantile(sorted(rates), 0.5)
	return unknown(fmt.Sprintf(
		"the delivery rate in the round trip before each of %d loss episodes was the same, %s (coefficient of variation %.1f %%): a full link overflowing, but no sustained queue showed it saturated; the path carries at least %s",
		len(rates), units.Rate(med).Human(), sd/mean*100, units.Rate(med).Human())), true
}

// at is the delivered bytes at time t (the latest sample at or before
// t); j carries the search position forward.
func at(del []sample, t time.Duration, j *int) int64 {
	for *j+1 < len(del) && del[*j+1].t <= t {
		*j++
	}
	for *j > 0 && del[*j].t > t {
		*j--
	}
	return int64(del[*j].v)
}

// peakRate is the best delivery rate over any stretch of four round
// trips (100 ms at least; one round trip in a shorter transfer): what
// the path carried, which ACKs a stalled host released together would
// overstate over a single round trip.
func (f *flow) peakRate(del []sample) float64 {
	T := max(4*f.base, 100*time.Millisecond)
	if len(del) == 0 || del[len(del)-1].t-del[0].t < 2*T {
		T = max(f.base, 10*time.Millisecond)
	}
	best := 0.0
	j := 0
	for i := range del {
		t := del[i].t
		if t+T > del[len(del)-1].t {
			break
		}
		r := float64(at(del, t+T, &j)-int64(del[i].v)) * 8 * f.ipFact / T.Seconds()
		best = max(best, r)
	}
	return best
}

// burst measures the most the receiver got above the rate line within
// any short stretch (a quarter of a round trip, 2-10 ms) before the first
// loss: a token bucket passes its burst at
// line rate on top of its rate, a fixed link at most a packet or two. The
// rate line is the one measured, whose error (its interval) is allowed
// for.
func (f *flow) burst(firstLoss time.Duration, where string) (Param, string) {
	if f.rate <= 0 {
		return unknown("no bottleneck rate to compare the start with"), ""
	}
	// Only before the first loss: recovery releases what the receiver
	// held out of order in one cumulative ACK, which is no burst.
	del := f.delivered()
	// The first ACK with SACK blocks (or a duplicate) is the receiver's
	// first word of a loss.
	for _, a := range f.acks {
		if a.nsack > 0 && (firstLoss == 0 || a.t < firstLoss) {
			firstLoss = a.t
			break
		}
	}
	for i, d := range del {
		if firstLoss > 0 && d.t >= firstLoss {
			del = del[:i]
			break
		}
	}
	// Away from the receiver, ACKs bunch on their way back (ACK
	// compression): time them by the receiver's own clock, its TSval, when
	// the ACKs carry one (the ACK leg is then the receiver's, not the
	// path's).
	if where != "receiver" {
		if d, ok := f.deliveredByTSval(del); ok {
			del = d
		}
	}
	if len(del) < 10 {
		return unknown("too few ACKs"), ""
	}
	// A bucket empties at line rate, within a millisecond or two; a
	// longer window would take a host's stall and catch-up for a burst.
	W := min(max(f.base/4, 2*time.Millisecond), 10*time.Millisecond)
	R := f.rate / 8 // bytes/s
	g := func(i int) float64 { return float64(del[i].v)*f.ipFact - R*del[i].t.Seconds() }
	// For each sample, the largest g(now) - g(then) with then within W
	// before: a sliding-window minimum of g.
	var dq []int
	excess := 0.0
	for i := range del {
		for len(dq) > 0 && del[dq[0]].t < del[i].t-W {
			dq = dq[1:]
		}
		if len(dq) > 0 {
			excess = max(excess, g(i)-g(dq[0]))
		}
		for len(dq) > 0 && g(dq[len(dq)-1]) >= g(i) {
			dq = dq[:len(dq)-1]
		}
		dq = append(dq, i)
	}
	pkt := float64(f.mss) * f.ipFact
	slack := (f.rateHi - f.rate) / 8 * W.Seconds() // what the rate's error lets through a window
	if excess < 4*pkt+2*slack {
		return unknown(fmt.Sprintf("no burst above the rate (at most %.0f bytes within %s, under 4 packets and the rate's error): a fixed-rate link", excess, ms(W))), "fixed link"
	}
	return known(excess, excess-2*pkt-slack, excess+2*pkt+slack, fmt.Sprintf(
		"the receiver got up to %.0f bytes more than the rate allows within %s (a token bucket's burst at line rate)", excess, ms(W))), "token bucket"
}

// deliveredByTSval retimes delivered samples by the TSval of the ACK that
// gave each (the first ACK of each delivered count), on a clock whose rate
// is measured against the capture's (Linux ticks at 1 kHz).
func (f *flow) deliveredByTSval(del []sample) ([]sample, bool) {
	var ts []uint32
	var ct []time.Duration
	j := 0
	out := make([]sample, 0, len(del))
	for _, a := range f.acks {
		if j >= len(del) {
			break
		}
		if a.t == del[j].t && a.hasTS {
			ts = append(ts, a.tsval)
			ct = append(ct, a.t)
			j++
		}
	}
	if len(ts) < 10 || len(ts) != len(del) {
		return nil, false
	}
	span := float64(ts[len(ts)-1] - ts[0])
	dt := (ct[len(ct)-1] - ct[0]).Seconds()
	if span <= 0 || dt <= 0 {
		return nil, false
	}
	hz := span / dt
	for i := range del {
		out = append(out, sample{t: ct[0] + time.Duration(float64(ts[i]-ts[0])/hz*1e9), v: del[i].v})
	}
	// One tick of the receiver's clock spreads a burst: never more than
	// the window allows.
	return out, hz >= 100
}

// overflowSpread is how far apart the overflows' levels may lie, from
// quartile to quartile, for one buffer to explain them.
const overflowSpread = 2

// bufferSize is the bottleneck's queue capacity: the largest queueing
// delay times the rate, known when the queue overflowed (tail drops).
func (f *flow) bufferSize(tailDrops int, drops []lossRun) Param {
	if f.rate <= 0 {
		return unknown("no bottleneck rate: the buffer cannot be sized")
	}
	// A queue at the bottleneck drains at its rate: where the path never
	// carried half of it (a rate from the packets' spacing alone), the
	// delays the data met were not that queue's alone (a host that could
	// not keep up held them too: 12 ms before the drops behind 1 Gbit/s
	// and a 2.4 ms buffer, the path at 481 Mbit/s at its best).
	if del := f.delivered(); len(del) > 0 {
		if peak := f.peakRate(del); peak > 0 && peak < f.rate/2 {
			return unknown(fmt.Sprintf("the path carried at most %s over a few round trips, under half the bottleneck's %s: the queueing delays were not its queue's alone, and the buffer cannot be sized from them",
				units.Rate(peak).Human(), units.Rate(f.rate).Human()))
		}
	}

	b := f.qmax.Seconds() * f.rate / 8
	lo := f.qp95.Seconds() * f.rateLo / 8
	hi := f.qmax.Seconds() * f.rateHi / 8 * 1.1
	// The queue when it overflowed: what the data sent just before each
	// overflow met. An overflow drops runs a few packet times apart
	// (slow start's overshoot, a burst at the top of the sawtooth): the
	// runs within a quarter of a round trip of each other are one, and
	// its level the highest they met, as the samples before its later
	// runs are of data sent before the first, or, where samples are
	// sparse (the receiver's timestamps tick once a millisecond), of the
	// burst before, which met the queue lower. Only samples of data sent
	// within a quarter of a round trip of the run. The median over the
	// overflows, which a stalled host's extra delay moves less than the
	// largest delay.
	fresh := max(f.base/4, 2*time.Millisecond)
	var vs []float64
	what := "overflows (the highest of each one's drop runs)"
	for i := 0; i < len(drops); {
		j, q := i, time.Duration(-1)
		for ; j < len(drops) && drops[j].t-drops[max(j-1, i)].t <= fresh; j++ {
			if drops[j].beforeAge <= fresh {
				q = max(q, drops[j].before)
			}
		}
		if q >= 0 {
			vs = append(vs, q.Seconds())
		}
		i = j
	}
	// Too few overflows: the drop runs, those with a sample of data
	// sent a quarter of a round trip or less before them, else all.
	stale := false
	for _, age := range []time.Duration{fresh, math.MaxInt64} {
		if len(vs) >= 3 {
			break
		}
		vs, what = vs[:0], "drop runs"
		stale = age > fresh
		for _, r := range drops {
			if r.before >= 0 && r.beforeAge <= age {
				vs = append(vs, r.before.Seconds())
			}
		}
	}
	if len(vs) >= 3 {
		// Times the rate, and two packets: the segment the last sample
		// times is one or two before the lost one (an ACK covers two),
		// and the lost one met the buffer less at most its own size.
		s := sorted(vs)
		pkt := 2 * float64(f.mss) * f.ipFact
		// A full buffer is a level the queue reached the rest of the
		// time too (0.8 of it in 2 % of the samples or more, as the
		// sawtooth's tops do); an overflow timed above what the queue
		// otherwise reached met a stalled host's wait, where another's
		// level is one. Those go; too few left: a range.
		if kept, gone := f.reachedLevels(s); gone > 0 && len(kept) < 3 {
			lo, hi := s[0]*f.rateLo/8+pkt, s[len(s)-1]*f.rateHi/8+pkt
			return Param{Value: lo, Low: lo, High: hi, Unknown: fmt.Sprintf(
				"the data sent before the queue overflowed met %s-%s (%d %s; %s), and %d of them more than the queue reached otherwise (0.8 of it in 2 %% of the samples): a stall on the path; the buffer is between %s and %s",
				ms(time.Duration(s[0]*1e9)), ms(time.Duration(s[len(s)-1]*1e9)), len(s), what, f.qLeg, gone, units.Size(lo).Human(), units.Size(hi).Human())}
		} else if gone > 0 {
			s = kept
		}
		q := quantile(s, 0.5)
		// Timed only by samples of data sent more than a quarter of a
		// round trip before the drops: a queue filling (slow start's
		// overshoot fills it within a round trip) rose since, and the
		// level is what the buffer holds at the least (near the
		// receiver, 105 ms sampled 99 ms before the drops, where the
		// sender's side saw 201 ms).
		if stale {
			lo := q*f.rateLo/8 + pkt
			return Param{Value: lo, Low: lo, Unknown: fmt.Sprintf(
				"the data sent before the queue overflowed met %s (median over %d %s; %s), but the samples were of data sent more than %s before the drops, and a filling queue rose since: the buffer is at least %s",
				ms(time.Duration(q*1e9)), len(s), what, f.qLeg, ms(fresh), units.Size(lo).Human())}
		}
		// A full buffer holds what the queue held at its top the rest of
		// the time: overflows that met half as much again as the
		// queue's 99.5th percentile met something more, a host that
		// stalled the path (its backlog overflowed the buffer, and the
		// stall's wait is in the data's delay), or a queue that filled
		// to the buffer only at the overflows. Which one the capture
		// cannot tell: the buffer lies between the two. (Not the other
		// way: a stall's samples lift the percentile, the overflows'
		// median less.)
		// An overflow happens at the queue's top: runs that met less
		// than 0.8 of what the queue held a twentieth of the time were
		// timed by samples that missed it (the receiver's timestamps
		// tick once a millisecond; slow start fills a small buffer
		// between two ticks). The buffer is at least that 95th
		// percentile.
		// Timed by the receiver's timestamps, a level is known to a
		// tick of its clock (Linux: 1 ms): four ticks or more for 25 %.
		if tick := f.qTick.Seconds(); q < 4*tick {
			lo, hi := max(q-tick, 0)*f.rateLo/8+pkt, (q+tick)*f.rateHi/8+pkt
			return Param{Value: q*f.rate/8 + pkt, Low: lo, High: hi, Unknown: fmt.Sprintf(
				"the data sent before the queue overflowed met %s (median over %d %s; %s), under four ticks of the receiver's timestamp clock (%s each): the buffer is between %s and %s",
				ms(time.Duration(q*1e9)), len(s), what, f.qLeg, ms(f.qTick), units.Size(lo).Human(), units.Size(hi).Human())}
		}
		if p95 := f.qp95.Seconds(); q < 0.8*p95 {
			lo, hi := p95*f.rateLo/8+pkt, max(f.qmax.Seconds(), p95)*f.rateHi/8+pkt
			return Param{Value: lo, Low: lo, High: hi, Unknown: fmt.Sprintf(
				"the data sent before the queue overflowed met %s (median over %d %s; %s), under the %s the queue held a twentieth of the time: the samples missed its top; the buffer is between %s and %s",
				ms(time.Duration(q*1e9)), len(s), what, f.qLeg, ms(f.qp95), units.Size(lo).Human(), units.Size(hi).Human())}
		}
		if top := f.qmax.Seconds(); top > 0 && q > 1.5*top {
			lo, hi := top*f.rateLo/8+pkt, q*f.rateHi/8+pkt
			return Param{Value: lo, Low: lo, High: hi, Unknown: fmt.Sprintf(
				"the queue overflowed at %s (median over %d %s; %s) but held %s at most otherwise (99.5th percentile of %d samples): a stall on the path or a queue that filled only then; the buffer is between %s and %s",
				ms(time.Duration(q*1e9)), len(s), what, f.qLeg, ms(f.qmax), len(f.queue), units.Size(lo).Human(), units.Size(hi).Human())}
		}
		// One buffer's overflows meet one level (the grid's, within 1.5
		// times from quartile to quartile); levels twice apart or more
		// are a stalled host's wait added to some (11.2 ms for the 2.6
		// ms a 31 KiB buffer holds at 96 Mbit/s, with a core busy).
		if q25, q75 := quantile(s, 0.25), quantile(s, 0.75); what != "drop runs" && q75 > overflowSpread*q25 {
			lo, hi := s[0]*f.rateLo/8+pkt, s[len(s)-1]*f.rateHi/8+pkt
			return Param{Value: lo, Low: lo, High: hi, Unknown: fmt.Sprintf(
				"the data sent before the queue overflowed met levels far apart (interquartile %s-%s over %d %s; %s): one buffer's overflows meet one, a stalled host's wait adds to some; the buffer is between %s and %s",
				ms(time.Duration(q25*1e9)), ms(time.Duration(q75*1e9)), len(s), what, f.qLeg, units.Size(lo).Human(), units.Size(hi).Human())}
		}
		return known(q*f.rate/8+pkt, quantile(s, 0.25)*f.rateLo/8+pkt, quantile(s, 0.75)*f.rateHi/8+pkt, fmt.Sprintf(
			"the queueing delay the data sent just before the queue overflowed met, %s (median over %d %s; %s, interquartile %s-%s), times the rate, and two packets",
			ms(time.Duration(q*1e9)), len(s), what, f.qLeg, ms(time.Duration(quantile(s, 0.25)*1e9)), ms(time.Duration(quantile(s, 0.75)*1e9))))
	}
	if tailDrops == 0 {
		return Param{Unknown: fmt.Sprintf("the queue reached %s (%s at the rate) and never overflowed: the buffer is at least that", ms(f.qmax), units.Size(b).Human()),
			Value: b, Low: b}
	}
	// Fewer than three overflows timed: the queue's top is the buffer
	// when it held there, its 95th percentile near its 99.5th (a buffer
	// the sawtooth fills each round); a top far above what the queue
	// held otherwise is a stall's wait, which a short queue's few
	// samples do not outweigh (12.4 ms for the 2.5 ms a quarter of the
	// bandwidth-delay product holds at 100 Mbit/s, its 95th percentile
	// 1.5 ms).
	if lo < 0.75*b {
		return Param{Value: lo, Low: lo, High: hi, Unknown: fmt.Sprintf(
			"the queue peaked at %s (%s, 99.5th percentile of %d samples) but held %s a twentieth of the time, and fewer than three overflows were timed (%d segments dropped at a full queue): a stall's wait or a queue that filled only then; the buffer is between %s and %s",
			ms(f.qmax), f.qLeg, len(f.queue), ms(f.qp95), tailDrops, units.Size(lo).Human(), units.Size(hi).Human())}
	}
	return known(b, lo, hi, fmt.Sprintf("the largest queueing delay %s (%s, 99.5th percentile of %d samples) times the rate; %d drops at a full queue",
		ms(f.qmax), f.qLeg, len(f.queue), tailDrops))
}

// reachedLevels are the overflow levels (seconds, sorted) the queue
// reached at 0.8 of them or more in 2 % of its samples, and how many went,
// when one level at least was so reached (else all stay: a queue that
// filled only at its overflows).
func (f *flow) reachedLevels(levels []float64) ([]float64, int) {
	if len(f.queue) == 0 {
		return levels, 0
	}
	qs := make([]float64, len(f.queue))
	for i, x := range f.queue {
		qs[i] = x.v.Seconds()
	}
	slices.Sort(qs)
	var kept []float64
	for _, v := range levels {
		above := len(qs) - sort.SearchFloat64s(qs, 0.8*v)
		if float64(above) >= 0.02*float64(len(qs)) {
			kept = append(kept, v)
		}
	}
	if len(kept) == 0 {
		return levels, 0
	}
	return kept, len(levels) - len(kept)
}

// lossRun is a run of consecutive segments lost together.
type lossRun struct {
	t     time.Duration // when the run's first segment was sent (or was due)
	segs  int
	full  bool          // the bottleneck queue was near full
	queue time.Duration // the queue delay near it (-1: unknown)
	// before is the queue the data sent just before it met (-1: unknown):
	// at a tail drop, the full buffer.
	before time.Duration
	// beforeAge is how long before the run that data was sent.
	beforeAge time.Duration
	// line says the run was a delay line's overflow (full too): no
	// bottleneck queue's, so it does not size the buffer.
	line bool
}

// queueBefore is the queue that the data sent last before t met (within
// half a round trip, 5 ms or more; -1: none): at a tail drop the segments
// just before the lost one met the buffer full, less the packet or two
// between them (an ACK covers two). Not the samples after it: the ACKs of
// data sent after a loss wait for its recovery (the cumulative ACK jumps
// when the hole is filled), and hold that wait, not a queue; nor a median
// over a longer stretch, which slow start's queue, filled within a round
// trip, would put below the buffer.
func (f *flow) queueBefore(t time.Duration) (q, age time.Duration) {
	i := sort.Search(len(f.queueSent), func(i int) bool { return f.queueSent[i].t >= t }) - 1
	if i < 0 || f.queueSent[i].t < t-max(f.base/2, 5*time.Millisecond) {
		return -1, -1
	}
	return f.queueSent[i].v, t - f.queueSent[i].t
}

// lostSpan is a lost send: its sequence range, when it left (or was due)
// and, near the sender, when its re-send left.
type lostSpan struct {
	start, end int64
	t          time.Duration
	rt         time.Duration
}

// walked is the capture's losses before any is classed: the lost sends
// in sequence order, the segments sent, and for each segment that
// arrived ahead of others how many it overtook. None of it depends on
// the bottleneck's rate: the jitter asks for it before the rate is
// measured, the loss fit after; the walk is made once.
type walked struct {
	where     string
	lost      []lostSpan
	sent      int
	reordered []float64
}

// walkLosses walks the capture's holes and re-sends once (per capture
// point) for losses.
func (f *flow) walkLosses(where string) *walked {
	if f.walked != nil && f.walked.where == where {
		return f.walked
	}
	segs := f.segsIn
	var sent int
	var reordered []float64
	// First transmissions in sequence order (they are sent in it), to find
	// when the segment holding a re-sent byte first left.
	var firstStart []int64
	var firstTime []time.Duration
	sentAt := func(s int64) time.Duration {
		i := sort.Search(len(firstStart), func(i int) bool { return firstStart[i] > s }) - 1
		if i < 0 {
			return 0
		}
		return firstTime[i]
	}
	var lost []lostSpan
	resent := 0 // segments sent again (near the sender)
	// A hole filled sooner than a round trip after it showed was no loss:
	// a retransmission comes a round trip after the receiver's word of
	// the hole at the earliest, segments overtaken (netem's reorder sends
	// one ahead of its delay line, half a round trip or less) sooner.
	// Three quarters of the lowest round trip between them.
	soon := max(f.base*3/4, time.Millisecond)
	counted := map[int]bool{} // segments already counted as reordered
	f.walkHoles(soon, where != "sender", holeVisits{
		new: func(_ int, d record, s, e int64) {
			sent += segs(e - s)
			firstStart, firstTime = append(firstStart, s), append(firstTime, d.t)
		},
		// Near the sender: each re-send says the send before it was
		// lost (a lost retransmission is a loss too, and a further
		// trial).
		below: func(d record, s, e, high int64) {
			if d.aflags&analyzer.SpuriousRetransmission == 0 {
				lost = append(lost, lostSpan{start: s, end: min(e, high), t: sentAt(s), rt: d.t})
				resent += segs(min(e, high) - s)
			}
		},
		// Near the receiver: this fills (part of) a hole.
		fill: func(_ record, s, e int64, h *hole, late bool) {
			if late {
				lost = append(lost, lostSpan{start: s, end: min(e, h.end), t: h.t})
			} else {
				sent += segs(min(e, h.end) - s)
			}
		},
		// A hole filled all soon, with less data above it than it held,
		// was segments overtaken: each segment that arrived above it went
		// ahead of as many as it held (netem's reorder sends a packet
		// ahead of its delay line).
		closed: func(h *overtaking) {
			if h.late || !f.fewerAhead(h.above, h.size) {
				return
			}
			for _, a := range h.above {
				if !counted[a] { // ahead of several holes: once, the first
					counted[a] = true
					reordered = append(reordered, float64(h.size)/float64(f.mss))
				}
			}
		},
	})
	if where == "sender" {
		// A re-send the receiver reports as a duplicate (a D-SACK) was
		// spurious: the send before it arrived (an RTO or a loss probe
		// that came before a late ACK). Each D-SACK takes back the latest
		// re-send of its range before it.
		for _, ds := range f.dsacks() {
			best := -1
			for i, l := range lost {
				if l.rt <= ds.t && l.start < ds.end && l.end > ds.start && (best < 0 || l.rt > lost[best].rt) {
					best = i
				}
			}
			if best >= 0 {
				resent -= segs(lost[best].end - lost[best].start)
				lost = append(lost[:best], lost[best+1:]...)
			}
		}
	}
	if where != "sender" {
		// Lost segments never arrived first: they count among those sent.
		for _, l := range lost {
			sent += segs(l.end - l.start)
		}
	}
	sort.Slice(lost, func(i, j int) bool { return lost[i].start < lost[j].start })
	if where == "sender" {
		sent += resent
	}
	f.walked = &walked{where: where, lost: lost, sent: sent, reordered: reordered}
	return f.walked
}

// losses finds the path's losses: near the sender the sequence space it
// sent again (spurious retransmissions, of data already acknowledged, left
// out), near the receiver the holes in the sequence space that data filled
// three quarters of a round trip or more later (a hole filled sooner was a
// reordering: a retransmission takes at least a round trip). It returns the runs of
// consecutive lost segments, how many segments were sent, and for each
// segment that arrived ahead of others (reordered) how many it overtook.
func (f *flow) losses(where string) (runs []lossRun, sent int, reordered []float64) {
	w := f.walkLosses(where)
	lost, sent := w.lost, w.sent
	segs := f.segsIn
	// The queue a run met: near the sender it shows in the RTT of the
	// ACKs a round trip later.
	queueFor := func(t time.Duration) time.Duration {
		if where == "sender" {
			t += f.base
		}
		return f.queueNear(t)
	}
	for i := 0; i < len(lost); {
		j := i + 1
		end := lost[i].end
		n := segs(lost[i].end - lost[i].start)
		for j < len(lost) && lost[j].start <= end {
			if lost[j].end > end {
				n += segs(lost[j].end - end)
				end = lost[j].end
			}
			j++
		}
		// Near the sender a run's segments are its sends lost, re-sends
		// that were lost again included.
		if where == "sender" {
			n = 0
			for k := i; k < j; k++ {
				n += segs(lost[k].end - lost[k].start)
			}
		}
		r := lossRun{t: lost[i].t, segs: n, queue: queueFor(lost[i].t)}
		r.before, r.beforeAge = f.queueBefore(r.t)
		runs = append(runs, r)
		i = j
	}
	f.smoothQueueDrops(runs, queueFor)
	sort.Slice(runs, func(i, j int) bool { return runs[i].t < runs[j].t })
	f.clusteredDrops(runs, sent, queueFor)
	f.longRunDrops(runs, where)
	// An overflow drops a burst of segments within a round trip or two:
	// runs that near a tail drop belong to its episode, whatever queue
	// the samples around them show.
	for changed := true; changed; {
		changed = false
		for i := range runs {
			if runs[i].full {
				continue
			}
			for _, j := range []int{i - 1, i + 1} {
				if j >= 0 && j < len(runs) && runs[j].full && absDur(runs[j].t-runs[i].t) <= 2*f.base {
					runs[i].full, runs[i].queue, changed = true, runs[j].queue, true
					break
				}
			}
		}
	}
	return runs, sent, w.reordered
}

// longRunDrops marks the long loss runs (three segments or more) that a
// queue held just before (the last two samples of data sent before the
// run theta or more, the last at half the queue's median or more): an overflow
// drops what arrives while the buffer is full, a burst of consecutive
// segments, and only then. Random loss makes long runs seldom (three in a
// row at 1 % once in 10,000 runs); a bursty channel makes them at
// whatever queue, mostly at none, and a host's hiccup is one sample, not
// a queue that held. Where the queue is too rough to call smooth (lag-1
// under 0.6), five segments or more. It catches the drops of slow start's overshoot where
// too few runs cluster for clusteredDrops (a buffer of a fraction of the
// bandwidth-delay product overflows once or twice). With a bottleneck's
// rate measured, a long run that the link delivered at its rate just
// before (90 % of it or more over max(a quarter of a round trip, 20
// packets) up to the run) met a queue that held too, however short the
// samples of it are (a slow-start burst fills a buffer smaller than a
// bucket's burst within a millisecond, between the receiver's timestamp
// ticks).
func (f *flow) longRunDrops(runs []lossRun, where string) {
	if f.rate > 0 {
		del := f.delivered()
		pkt := float64(f.mss) * f.ipFact
		w := max(f.base/4, time.Duration(20*pkt*8/f.rate*1e9))
		j := 0
		for i := range runs {
			t := runs[i].t
			if where == "sender" {
				t += f.base // the ACKs of what left then
			}
			if runs[i].full || runs[i].segs < 3 || len(del) == 0 || t-w < del[0].t {
				continue
			}
			// Busy just before, or just after: a burst sent into a
			// small buffer after a pause (slow start's second round,
			// a recovery's end) overflows it with nothing delivered
			// before, and the link then sends at its rate.
			before := float64(at(del, t, &j)-at(del, t-w, &j)) * 8 * f.ipFact / w.Seconds()
			after := float64(at(del, t+w, &j)-at(del, t, &j)) * 8 * f.ipFact / w.Seconds()
			if max(before, after) >= 0.9*f.rate {
				runs[i].full = true
			}
		}
	}
	if len(f.queue) < 20 {
		return
	}
	// A queue too rough to call smooth (lag-1 under 0.6: a small buffer's
	// few milliseconds within the hosts' spread) needs longer runs.
	minSegs := 3
	if f.qRho < smoothQueue {
		minSegs = 5
	}
	vs := make([]float64, len(f.queue))
	for i, q := range f.queue {
		vs[i] = float64(q.v)
	}
	top := time.Duration(max(float64(f.theta), 0.5*quantile(sorted(vs), 0.5)))
	w := max(f.base/2, 5*time.Millisecond)
	for i := range runs {
		if runs[i].full || runs[i].segs < minSegs || runs[i].before < top {
			continue
		}
		j := sort.Search(len(f.queueSent), func(k int) bool { return f.queueSent[k].t >= runs[i].t }) - 2
		if j >= 0 && f.queueSent[j].t >= runs[i].t-w && f.queueSent[j].v >= f.theta {
			runs[i].full = true
		}
	}
}

// dsack is a range the receiver reported receiving twice, and when.
type dsack struct {
	start, end int64
	t          time.Duration
}

// dsacks are the receiver's duplicate reports (RFC 2883): a first SACK
// block below the cumulative ACK, or inside the second block.
func (f *flow) dsacks() []dsack {
	var out []dsack
	for _, a := range f.acks {
		if a.nsack == 0 {
			continue
		}
		ack := f.off(a.ack)
		l, r := f.off(a.sack[0].Left), f.off(a.sack[0].Right)
		if r <= l || r-l > 1<<30 {
			continue
		}
		dup := r <= ack
		if !dup && a.nsack > 1 {
			l2, r2 := f.off(a.sack[1].Left), f.off(a.sack[1].Right)
			dup = l >= l2 && r <= r2
		}
		if dup {
			out = append(out, dsack{l, r, a.t})
		}
	}
	return out
}

func ms(d time.Duration) string {
	v := d.Seconds() * 1000
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.2f ms", v)
}

// clusteredDrops finds congestion events by how their losses cluster: an
// overflow drops several segments of one window apart (the top of the
// sawtooth, slow start's overshoot), within a round trip or two, and
// then none until the window has grown back; independent losses, random
// or a bursty channel's runs, seldom put several runs into so few
// segments. From each run, the runs that follow within two round trips
// are counted against the segments the capture saw in them, at
// the capture's own run rate: a count that independent runs give with a
// chance under 1e-3 over all the runs (Bonferroni) is a tail drop, and
// all those runs are its drops. It shows a bottleneck that
// overflows: the queue its runs met is then the level the other runs are
// judged at (half of it and theta or more: a drop at a full queue), even
// where the queue is too noisy to tell from the hosts' spread alone (a
// buffer of a few milliseconds). runs are sorted by time.
//
// The queue each loss episode met is also ranked among what the data
// segments met (the same measure at each one's send time: independent
// losses fall on segments, whatever the queue): when far more episodes
// met the queue's top quarter than a quarter of them, or its top tenth
// than a tenth (a binomial chance under 1e-3 for the two), the losses
// follow the queue, and those episodes are its overflows.
func (f *flow) clusteredDrops(runs []lossRun, sent int, queueFor func(time.Duration) time.Duration) {
	if len(runs) < 3 || sent <= 0 || f.base <= 0 {
		return
	}
	f.queueTopDrops(runs, queueFor)
	q := float64(len(runs)) / float64(sent)
	w := max(2*f.base, 2*time.Millisecond)
	// Segments sent in (a, b], counted from the data records' payloads:
	// with segmentation offload a record holds many, and counting records
	// made a window's runs look denser than q gives (random losses within
	// one offloaded burst of slow start were taken for an overflow: 0.5 %
	// at 50 ms in the grid, half its losses, -2.1 sd from the sender).
	segsIn := func(a, b time.Duration) int {
		lo := sort.Search(len(f.data), func(i int) bool { return f.data[i].t > a })
		hi := sort.Search(len(f.data), func(i int) bool { return f.data[i].t > b })
		n := 0
		for _, d := range f.data[lo:hi] {
			n += f.segsOf(d)
		}
		return n
	}
	var level []float64
	for i := range runs {
		j := i + 1
		for j < len(runs) && runs[j].t <= runs[i].t+w {
			j++
		}
		k := j - i - 1 // runs after the i-th within the round trip
		if k == 0 {
			continue
		}
		m := max(segsIn(runs[i].t, runs[i].t+w), k)
		if binom.Tail(m, k, q)*float64(len(runs)) >= 1e-3 {
			continue
		}
		for x := i; x < j; x++ {
			if !runs[x].full && runs[x].queue >= 0 {
				level = append(level, float64(runs[x].queue))
			}
			runs[x].full = true
		}
	}
	if len(level) == 0 {
		return
	}
	ref := quantile(sorted(level), 0.5)
	for i := range runs {
		// Judged by the queue the data sent just before it met where
		// that is known: the samples after a loss hold its recovery's
		// wait (the cumulative ACK jumps when the hole is filled).
		q := runs[i].queue
		if runs[i].before >= 0 {
			q = runs[i].before
		}
		if !runs[i].full && q >= f.theta && float64(q) >= 0.5*ref {
			runs[i].full = true
		}
	}
}

// queueTopDrops marks the runs of the loss episodes that met the queue's
// top quarter (or tenth), when that many of them did that independent losses would
// not (see clusteredDrops).
func (f *flow) queueTopDrops(runs []lossRun, queueFor func(time.Duration) time.Duration) {
	ref := f.segmentQueues(queueFor)
	if len(ref) < 20 {
		return
	}
	eps := episodesOf(f, runs)
	// The top quarter, and the top tenth (a buffer's overflow meets the
	// queue at its highest): each at half the chance.
	top := -1.0
	for _, share := range []float64{0.25, 0.10} {
		level := quantile(ref, 1-share)
		n, k := 0, 0
		for _, e := range eps {
			if q := runs[e.first].queue; q >= 0 {
				n++
				if float64(q) > level {
					k++
				}
			}
		}
		if n >= 3 && binom.Tail(n, k, share) < 0.5e-3 {
			top = level
			break
		}
	}
	if top < 0 {
		return
	}
	for _, e := range eps {
		if q := runs[e.first].queue; q >= f.theta && float64(q) > top {
			for i := e.first; i < e.first+e.n; i++ {
				runs[i].full = true
			}
		}
	}
}

// smoothQueueDrops marks tail drops by the queue they met. With a queue
// that fills and drains smoothly (lag-1 autocorrelation 0.7 or more,
// rising to twice theta), the runs that met at least half the queue the
// median run met (an overflow happens at the buffer's depth every time; a
// random loss at any depth). Unless a bottleneck's rate was measured, the
// runs must meet a queue more often than the segments sent do: a host's
// scheduling delay is smooth too, and random losses meet it as often as
// any segment does. At some level L that runs met, the runs at L or more
// against the segments at L or more: a binomial chance under 1 % over all
// the levels tried (Bonferroni); the runs at L or more are the drops.
// Without such a queue every loss is the path's, as far as this rule
// goes.
func (f *flow) smoothQueueDrops(runs []lossRun, queueFor func(time.Duration) time.Duration) {
	if f.qRho < 0.7 || f.qmax < 2*f.theta {
		return
	}
	var qs []float64
	for _, r := range runs {
		if r.queue >= 0 {
			qs = append(qs, float64(r.queue))
		}
	}
	if len(qs) == 0 {
		return
	}
	level := max(float64(f.theta), 0.5*quantile(sorted(qs), 0.5))
	if f.rate <= 0 {
		level = f.queueFollowedBy(qs, f.segmentQueues(queueFor))
	}
	for i := range runs {
		runs[i].full = level >= 0 && runs[i].queue >= f.theta && float64(runs[i].queue) >= level
	}
}

// queueFollowedBy is the lowest queue level (theta or more) that the
// loss runs (their queues qs) met far more often than the segments sent
// (seg, sorted) did: a binomial chance under 1 % over the levels tried;
// -1: none.
func (f *flow) queueFollowedBy(qs, seg []float64) float64 {
	if len(seg) < 20 {
		return -1
	}
	levels := sorted(qs)
	levels = slices.Compact(levels)
	var tried []float64
	for _, l := range levels {
		if l >= float64(f.theta) {
			tried = append(tried, l)
		}
	}
	for _, l := range tried {
		k := 0
		for _, q := range qs {
			if q >= l {
				k++
			}
		}
		p0 := float64(len(seg)-sort.SearchFloat64s(seg, l)) / float64(len(seg))
		if binom.Tail(len(qs), k, max(p0, 1e-3))*float64(len(tried)) < 0.01 {
			return l
		}
	}
	return -1
}

// segmentQueues is the queue that the data segments met (up to 2,000
// of them, first transmissions, the same measure as a loss run's),
// sorted.
func (f *flow) segmentQueues(queueFor func(time.Duration) time.Duration) []float64 {
	if len(f.queue) == 0 {
		return nil
	}
	var ref []float64
	step := max(1, len(f.data)/2000)
	for i := 0; i < len(f.data); i += step {
		if f.data[i].aflags&analyzer.AnyRetransmission != 0 {
			continue
		}
		if q := queueFor(f.data[i].t); q >= 0 {
			ref = append(ref, float64(q))
		}
	}
	return sorted(ref)
}

// episode is one loss event: the runs lost within two round trips of
// each other (a window's losses, recovered together).
type episode struct {
	first, n int // runs[first : first+n]
	t        time.Duration
	segs     int
}

// episodesOf groups runs (sorted by time) into episodes.
func episodesOf(f *flow, runs []lossRun) []episode {
	var out []episode
	gap := max(2*f.base, 5*time.Millisecond)
	for i, r := range runs {
		if len(out) > 0 && r.t-runs[i-1].t <= gap {
			e := &out[len(out)-1]
			e.n++
			e.segs += r.segs
			continue
		}
		out = append(out, episode{first: i, n: 1, t: r.t, segs: r.segs})
	}
	return out
}

// tsTick is one tick of the receiver's timestamp clock, from its ACKs'
// TSvals over the capture's time (Linux: 1 ms); 0 without them.
func (f *flow) tsTick() time.Duration {
	var first, last record
	n := 0
	for _, a := range f.acks {
		if a.hasTS {
			if n == 0 {
				first = a
			}
			last = a
			n++
		}
	}
	if span := last.tsval - first.tsval; n >= 10 && span > 0 {
		return (last.t - first.t) / time.Duration(span)
	}
	return 0
}
