package fit

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/analyzer/decode"
)

// senderCapture builds what a capture next to a sender shows of a bulk
// transfer whose segments each take delay(i) to the receiver and ackLeg
// back: the sends at a fixed spacing, and a receiver that answers every
// arrival at once, with SACK blocks for what it holds above its
// cumulative ACK (the most recent first, as RFC 2018 orders them). Each
// ACK that moves the cumulative ACK carries the Karn sample of the
// highest segment it covers.
func senderCapture(n, mss int, spacing, ackLeg time.Duration, delay func(i int) time.Duration) *flow {
	f := &flow{dir: 1, mss: mss, isn: 1, st: &analyzer.Direction{}}
	for i := range n {
		f.data = append(f.data, record{t: time.Duration(i) * spacing, seq: uint32(1 + i*mss), payload: mss, karn: -1, inflight: -1})
	}
	rcv := receiverOf(n)
	for _, a := range arrivals(n, spacing, delay) {
		karn := time.Duration(-1)
		if rcv.arrive(a.i) {
			karn = a.t + ackLeg - f.data[rcv.cum-1].t
		}
		ack := record{t: a.t + ackLeg, dir: 0, ack: uint32(1 + rcv.cum*mss), flags: decode.FlagACK, karn: karn, inflight: -1}
		// The block holding this arrival first, then the others above
		// the cumulative ACK, lowest first.
		blocks := rcv.heldAbove()
		for i, b := range blocks {
			if a.i >= b[0] && a.i < b[1] {
				blocks = append(append([][2]int{b}, blocks[:i]...), blocks[i+1:]...)
				break
			}
		}
		sackThree(&ack, blocks, mss)
		f.acks = append(f.acks, ack)
	}
	return f
}

// Near the sender a jitter's early segments come back by their SACKs:
// the round trip is the lowest of those, and their spread (with the late
// ones' cumulative ACKs) is the jitter. A reordering's few sent ahead of
// the delay line stand apart below, and neither lower the round trip nor
// make a jitter.
func TestSACKTimesTheEarlySegments(t *testing.T) {
	const n, mss = 6000, 1448
	ms := time.Millisecond
	spacing := 50 * time.Microsecond // 230 Mbit/s
	t.Run("jitter", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 8))
		f := senderCapture(n, mss, spacing, 10*ms, func(int) time.Duration {
			return 10*ms + time.Duration((rng.Float64()*2-1)*float64(2*ms))
		})
		f.rtts()
		if want := 18 * ms; f.kmin < want || f.kmin > want+want/50 {
			t.Errorf("round trip %v, want 18 ms (the delays' sum less the jitter) within 2 %%", f.kmin)
		}
		p, ok := f.coverJitter(1)
		if !ok || !p.Known() || p.Value < 1.7 || p.Value > 2.3 || p.Low > 2 || p.High < 2 {
			t.Errorf("jitter %+v (measured %v), want 2 ms within 15 %% and its interval", p, ok)
		}
	})
	t.Run("reorder", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(9, 10))
		f := senderCapture(n, mss, spacing, 10*ms, func(int) time.Duration {
			if rng.Float64() < 0.01 {
				return 0 // sent ahead of the delay line
			}
			return 10 * ms
		})
		f.rtts()
		// Nor the cumulative ACK that fills the hole an overtaker
		// left: Karn's sample times the overtaker, which left later.
		if f.kmin < 20*ms {
			t.Errorf("round trip %v, want 20 ms: the segments sent ahead are no round trip", f.kmin)
		}
		if p, ok := f.coverJitter(1); ok && p.Known() && p.Value > 0 {
			t.Errorf("jitter %+v claimed for a reordering", p)
		}
	})
}

// TestCoversPerRecordBeyondTheBound: a capture of more wire segments than
// twice the records a fit holds is timed per record, not per segment.
func TestCoversPerRecordBeyondTheBound(t *testing.T) {
	const mss = 100 // small, that the sequence space holds it
	f := &flow{mss: mss, isn: 1}
	big := (maxCoverSegments/1000 + 1) * mss // a thousand records of this make more segments than the bound
	for i := range 1000 {
		f.data = append(f.data, record{t: time.Duration(i) * time.Millisecond, seq: uint32(1 + i*big), payload: big, karn: -1, inflight: -1})
	}
	f.acks = append(f.acks, record{t: 2 * time.Second, ack: uint32(1 + 1000*big), flags: decode.FlagACK, karn: -1})
	if n := len(f.covers()); n != 1000 {
		t.Errorf("%d covers, want one per record (1000)", n)
	}
	f.data = f.data[:10] // 10 records: each one's segments
	f.acks[0].ack = uint32(1 + 10*big)
	if n := len(f.covers()); n != 10*big/mss {
		t.Errorf("%d covers, want one per segment (%d)", n, 10*big/mss)
	}
}

// arrival is segment i reaching the receiver at t.
type arrival struct {
	i int
	t time.Duration
}

// arrivals are n segments sent every spacing, each taking delay(i), in
// the order they arrive.
func arrivals(n int, spacing time.Duration, delay func(i int) time.Duration) []arrival {
	arr := make([]arrival, n)
	for i := range n {
		arr[i] = arrival{i, time.Duration(i)*spacing + delay(i)}
	}
	slices.SortStableFunc(arr, func(a, b arrival) int { return cmp.Compare(a.t, b.t) })
	return arr
}

