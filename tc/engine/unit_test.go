package engine

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/units"
)

// cutSegmenter is a test's Segmenter: a unit's Data is its segments one
// after the other, each size bytes but the last, and Segment copies them
// out into packets of pool.
type cutSegmenter struct {
	pool *Pool
	size map[*Packet]int
	big  *Pool // with it, a Cutter: pieces of two or more segments from big
	cuts int   // pieces of two or more segments cut
}

func (s *cutSegmenter) Cuttable(*Packet) bool { return s.big != nil }

func (s *cutSegmenter) Cut(p *Packet, from, to int) *Packet {
	size := s.size[p]
	data := p.Data[from*size : min(to*size, len(p.Data))]
	if to-from == 1 {
		q := s.pool.Get()
		q.SetLen(len(data))
		copy(q.Data, data)
		return q
	}
	q := s.big.Get()
	q.SetLen(len(data))
	copy(q.Data, data)
	q.SetUnit(to-from, len(data), int(p.segBuf))
	s.size[q] = size
	s.cuts++
	return q
}

func (s *cutSegmenter) Segment(p *Packet, out []*Packet) []*Packet {
	size := s.size[p]
	for off := 0; off < len(p.Data); off += size {
		end := min(off+size, len(p.Data))
		q := s.pool.Get()
		q.SetLen(end - off)
		copy(q.Data, p.Data[off:end])
		out = append(out, q)
	}
	return out
}

// segRec is a departed segment: what must be the same whether it came
// alone or inside a unit.
type segRec struct {
	Seq    uint64
	Depart int64
	Flags  Flags
	Queue  uint16
	Data   string
}

// randomUnitSpec is a spec for the property test: one or two netem stages
// (delay, jitter, loss, duplicate, corrupt, reorder, ECN, correlations,
// small limits), sometimes with a stage that does not take units (netem
// rate, tbf, pfifo), in which units become segments on entry.
func randomUnitSpec(r *rand.Rand) string {
	netem := func() string {
		var f []string
		delay := r.IntN(3)
		f = append(f, []string{"delay 0ms", "delay 1ms", "delay 5ms"}[delay])
		if r.IntN(4) == 0 {
			f[0] += fmt.Sprintf(" %dus", 1+r.IntN(500))
		}
		if r.IntN(2) == 0 {
			f = append(f, fmt.Sprintf("loss %g%%", []float64{0.1, 1, 5, 20}[r.IntN(4)]))
			if r.IntN(3) == 0 {
				f = append(f, "25%")
			}
			if r.IntN(4) == 0 {
				f = append(f, "ecn")
			}
		}
		if r.IntN(4) == 0 {
			f = append(f, fmt.Sprintf("duplicate %d%%", 1+r.IntN(5)))
		}
		if r.IntN(4) == 0 {
			f = append(f, fmt.Sprintf("corrupt %d%%", 1+r.IntN(5)))
		}
		if r.IntN(4) == 0 && delay > 0 {
			f = append(f, fmt.Sprintf("reorder %d%% gap %d", 5+r.IntN(20), 1+r.IntN(50)))
		}
		if r.IntN(3) == 0 {
			f = append(f, fmt.Sprintf("limit %d", 20+r.IntN(300)))
		}
		return "netem " + strings.Join(f, " ")
	}
	stages := []string{netem()}
	if r.IntN(3) == 0 {
		stages = append(stages, netem())
	}
	switch r.IntN(6) {
	case 0:
		stages = append(stages, "tbf rate 200mbit burst 30kb limit 200kb")
	case 1:
		stages = append(stages, "pfifo limit 100")
	case 2:
		stages[0] += " rate 500mbit"
	}
	return strings.Join(stages, " | ")
}

