package analyzer

import "time"

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
// meant for single-valued series, where lo == hi).
func (s *Series) AddRange(t time.Duration, lo, hi float64) {
	if n := len(s.Points); n > 0 && t < s.lastEnd {
		// Fast path: the sample falls in the newest bucket (no division).
		last := &s.Points[n-1]
		last.Min = min(last.Min, lo)
		last.Max = max(last.Max, hi)
		last.Last = hi
		last.Sum += lo
		last.N++
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
	s.Points = append(s.Points, Point{T: start, First: lo, Min: lo, Max: hi, Last: hi, Sum: lo, N: 1})
	s.lastEnd = start + s.Bucket
}

// addPoint merges an already accumulated point (an initial bucket) into
// the series.
func (s *Series) addPoint(p Point) {
	if n := len(s.Points); n > 0 && p.T < s.lastEnd {
		last := &s.Points[n-1]
		last.Min = min(last.Min, p.Min)
		last.Max = max(last.Max, p.Max)
		last.Last = p.Last
		last.Sum += p.Sum
		last.N += p.N
		return
	}
	for len(s.Points) >= s.maxPoints {
		s.merge()
	}
	start := p.T - p.T%s.Bucket
	if n := len(s.Points); n > 0 && start <= s.Points[n-1].T {
		s.lastEnd = s.Points[n-1].T + s.Bucket
		s.addPoint(p)
		return
	}
	p.T = start
	s.Points = append(s.Points, p)
	s.lastEnd = start + s.Bucket
}

// merge doubles the bucket width, folding points into their new buckets.
func (s *Series) merge() {
	s.Bucket *= 2
	out := s.Points[:0]
	for _, p := range s.Points {
		p.T -= p.T % s.Bucket
		if k := len(out); k > 0 && out[k-1].T == p.T {
			q := &out[k-1]
			q.Min = min(q.Min, p.Min)
			q.Max = max(q.Max, p.Max)
			q.Last = p.Last
			q.Sum += p.Sum
			q.N += p.N
			continue
		}
		out = append(out, p)
	}
	// Zero the tail so the slice does not pin stale values.
	for i := len(out); i < len(s.Points); i++ {
		s.Points[i] = Point{}
	}
	s.Points = out
	if n := len(out); n > 0 {
		s.lastEnd = out[n-1].T + s.Bucket
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
