package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wanlab/wanlab/tc/spec"
)

// fingerprint hashes every decision of a run: order, departure, flags and
// the bytes of each packet that left, plus the drop counters.
func fingerprint(t *testing.T, s string, seed uint64) [32]byte {
	pl, err := NewPipeline(mustParse(t, s), Options{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	var buf [8]byte
	put := func(v uint64) { binary.LittleEndian.PutUint64(buf[:], v); h.Write(buf[:]) }
	tmpl := udpPacket(700)
	var out []*Packet
	for i := 0; i < 50000; i++ {
		now := int64(1e9) + int64(i)*20000
		out = pl.Dequeue(now, out[:0])
		for _, p := range out {
			put(p.Seq)
			put(uint64(p.Depart))
			put(uint64(p.Flags))
			h.Write(p.Data)
		}
		pl.Enqueue(&Packet{Data: append([]byte(nil), tmpl...), Arrival: now}, now)
	}
	out = pl.Dequeue(math.MaxInt64, out[:0])
	for _, p := range out {
		put(p.Seq)
		put(uint64(p.Depart))
	}
	d := pl.Snapshot().Totals.Drops
	put(d.Loss)
	put(d.Queue)
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

func TestDeterminism(t *testing.T) {
	const s = "delay 20ms 10ms 30% distribution paretonormal loss gemodel 2% 30% 70% 0.5% ecn duplicate 2% 10% " +
		"corrupt 1% reorder 5% 20% gap 3 slot 1ms 3ms packets 20 | tbf rate 200mbit burst 30kb limit 300kb peakrate 400mbit mtu 2000"
	a, b := fingerprint(t, s, 7), fingerprint(t, s, 7)
	if a != b {
		t.Fatal("same seed, same traffic: runs differ")
	}
	if c := fingerprint(t, s, 8); c == a {
		t.Fatal("different seeds gave identical runs")
	}
	// "seed N" in the spec overrides the pipeline seed for that stage.
	const seeded = "delay 20ms 10ms loss 5% seed 99"
	if fingerprint(t, seeded, 1) != fingerprint(t, seeded, 2) {
		t.Error("a stage with its own seed must not depend on the pipeline seed")
	}
}

func TestSwapKeepsInFlight(t *testing.T) {
	pl := newPL(t, "delay 100ms")
	var out []*Packet
	for i := int64(0); i < 10; i++ {
		now := 1000*msec + i*msec
		pl.Enqueue(&Packet{Data: udpPacket(100), Arrival: now}, now)
	}
	if err := pl.Swap(mustParse(t, "delay 10ms | tbf rate 1gbit burst 10kb limit 100kb"), 1010*msec); err != nil {
		t.Fatal(err)
	}
	for i := int64(10); i < 20; i++ {
		now := 1000*msec + i*msec
		out = pl.Dequeue(now, out)
		pl.Enqueue(&Packet{Data: udpPacket(100), Arrival: now}, now)
	}
	out = pl.Dequeue(math.MaxInt64, out)
	if len(out) != 20 {
		t.Fatalf("%d packets out, want 20: a swap must not lose packets", len(out))
	}
	for _, p := range out {
		want := int64(100 * msec)
		if p.Seq > 10 {
			want = 10 * msec
		}
		if d := p.Depart - p.Arrival; d != want {
			t.Errorf("packet %d delayed %d ns, want %d", p.Seq, d, want)
		}
	}
	// New packets (10 ms) overtake the old ones (100 ms), as after
	// `tc qdisc change`: the output is still in departure order.
	for i := 1; i < len(out); i++ {
		if out[i].Depart < out[i-1].Depart {
			t.Fatal("output not in departure order")
		}
	}
	snap := pl.Snapshot()
	if snap.Swaps != 1 || snap.Classes[0].Spec != "delay 10ms | tbf rate 1gbit burst 10kb limit 100kb" {
		t.Errorf("snapshot after swap: swaps %d spec %q", snap.Swaps, snap.Classes[0].Spec)
	}
	if snap.Totals.PacketsIn != 20 || snap.Totals.PacketsOut != 20 || snap.Totals.QueuePackets != 0 {
		t.Errorf("totals %+v", snap.Totals)
	}
	if n := len(pl.classes[0].retiring); n != 0 {
		t.Errorf("%d drained chains still kept", n)
	}
	// A spec the engine cannot run is refused and the running one kept.
	bad := &spec.Spec{Stages: []spec.Stage{&spec.TBF{}}}
	if err := pl.Swap(bad, 2000*msec); !errors.Is(err, ErrBadSpec) {
		t.Errorf("swap to a tbf without rate: %v, want ErrBadSpec", err)
	}
	if got := pl.Snapshot().Classes[0].Spec; got != "delay 10ms | tbf rate 1gbit burst 10kb limit 100kb" {
		t.Errorf("spec after refused swap: %q", got)
	}
}

// portClassifier sends UDP/TCP packets to destination port 9 to class 1.
type portClassifier struct{}

func (portClassifier) Classify(b []byte) int {
	if len(b) >= 24 && b[0]>>4 == 4 {
		ihl := int(b[0]&0xf) * 4
		if len(b) >= ihl+4 && uint16(b[ihl+2])<<8|uint16(b[ihl+3]) == 9 {
			return 1
		}
	}
	return 0
}

func TestClasses(t *testing.T) {
	pl, err := NewPipeline(nil, Options{
		Classes: []ClassSpec{
			{Name: "default", Spec: mustParse(t, "")},
			{Name: "port9", Spec: mustParse(t, "delay 50ms")},
		},
		Classifier: portClassifier{},
	})
	if err != nil {
		t.Fatal(err)
	}
	to9 := udpPacket(100)
	other := udpPacket(100)
	other[23] = 53
	var out []*Packet
	for i := int64(0); i < 10; i++ {
		now := 1000*msec + i*msec
		pl.Enqueue(&Packet{Data: append([]byte(nil), to9...), Arrival: now}, now)
		pl.Enqueue(&Packet{Data: append([]byte(nil), other...), Arrival: now}, now)
	}
	out = pl.Dequeue(math.MaxInt64, out)
	for _, p := range out {
		want := int64(0)
		if p.Data[23] == 9 {
			want = 50 * msec
		}
		if p.Depart-p.Arrival != want {
			t.Errorf("packet %d to port %d delayed %d", p.Seq, p.Data[23], p.Depart-p.Arrival)
		}
	}
	snap := pl.Snapshot()
	if len(snap.Classes) != 2 || snap.Classes[1].Totals.PacketsOut != 10 || snap.Classes[0].Totals.PacketsOut != 10 {
		t.Errorf("class snapshots %+v", snap.Classes)
	}
	if err := pl.SwapClass(1, mustParse(t, "delay 5ms"), 2000*msec); err != nil {
		t.Fatal(err)
	}
	if err := pl.SwapClass(2, nil, 0); err == nil {
		t.Error("SwapClass(2) on two classes succeeded")
	}
}

// TestCountersConserve checks in = out + drops + queued at every step and
// per stage.
func TestCountersConserve(t *testing.T) {
	pl := newPL(t, "delay 10ms 5ms loss 5% duplicate 5% limit 50 | tbf rate 10mbit burst 5kb limit 20kb")
	var out []*Packet
	check := func() {
		s := pl.Snapshot()
		c := s.Totals
		if c.PacketsIn != c.PacketsOut+c.Drops.Total()+c.QueuePackets {
			t.Fatalf("totals: in %d != out %d + drops %d + queued %d", c.PacketsIn, c.PacketsOut, c.Drops.Total(), c.QueuePackets)
		}
		for _, st := range s.Classes[0].Stages {
			if st.PacketsIn != st.PacketsOut+st.Drops.Total()+st.QueuePackets {
				t.Fatalf("%s: in %d != out %d + drops %d + queued %d", st.Kind, st.PacketsIn, st.PacketsOut, st.Drops.Total(), st.QueuePackets)
			}
		}
	}
	for i := int64(0); i < 20000; i++ {
		now := 1000*msec + i*200e3
		out = pl.Dequeue(now, out[:0])
		pl.Enqueue(&Packet{Data: udpPacket(1000), Arrival: now}, now)
		if i%97 == 0 {
			check()
		}
	}
	pl.Dequeue(math.MaxInt64, out[:0])
	check()
	s := pl.Snapshot()
	if s.Totals.QueuePackets != 0 || s.Totals.Drops.Queue == 0 || s.Totals.Drops.Loss == 0 {
		t.Errorf("final totals %+v", s.Totals)
	}
	var n uint64
	for _, c := range s.Totals.Sojourn.Counts {
		n += c
	}
	if n != s.Totals.PacketsOut || s.Totals.Sojourn.Count != n {
		t.Errorf("sojourn histogram holds %d samples, %d packets left", n, s.Totals.PacketsOut)
	}
}

// TestConcurrentReaderAndRelease runs the proxy's goroutine layout: one
// reader enqueueing, one release loop dequeueing, a stats reader, and a
// swap, on a shared virtual clock (run with -race).
func TestConcurrentReaderAndRelease(t *testing.T) {
	pool := NewPool(0)
	pl, err := NewPipeline(mustParse(t, "delay 1ms 500us loss 1% | tbf rate 1gbit burst 64kb limit 1mb"), Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64
	clock.Store(1e9)
	const n = 20000
	var wg sync.WaitGroup
	var readerDone atomic.Bool
	var received atomic.Int64
	wg.Add(3)
	go func() { // reader
		defer wg.Done()
		for i := 0; i < n; i++ {
			now := clock.Add(10000)
			p := pool.Get()
			p.SetLen(200)
			copy(p.Data, udpPacket(200))
			p.Arrival = now
			pl.Enqueue(p, now)
			if i == n/2 {
				if err := pl.Swap(mustParse(t, "delay 2ms"), now); err != nil {
					t.Error(err)
				}
			}
		}
		readerDone.Store(true)
	}()
	go func() { // release loop
		defer wg.Done()
		batch := make([]*Packet, 0, 128)
		for {
			done := readerDone.Load()
			now := clock.Load()
			if done {
				now = math.MaxInt64
			}
			batch = pl.Dequeue(now, batch[:0])
			for _, p := range batch {
				received.Add(1)
				pool.Put(p)
			}
			if _, ok := pl.NextDeparture(); done && !ok {
				return
			}
		}
	}()
	go func() { // stats
		defer wg.Done()
		for !readerDone.Load() {
			_ = pl.Snapshot()
		}
	}()
	wg.Wait()
	s := pl.Snapshot().Totals
	if got := uint64(received.Load()); got != s.PacketsOut || s.PacketsIn != n || s.PacketsOut+s.Drops.Total() != n {
		t.Errorf("received %d, totals %+v", got, s)
	}
}