// synthReceiver is what a receiver holds: the segments arrived, and how
// many lie below its cumulative ACK.
type synthReceiver struct {
	got []bool
	cum int
}

func receiverOf(n int) *synthReceiver { return &synthReceiver{got: make([]bool, n)} }

// arrive takes segment i and says whether it moved the cumulative ACK.
func (r *synthReceiver) arrive(i int) bool {
	r.got[i] = true
	if i != r.cum {
		return false
	}
	for r.cum < len(r.got) && r.got[r.cum] {
		r.cum++
	}
	return true
}

// heldAbove are the runs of segments held above the cumulative ACK
// (segment indices, end exclusive), lowest first.
func (r *synthReceiver) heldAbove() [][2]int {
	var out [][2]int
	for j := r.cum; j < len(r.got); {
		if !r.got[j] {
			j++
			continue
		}
		k := j
		for k < len(r.got) && r.got[k] {
			k++
		}
		out = append(out, [2]int{j, k})
		j = k
	}
	return out
}

// sackThree puts the first three of blocks in an ACK, as SACK blocks.
func sackThree(ack *record, blocks [][2]int, mss int) {
	for _, b := range blocks[:min(len(blocks), 3)] {
		ack.sack[ack.nsack] = decode.SACKBlock{Left: uint32(1 + b[0]*mss), Right: uint32(1 + b[1]*mss)}
		ack.nsack++
	}
}

// receiverCapture builds what a capture next to a receiver shows of a
// bulk transfer sent every spacing, each segment taking delay(i) to the
// receiver and ackLeg back: a receiver that ACKs every arrival at once
// (TSval ticking each millisecond, SACK blocks above its cumulative
// ACK), and a sender whose segments echo the newest TSval it had.
func receiverCapture(n, mss int, spacing, ackLeg time.Duration, delay func(i int) time.Duration) *flow {
	f := &flow{dir: 1, mss: mss, isn: 1, st: &analyzer.Direction{}}
	arr := arrivals(n, spacing, delay)
	tsval := func(t time.Duration) uint32 { return uint32(1000 + t/time.Millisecond) }
	rcv := receiverOf(n)
	for _, a := range arr {
		sent := time.Duration(a.i) * spacing
		// The newest TSval at the sender: of the latest arrival an
		// ackLeg or more before the send.
		var echo uint32
		for _, b := range arr {
			if b.t+ackLeg > sent {
				break
			}
			echo = tsval(b.t)
		}
		f.data = append(f.data, record{t: a.t, seq: uint32(1 + a.i*mss), payload: mss, hasTS: echo != 0, tsval: uint32(sent / time.Millisecond), tsecr: echo, karn: -1, inflight: -1})
		karn := time.Duration(-1)
		if rcv.arrive(a.i) {
			karn = 10 * time.Microsecond
		}
		ack := record{t: a.t + 10*time.Microsecond, dir: 0, ack: uint32(1 + rcv.cum*mss), flags: decode.FlagACK, hasTS: true, tsval: tsval(a.t), karn: karn, inflight: -1}
		sackThree(&ack, rcv.heldAbove(), mss)
		f.acks = append(f.acks, ack)
	}
	return f
}

// Near the receiver a jitter reorders the data, and the echoes of the
// segments that overtook others are its lowest delays, not a delay line
// skipped: the ACK-to-data leg is their minimum. A reordering's segments
// sent ahead of the delay line stay out of it.
func TestEchoesOfAJittersEarlySegments(t *testing.T) {
	const n, mss = 3000, 1448
	ms := time.Millisecond
	spacing := 100 * time.Microsecond // 116 Mbit/s
	t.Run("jitter", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(13, 14))
		f := receiverCapture(n, mss, spacing, 5*ms, func(int) time.Duration {
			return 5*ms + time.Duration((rng.Float64()*2-1)*float64(2*ms))
		})
		first := map[uint32]time.Duration{}
		for _, a := range f.acks {
			if _, ok := first[a.tsval]; !ok {
				first[a.tsval] = a.t
			}
		}
		all := f.echoes(first, nil)
		f.rtts()
		// 5 ms back, 3 ms at the least forth: the lowest of all echoes,
		// of a segment that overtook others.
		if least := minSample(all); f.emin != least || least < 8*ms || least > 8*ms+8*ms/50 {
			t.Errorf("ACK-to-data leg %v of %d echoes, want the least of all %d, %v, near 8 ms (the delays' sum less the jitter)", f.emin, len(f.echo), len(all), least)
		}
	})
	t.Run("reorder", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(15, 16))
		f := receiverCapture(n, mss, spacing, 5*ms, func(int) time.Duration {
			if rng.Float64() < 0.02 {
				return 0 // sent ahead of the delay line
			}
			return 5 * ms
		})
		f.rtts()
		if f.emin < 10*ms-ms {
			t.Errorf("ACK-to-data leg %v, want 10 ms less a tick: the segments sent ahead are no round trip", f.emin)
		}
	})
}
