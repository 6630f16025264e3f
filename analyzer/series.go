package analyzer

import (
	"math"
	"math/bits"
	"time"
)

// Decimation. A Series never holds more than its point budget
// (Options.MaxPoints, default 4096). Samples fall into time buckets that
// start at the capture's first packet; a bucket keeps the first, minimum,
// maximum and last value and the sum and count of its samples, so a plot of
// Min..Max per bucket shows every spike a full-resolution plot would and a
// rate is Sum divided by the bucket width. Buckets start 100 µs wide; when a
// series would exceed its budget, adjacent buckets merge pairwise and the
// width doubles. A million-packet flow therefore costs at most MaxPoints
// points per series, and a 10 s transfer keeps 2.5 ms resolution at the
// default budget (enough to zoom into the 50 ms windows of the seeds).

// Point is one time bucket of a series.
type Point struct {
	// T is the bucket's start, relative to the capture's first packet.
	T time.Duration `json:"t_ns"`
	// First, Min, Max and Last are the values of the bucket's samples.
	First float64 `json:"first"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
	Last  float64 `json:"last"`
	// Sum and N are the total and count of the bucket's samples.
	Sum float64 `json:"sum"`
	N   int     `json:"n"`
}

// join adds samples to the bucket: lo and hi widen Min and Max, last
// becomes Last, sum and n add to Sum and N.
func (q *Point) join(lo, hi, last, sum float64, n int) {
	q.Min = min(q.Min, lo)
	q.Max = max(q.Max, hi)
	q.Last = last
	q.Sum += sum
	q.N += n
}

// Series is a decimated time series.
type Series struct {
	Name string `json:"name"`
	// Unit of the values: "bytes", "ms" or "bytes/bucket" (Sum per bucket).
	Unit string `json:"unit"`
	// Bucket is the current bucket width.
	Bucket time.Duration `json:"bucket_ns"`
	Points []Point       `json:"points"`

	maxPoints int
	lastEnd   time.Duration // end of the newest bucket
}

const initialBucket = 100 * time.Microsecond

func newSeries(name, unit string, maxPoints int) Series {
	return Series{Name: name, Unit: unit, Bucket: initialBucket, maxPoints: maxPoints}
}

// Add records value v at time t (relative to capture start). Samples are
// expected in time order; a sample older than the last bucket joins it.
func (s *Series) Add(t time.Duration, v float64) { s.AddRange(t, v, v) }

// AddRange records a sample spanning lo..hi, such as a segment's sequence
// range: Min and First see lo, Max and Last see hi, Sum adds lo (Sum is
// meant for single-valued series, where lo == hi). It stays apart from
// addAcc: the series tests check the accumulators against it.
func (s *Series) AddRange(t time.Duration, lo, hi float64) {
	if n := len(s.Points); n > 0 && t < s.lastEnd {
		// Fast path: the sample falls in the newest bucket (no division).
		s.Points[n-1].join(lo, hi, hi, lo, 1)
		return
	}
	if t < 0 {
		t = 0
	}
	for len(s.Points) >= s.maxPoints {
		s.merge()
	}
	start := t - t%s.Bucket
	if n := len(s.Points); n > 0 && start <= s.Points[n-1].T {
		// After a merge the newest bucket may cover t.
		s.lastEnd = s.Points[n-1].T + s.Bucket
		s.AddRange(t, lo, hi)
		return
	}
	s.reserve()
	s.Points = append(s.Points, Point{T: start, First: lo, Min: lo, Max: hi, Last: hi, Sum: lo, N: 1})
	s.lastEnd = start + s.Bucket
}

// addAcc merges the samples an accumulator gathered in the bucket of width
// step starting at t (a multiple of step) into the series. The accumulator
// is read in place: a Point built from it and passed by value would be
// copied twice per flush.
func (s *Series) addAcc(t, step time.Duration, a *acc) {
	if n := len(s.Points); n > 0 && t < s.lastEnd {
		s.Points[n-1].join(a.lo, a.hi, a.last, a.sum, a.n)
		return
	}
	for len(s.Points) >= s.maxPoints {
		s.merge()
	}
	start := t
	if s.Bucket != step {
		// Only then is the division needed: t is a multiple of step.
		start = t - t%s.Bucket
	}
	if n := len(s.Points); n > 0 && start <= s.Points[n-1].T {
		s.lastEnd = s.Points[n-1].T + s.Bucket
		s.addAcc(t, step, a)
		return
	}
	s.reserve()
	s.Points = append(s.Points, Point{T: start, First: a.first, Min: a.lo, Max: a.hi, Last: a.last, Sum: a.sum, N: a.n})
	s.lastEnd = start + s.Bucket
}

// reserve makes room for one more point (there are fewer than maxPoints):
// the array doubles, up to maxPoints. Left to append, it would grow by
// 1.25x past 256 points, copying a long transfer's series some seven times
// instead of four on their way to the budget.
func (s *Series) reserve() {
	if n := len(s.Points); n == cap(s.Points) {
		grow := min(max(n, 1), max(s.maxPoints-n, 1))
		s.Points = append(s.Points, make([]Point, grow)...)[:n]
	}
}

// merge doubles the bucket width, folding points into their new buckets.
// Points are folded in place by index: ranging over them by value would
// copy every point twice.
func (s *Series) merge() {
	s.Bucket *= 2
	pts := s.Points
	k := 0 // points kept so far
	for i := range pts {
		p := &pts[i]
		t := p.T - p.T%s.Bucket
		if k > 0 && pts[k-1].T == t {
			pts[k-1].join(p.Min, p.Max, p.Last, p.Sum, p.N)
			continue
		}
		if k != i {
			pts[k] = *p
		}
		pts[k].T = t
		k++
	}
	// Zero the tail so the slice does not pin stale values.
	clear(pts[k:])
	s.Points = pts[:k]
	if k > 0 {
		s.lastEnd = pts[k-1].T + s.Bucket
	}
}

// Rate returns the bucket's Sum per second (for byte-count series: bytes/s).
// The last bucket is divided by the time actually covered when end (the
// series' last sample time) falls inside it.
func (s *Series) Rate(i int, end time.Duration) float64 {
	w := s.Bucket
	p := s.Points[i]
	if i == len(s.Points)-1 && end > p.T && end-p.T < w {
		w = end - p.T
		if w < initialBucket {
			w = initialBucket
		}
	}
	return p.Sum / w.Seconds()
}

// DirectionSeries are the decimated graph series of one direction's data.
// Sequence values are unwrapped byte offsets from the ISN (relative
// sequence numbers, as Wireshark shows them), so they never wrap.
type DirectionSeries struct {
	Segments        Series // tcptrace/Stevens: Min = lowest segment start, Max = highest segment end
	Retransmissions Series // retransmitted segments, same layout
	Acks            Series // the peer's cumulative ACK
	ReceiveWindow   Series // ACK + the peer's advertised window (the rwnd line)
	SACK            Series // SACK blocks: Min = left edge, Max = right edge
	DupAcks         Series // ACK value of each duplicate ACK (ticks)
	ZeroWindows     Series // ACK value where the peer advertised a zero window
	RTT             Series // Karn RTT samples, ms
	TSRTT           Series // timestamp RTT samples, ms
	AdvWindow       Series // the peer's advertised window, bytes
	InFlight        Series // bytes in flight after each data segment
	Throughput      Series // data bytes sent per bucket (Sum)
	Goodput         Series // new (unique) bytes sent per bucket (Sum)
	// EchoRTT: the receiver's TSval to the new data echoing it, ms: the
	// round trip as a capture near the receiver sees it.
	EchoRTT Series

	// Samples first gather in one accumulator per series (plain field
	// updates on the per-packet path), which spans one bucket of its
	// series; it becomes a point (or joins the newest) when time moves
	// past that bucket. A series' buckets are its own: a series that
	// starts late gets its first point in its own narrow bucket, not at
	// the start of a busy series' wide one, and a sparse series at
	// 100 µs does not make a busy one flush on every packet.
	pend    [numSeries]acc
	pendEnd time.Duration // the earliest end among the placed accumulators
	now     time.Duration // the time roll was last given
	opened  uint16        // accumulators that took their first sample since the last rollOver
	ptrs    [numSeries]*Series
}

// Series indexes, in the order of All.
const (
	sSegments = iota
	sRetransmissions
	sAcks
	sReceiveWindow
	sSACK
	sDupAcks
	sZeroWindows
	sRTT
	sTSRTT
	sAdvWindow
	sInFlight
	sThroughput
	sGoodput
	sEchoRTT
	numSeries
)

// acc accumulates the samples of one series within one of its buckets.
type acc struct {
	n                        int
	first, lo, hi, last, sum float64
	t0                       time.Duration // time of the first sample
	t, end                   time.Duration // the bucket, once placed (rollOver)
}

// add records one sample in series i's accumulator. Plain comparisons
// stand in for min and max, whose NaN and signed-zero rules cost several
// instructions each: samples are byte counts, sequence offsets and
// non-negative times, never NaN nor -0, so the result is the same. The
// first sample notes its time and leaves the accumulator to be placed in
// its series' bucket by the next roll.
func (s *DirectionSeries) add(i int, lo, hi float64) {
	a := &s.pend[i]
	if a.n == 0 {
		a.first, a.lo, a.hi, a.t0 = lo, lo, hi, s.now
		s.opened |= 1 << i
	} else {
		if lo < a.lo {
			a.lo = lo
		}
		if hi > a.hi {
			a.hi = hi
		}
	}
	a.last = hi
	a.sum += lo
	a.n++
}

// roll moves the series to time t: it flushes the accumulators whose
// bucket t is past, and places those that took a first sample. roll is
// the comparison alone, small enough to inline: most packets stay within
// the buckets and open none.
func (s *DirectionSeries) roll(t time.Duration) {
	s.now = t
	if t >= s.pendEnd || s.opened != 0 {
		s.rollOver(t)
	}
}

// rollOver places the newly opened accumulators, flushes those whose
// bucket ended by t, and notes the earliest end of the others.
func (s *DirectionSeries) rollOver(t time.Duration) {
	s.place()
	next := time.Duration(math.MaxInt64)
	for i := range s.pend {
		a := &s.pend[i]
		if a.n == 0 {
			continue
		}
		if a.end <= t {
			s.flushOne(i)
			continue
		}
		next = min(next, a.end)
	}
	s.pendEnd = next
}

// place sets the bucket of every accumulator opened since the last
// rollOver: the bucket of its series that holds its first sample. Its
// series cannot change until it is flushed (only this accumulator adds to
// it), so the bucket stays right.
func (s *DirectionSeries) place() {
	for m := s.opened; m != 0; m &= m - 1 {
		i := bits.TrailingZeros16(m)
		a, b := &s.pend[i], s.ptrs[i].Bucket
		a.t = a.t0 - a.t0%b
		a.end = a.t + b
	}
	s.opened = 0
}

// flushOne merges accumulator i into its series and empties it.
func (s *DirectionSeries) flushOne(i int) {
	a, sr := &s.pend[i], s.ptrs[i]
	sr.addAcc(a.t, sr.Bucket, a)
	*a = acc{}
}

// flush merges every non-empty accumulator into its series (the end of
// the connection).
func (s *DirectionSeries) flush() {
	s.place()
	for i := range s.pend {
		if s.pend[i].n > 0 {
			s.flushOne(i)
		}
	}
	s.pendEnd = math.MaxInt64
}

func newDirSeries(n int) *DirectionSeries {
	s := &DirectionSeries{
		Segments:        newSeries("segments", "bytes", n),
		Retransmissions: newSeries("retransmissions", "bytes", n),
		Acks:            newSeries("ack", "bytes", n),
		ReceiveWindow:   newSeries("rwnd", "bytes", n),
		SACK:            newSeries("sack", "bytes", n),
		DupAcks:         newSeries("dup_ack", "bytes", n),
		ZeroWindows:     newSeries("zero_window", "bytes", n),
		RTT:             newSeries("rtt", "ms", n),
		TSRTT:           newSeries("ts_rtt", "ms", n),
		AdvWindow:       newSeries("adv_window", "bytes", n),
		InFlight:        newSeries("in_flight", "bytes", n),
		Throughput:      newSeries("throughput", "bytes/bucket", n),
		Goodput:         newSeries("goodput", "bytes/bucket", n),
		EchoRTT:         newSeries("echo_rtt", "ms", n),
	}
	copy(s.ptrs[:], s.All())
	return s
}

// All lists the series in a fixed order (CSV columns, plots).
func (s *DirectionSeries) All() []*Series {
	return []*Series{&s.Segments, &s.Retransmissions, &s.Acks, &s.ReceiveWindow, &s.SACK, &s.DupAcks,
		&s.ZeroWindows, &s.RTT, &s.TSRTT, &s.AdvWindow, &s.InFlight, &s.Throughput, &s.Goodput, &s.EchoRTT}
}

// recordSegment records a data segment's sequence range and bytes.
func (s *DirectionSeries) recordSegment(span *seqSpan, seglen uint32, retrans bool) {
	if retrans {
		s.add(sRetransmissions, float64(span.start), float64(span.end))
	} else {
		s.add(sSegments, float64(span.start), float64(span.end))
	}
	s.add(sThroughput, float64(seglen), float64(seglen))
	if span.newBytes > 0 {
		s.add(sGoodput, float64(span.newBytes), float64(span.newBytes))
	}
}

// recordAck records the peer's cumulative ACK and, unless it came on a
// SYN, the window it advertised.
func (s *DirectionSeries) recordAck(relAck, window int64, hasWindow bool, fl PacketFlags) {
	s.add(sAcks, float64(relAck), float64(relAck))
	if hasWindow {
		s.add(sReceiveWindow, float64(relAck+window), float64(relAck+window))
		s.add(sAdvWindow, float64(window), float64(window))
	}
	if fl&DupAck != 0 {
		s.add(sDupAcks, float64(relAck), float64(relAck))
	}
	if fl&ZeroWindow != 0 {
		s.add(sZeroWindows, float64(relAck), float64(relAck))
	}
}

// recordSACK records one SACK block.
func (s *DirectionSeries) recordSACK(left, right int64) {
	s.add(sSACK, float64(left), float64(right))
}

// recordRTT records a Karn RTT sample of d ns.
func (s *DirectionSeries) recordRTT(d int64) { s.add(sRTT, float64(d)/1e6, float64(d)/1e6) }

// recordTSRTT records a timestamp RTT sample of d ns.
func (s *DirectionSeries) recordTSRTT(d int64) { s.add(sTSRTT, float64(d)/1e6, float64(d)/1e6) }

// recordEchoRTT records an echo RTT sample of us microseconds.
func (s *DirectionSeries) recordEchoRTT(us uint64) { s.add(sEchoRTT, float64(us)/1e3, float64(us)/1e3) }

// recordInFlight records the bytes in flight after a data segment.
func (s *DirectionSeries) recordInFlight(v int64) { s.add(sInFlight, float64(v), float64(v)) }

// reduced returns a copy of the series decimated to at most maxPoints
// points each, holding no more memory than those points.
func (s *DirectionSeries) reduced(maxPoints int) *DirectionSeries {
	r := &DirectionSeries{}
	src, dst := s.All(), r.All()
	for i, sr := range src {
		c := *sr
		c.maxPoints = max(maxPoints, 1)
		for len(c.Points) > c.maxPoints {
			c.merge()
		}
		c.Points = append([]Point(nil), c.Points...)
		*dst[i] = c
	}
	copy(r.ptrs[:], dst)
	return r
}
