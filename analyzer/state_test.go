package analyzer

import (
	"math/rand/v2"
	"testing"
)

// TestTSRingStartsSmall checks that the ring starting at tsRingFirst
// entries answers every lookup as one allocated at tsRingMin does (what
// the ring was before it started small), over random sends and echoes.
func TestTSRingStartsSmall(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for run := 0; run < 200; run++ {
		var small tsRing
		big := tsRing{vals: make([]uint32, tsRingMin), times: make([]int64, tsRingMin)}
		v := rng.Uint32()
		var sent []uint32
		for step := 0; step < 3000; step++ {
			if rng.IntN(3) > 0 {
				v += uint32(rng.IntN(3))
				ts := int64(step)
				small.sent(v, ts)
				big.sent(v, ts)
				sent = append(sent, v)
				continue
			}
			if len(sent) == 0 {
				continue
			}
			back := rng.IntN(min(len(sent), 1+rng.IntN(200)))
			e := sent[len(sent)-1-back]
			if rng.IntN(10) == 0 {
				e -= 1000 // never sent
			}
			t1, ok1 := small.lookup(e)
			t2, ok2 := big.lookup(e)
			if t1 != t2 || ok1 != ok2 {
				t.Fatalf("run %d step %d: lookup(%d) = %d, %v; the ring of %d answers %d, %v", run, step, e, t1, ok1, tsRingMin, t2, ok2)
			}
		}
		if len(small.vals) != len(big.vals) && len(big.vals) > tsRingMin {
			t.Fatalf("run %d: %d entries, the ring of %d grew to %d", run, len(small.vals), tsRingMin, len(big.vals))
		}
	}
	var r tsRing
	for i := range 5 {
		r.sent(uint32(i+1), int64(i))
	}
	if len(r.vals) != tsRingFirst {
		t.Errorf("5 values in %d entries, want %d", len(r.vals), tsRingFirst)
	}
}

// TestDupFingerprint checks that packets differing in any one field of
// their key get different fingerprints.
func TestDupFingerprint(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		k := dupKey{src: [4]byte{byte(rng.Uint32()), 1, 2, 3}, dst: [4]byte{10, 0, 0, byte(rng.Uint32())},
			sport: uint16(rng.Uint32()), dport: 80, seq: rng.Uint32(), ack: rng.Uint32(), payload: rng.IntN(65536),
			id: uint16(rng.Uint32()), flags: uint8(rng.Uint32())}
		base := k.fingerprint()
		for i, mod := range []func(*dupKey){
			func(k *dupKey) { k.src[3]++ }, func(k *dupKey) { k.dst[0]++ }, func(k *dupKey) { k.sport++ },
			func(k *dupKey) { k.dport++ }, func(k *dupKey) { k.seq++ }, func(k *dupKey) { k.ack++ },
			func(k *dupKey) { k.payload++ }, func(k *dupKey) { k.id++ }, func(k *dupKey) { k.flags ^= 0x10 },
		} {
			m := k
			mod(&m)
			if m.fingerprint() == base {
				t.Fatalf("field %d changed, fingerprint the same: %+v %+v", i, k, m)
			}
		}
	}
}

// TestUntrackedSegmentsReported checks that the segments the RTT queue
// could not track reach the summary (rtt_untracked_segments), whether the
// connection is retired during the capture, reset, or open at its end.
func TestUntrackedSegmentsReported(t *testing.T) {
	for _, how := range []string{"retired", "reset", "end"} {
		a := New(Options{})
		c := &Connection{dirs: new([2]dirAnalysis)}
		c.dirs[1].q.overflow = 3
		switch how {
		case "retired":
			a.retire(c)
		case "reset":
			c.release()
			c.finish(a)
		case "end":
			a.live = append(a.live, c)
			a.Finish()
		}
		if got := c.Directions[1].RTTTrackOverflow; got != 3 {
			t.Errorf("%s: rtt_untracked_segments %d, want 3", how, got)
		}
	}
}
