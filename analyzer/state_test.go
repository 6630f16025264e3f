package analyzer

import (
	"math/rand/v2"
	"testing"

	"github.com/wanlab/wanlab/analyzer/decode"
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

// TestDupFingerprint checks that packets differing in any one field that
// identifies them get different fingerprints, and that IPv6 packets and
// IPv4 packets without an ID get none.
func TestDupFingerprint(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		p := decode.Packet{IPVersion: 4, Src: [16]byte{byte(rng.Uint32()), 1, 2, 3}, Dst: [16]byte{10, 0, 0, byte(rng.Uint32())},
			SrcPort: uint16(rng.Uint32()), DstPort: 80, Seq: rng.Uint32(), Ack: rng.Uint32(), PayloadLen: rng.IntN(65536),
			IPID: uint16(rng.Uint32()) | 1, Flags: uint8(rng.Uint32())}
		base := dupFingerprint(&p)
		if base == 0 {
			t.Fatalf("no fingerprint for %+v", p)
		}
		for i, mod := range []func(*decode.Packet){
			func(p *decode.Packet) { p.Src[3]++ }, func(p *decode.Packet) { p.Src[0]++ }, func(p *decode.Packet) { p.Dst[0]++ },
			func(p *decode.Packet) { p.Dst[3]++ }, func(p *decode.Packet) { p.SrcPort++ }, func(p *decode.Packet) { p.DstPort++ },
			func(p *decode.Packet) { p.Seq++ }, func(p *decode.Packet) { p.Ack++ }, func(p *decode.Packet) { p.PayloadLen++ },
			func(p *decode.Packet) { p.IPID += 2 },
			func(p *decode.Packet) { p.Flags ^= 0x10 },
		} {
			m := p
			mod(&m)
			if dupFingerprint(&m) == base {
				t.Fatalf("field %d changed, fingerprint the same: %+v %+v", i, p, m)
			}
		}
	}
	v6 := decode.Packet{IPVersion: 6, IPID: 0, SrcPort: 1, DstPort: 2}
	noID := decode.Packet{IPVersion: 4, IPID: 0, SrcPort: 1, DstPort: 2}
	if dupFingerprint(&v6) != 0 || dupFingerprint(&noID) != 0 {
		t.Error("IPv6 or an IPv4 ID of 0 got a fingerprint")
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