// unitRun pushes a stream of super-packets (segs[i] segments of size[i]
// bytes at arrival[i]) through a pipeline for s, whole when whole is set,
// else segment by segment, dequeuing at the given times, and returns every
// departed segment in order and the pipeline's counters.
func unitRun(t *testing.T, s string, seed uint64, budget units.Size, arrival []int64, segs, size []int, dequeues []int64, whole, pieces bool) ([]segRec, Snapshot, int) {
	t.Helper()
	const segBuf = Headroom + 1500
	small, big := NewPool(segBuf), NewPool(DefaultBufSize)
	cut := &cutSegmenter{pool: small, size: map[*Packet]int{}}
	if pieces {
		cut.big = big
	}
	opt := Options{Seed: seed, Segmenter: cut}
	if budget != 0 {
		opt.Memory = NewMemoryBudget(budget)
	}
	pl, err := NewPipeline(mustParse(t, s), opt)
	if err != nil {
		t.Fatal(err)
	}
	var recs []segRec
	var out []*Packet
	take := func(now int64) {
		out = pl.Dequeue(now, out[:0])
		for _, p := range out {
			if !p.isUnit() {
				recs = append(recs, segRec{p.Seq, p.Depart, p.Flags, p.Queue, string(p.Data)})
				p.pool.Put(p)
				continue
			}
			seq, depart := p.Seq, p.Depart
			for k, q := range cut.Segment(p, nil) {
				recs = append(recs, segRec{seq + uint64(k), depart, p.Flags, p.Queue, string(q.Data)})
				small.Put(q)
			}
			big.Put(p)
		}
	}
	d := 0
	var batch []*Packet
	for i, at := range arrival {
		for ; d < len(dequeues) && dequeues[d] <= at; d++ {
			take(dequeues[d])
		}
		seg := UDPPacket(size[i], 0x02)
		batch = batch[:0]
		if whole && segs[i] > 1 {
			p := big.Get()
			p.SetLen(segs[i] * size[i])
			for k := range segs[i] {
				copy(p.Data[k*size[i]:], seg)
				p.Data[k*size[i]+size[i]-1] = byte(i + k)
			}
			p.SetUnit(segs[i], len(p.Data), segBuf)
			cut.size[p] = size[i]
			batch = append(batch, p)
		} else {
			for k := range segs[i] {
				p := small.Get()
				p.SetLen(size[i])
				copy(p.Data, seg)
				p.Data[size[i]-1] = byte(i + k)
				batch = append(batch, p)
			}
		}
		for _, p := range batch {
			p.Arrival, p.Queue = at, uint16(i%3)
		}
		pl.EnqueueBatch(batch, at)
	}
	for ; d < len(dequeues); d++ {
		take(dequeues[d])
	}
	for {
		next, ok := pl.NextDeparture()
		if !ok {
			break
		}
		take(next)
	}
	return recs, pl.Snapshot(), cut.cuts
}

// TestUnitsAsSegments is the property of super-packets: over random specs
// and streams, a stream of units gives the same departed segments (their
// departure, sequence, flags, queue and bytes, in order), the same drops
// and the same counters, stage by stage, as the same segments enqueued
// one by one.
func TestUnitsAsSegments(t *testing.T) {
	r := rand.New(rand.NewPCG(50, 1))
	runs := 150
	if testing.Short() {
		runs = 40
	}
	pieced := 0
	for run := range runs {
		s := randomUnitSpec(r)
		n := 50 + r.IntN(250)
		arrival, segs, size := make([]int64, n), make([]int, n), make([]int, n)
		at := int64(1e9)
		for i := range n {
			at += int64(r.IntN(300_000))
			arrival[i] = at
			size[i] = 60 + r.IntN(1440)
			segs[i] = 1 + r.IntN(min(44, 65000/size[i])) // a GSO packet holds up to 64 KiB
		}
		var dequeues []int64
		for at := int64(1e9); at < arrival[n-1]; at += int64(r.IntN(2_000_000)) {
			dequeues = append(dequeues, at)
		}
		var budget units.Size
		if r.IntN(4) == 0 {
			budget = units.Size(200_000 + r.IntN(2_000_000))
		}
		seed := r.Uint64()
		want, wantSnap, _ := unitRun(t, s, seed, budget, arrival, segs, size, dequeues, false, false)
		for _, pieces := range []bool{false, true} {
			got, gotSnap, cuts := unitRun(t, s, seed, budget, arrival, segs, size, dequeues, true, pieces)
			pieced += cuts
			how := "units"
			if pieces {
				how = "units cut into pieces"
			}
			if len(got) != len(want) {
				t.Fatalf("run %d, %q (budget %d): %d segments left as %s, %d one by one", run, s, budget, len(got), how, len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					for j := max(i-6, 0); j < min(i+6, len(want)); j++ {
						t.Logf("%d: %s %+v  segs %+v", j, how, short(got[j]), short(want[j]))
					}
					t.Fatalf("run %d, %q (budget %d): departed segment %d: as %s %+v, one by one %+v", run, s, budget, i,
						how, short(got[i]), short(want[i]))
				}
			}
			if !reflect.DeepEqual(gotSnap, wantSnap) {
				t.Fatalf("run %d, %q (budget %d): counters differ:\nas %s %+v\none by one %+v", run, s, budget, how, gotSnap, wantSnap)
			}
		}
	}
	// The pieces are not a path no run took: losses and limits inside
	// units cut many of them.
	if pieced < runs {
		t.Fatalf("%d pieces of two or more segments cut over %d runs: the property test barely tried them", pieced, runs)
	}
}

func short(s segRec) segRec {
	s.Data = fmt.Sprintf("%d bytes, last %d", len(s.Data), s.Data[len(s.Data)-1])
	return s
}

// TestUnitWholeThroughDelay checks that the property test is not empty:
// under a fixed delay a unit leaves as one packet, counted as its
// segments.
func TestUnitWholeThroughDelay(t *testing.T) {
	small, big := NewPool(Headroom+1500), NewPool(DefaultBufSize)
	pl, err := NewPipeline(mustParse(t, "delay 1ms loss 0.1%"), Options{Seed: 7, Segmenter: &cutSegmenter{pool: small, size: map[*Packet]int{}}})
	if err != nil {
		t.Fatal(err)
	}
	p := big.Get()
	p.SetLen(10 * 1000)
	p.SetUnit(10, 10*1000, Headroom+1500)
	p.Arrival = 1e9
	pl.Enqueue(p, 1e9)
	out := pl.Dequeue(1e9+1e6, nil)
	if len(out) != 1 || out[0] != p || out[0].Depart != 1e9+1e6 {
		t.Fatalf("dequeued %d packets, want the unit whole at +1ms", len(out))
	}
	snap := pl.Snapshot()
	if snap.Totals.PacketsOut != 10 || snap.Totals.BytesOut != 10000 || snap.Totals.Sojourn.Count != 10 {
		t.Fatalf("totals %+v, want 10 segments, 10000 bytes out", snap.Totals)
	}
}

// BenchmarkUnits drives 44-segment super-packets of 1448-byte segments at
// 10 Gbit/s through a spec, as units cut into segments where their fates
// part (whole), as units cut into smaller units there (pieces: a Cutter)
// or as segments (44 packets an iteration), as the proxy's reader and
// release loop do; the figures are per super-packet, the allocations per
// iteration must be 0.
func BenchmarkUnits(b *testing.B) {
	for _, s := range []string{"delay 1ms", "loss 0.1%", "delay 1ms loss 0.1%", "delay 1ms limit 100"} {
		for _, how := range []string{"whole", "pieces", "segments"} {
			b.Run(s+"/"+how, func(b *testing.B) { benchUnits(b, s, how) })
		}
	}
}

func benchUnits(b *testing.B, s, how string) {
	const segs, size = 44, 1448
	small, big := NewPool(Headroom+1500), NewPool(DefaultBufSize)
	cut := &poolSegmenter{pool: small, size: size}
	if how == "pieces" {
		cut.big = big
	}
	whole := how != "segments"
	pl, err := NewPipeline(mustParse(b, s), Options{Seed: 1, Segmenter: cut})
	if err != nil {
		b.Fatal(err)
	}
	interval := int64(segs * size * 8 / 10) // ns at 10 Gbit/s
	batch := make([]*Packet, 0, 4096)
	in := make([]*Packet, 0, segs)
	now := int64(1e9)
	step := func() {
		now += interval
		batch = pl.Dequeue(now, batch[:0])
		for _, p := range batch {
			pl.Release(p)
		}
		in = in[:0]
		if whole {
			p := big.Get()
			p.SetLen(segs * size)
			p.SetUnit(segs, segs*size, Headroom+1500)
			in = append(in, p)
		} else {
			for range segs {
				p := small.Get()
				p.SetLen(size)
				in = append(in, p)
			}
		}
		for _, p := range in {
			p.Arrival = now
		}
		pl.EnqueueBatch(in, now)
	}
	for range 2000 {
		step()
	}
	b.SetBytes(segs * size)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		step()
	}
}

// poolSegmenter cuts a unit into size-byte segments from pool (the
// benchmark's: no map, no allocation).
type poolSegmenter struct {
	pool *Pool
	size int
	big  *Pool // with it, a Cutter: pieces of two or more segments from big
}

func (s *poolSegmenter) Cuttable(*Packet) bool { return s.big != nil }

func (s *poolSegmenter) Cut(p *Packet, from, to int) *Packet {
	data := p.Data[from*s.size : min(to*s.size, len(p.Data))]
	pool := s.pool
	if to-from > 1 {
		pool = s.big
	}
	q := pool.Get()
	q.SetLen(len(data))
	copy(q.Data, data)
	q.SetUnit(to-from, len(data), int(p.segBuf))
	return q
}

func (s *poolSegmenter) Segment(p *Packet, out []*Packet) []*Packet {
	for off := 0; off < len(p.Data); off += s.size {
		q := s.pool.Get()
		q.SetLen(min(s.size, len(p.Data)-off))
		copy(q.Data, p.Data[off:])
		out = append(out, q)
	}
	return out
}

// fifoScheduler sends what it is given at once, in order, and remembers
// whether it was ever handed a unit.
type fifoScheduler struct {
	held      []*Packet
	classes   []int
	at        []int64
	sawUnit   bool
	delivered int
}

func (s *fifoScheduler) Enqueue(class int, p *Packet, now int64) bool {
	s.sawUnit = s.sawUnit || p.isUnit()
	s.held, s.classes, s.at = append(s.held, p), append(s.classes, class), append(s.at, now)
	return true
}

func (s *fifoScheduler) Next() (int64, bool) {
	if len(s.held) == 0 {
		return 0, false
	}
	return s.at[0], true
}

func (s *fifoScheduler) Dequeue(int64) (*Packet, int, bool) {
	if len(s.held) == 0 {
		return nil, 0, false
	}
	p, c := s.held[0], s.classes[0]
	s.held, s.classes, s.at = s.held[1:], s.classes[1:], s.at[1:]
	return p, c, true
}

// TestUnitsHandedToSchedulerAsSegments: units inside a plain pipeline
// that Replace turns into a class tree reach its scheduler as their
// segments, every one of them.
func TestUnitsHandedToSchedulerAsSegments(t *testing.T) {
	small, big := NewPool(Headroom+1500), NewPool(DefaultBufSize)
	cut := &cutSegmenter{pool: small, size: map[*Packet]int{}}
	pl, err := NewPipeline(mustParse(t, "delay 10ms"), Options{Seed: 3, Segmenter: cut})
	if err != nil {
		t.Fatal(err)
	}
	now := 1000 * msec
	for i := range 4 {
		p := big.Get()
		p.SetLen(5 * 1000)
		p.SetUnit(5, 5*1000, Headroom+1500)
		cut.size[p] = 1000
		p.Arrival = now + int64(i)
		pl.Enqueue(p, p.Arrival)
	}
	sched := &fifoScheduler{}
	if err := pl.Replace([]ClassSpec{{Name: DefaultClass, Spec: mustParse(t, "")}}, nil, sched, now+msec); err != nil {
		t.Fatal(err)
	}
	out := pl.Dequeue(now+20*msec, nil)
	if sched.sawUnit {
		t.Fatal("the scheduler was handed a unit")
	}
	segs := 0
	for _, p := range out {
		segs += p.Segments()
	}
	if segs != 20 || len(out) != 20 {
		t.Fatalf("%d packets holding %d segments left, want the 20 segments one by one", len(out), segs)
	}
	if snap := pl.Snapshot(); snap.Totals.PacketsOut != 20 || snap.Totals.QueuePackets != 0 {
		t.Fatalf("totals %d out, %d queued; want 20 and 0", snap.Totals.PacketsOut, snap.Totals.QueuePackets)
	}
}
