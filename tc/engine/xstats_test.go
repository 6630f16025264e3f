package engine

import (
	"testing"

	"github.com/wanlab/wanlab/tc/spec"
)

// overload feeds q unresponsive 1500-byte packets at 1.5 times the rate
// it is served at for 20 s and returns how many it offered.
func overload(q Qdisc, env *recEnv) int {
	const service, interarrival = int64(1.2e6), int64(0.8e6)
	nextArr, nextSrv := int64(1e9), int64(1e9)
	arrivals := 0
	for nextSrv < 21e9 {
		if nextArr <= nextSrv {
			env.now = nextArr
			q.Enqueue(testPacket(1500, false, 9), nextArr, env)
			arrivals++
			nextArr += interarrival
			continue
		}
		env.now = nextSrv
		q.Dequeue(nextSrv, env)
		nextSrv += service
	}
	return arrivals
}

func countReason(env *recEnv, r DropReason) uint64 {
	n := uint64(0)
	for _, x := range env.reasons {
		if x == r {
			n++
		}
	}
	return n
}

// TestXStats checks each queue discipline's xstats against what it did:
// the drops its env saw, the packets offered, the packet size.
func TestXStats(t *testing.T) {
	t.Run("codel", func(t *testing.T) {
		env := &recEnv{}
		q := newCoDel(&spec.CoDel{Limit: 200})
		overload(q, env)
		x := QdiscXStats(q, env.now).CoDel
		if x == nil || x.MaxPacket != 1500 || x.LDelayUs == 0 || x.DropOverlimit != countReason(env, DropQueue) {
			t.Fatalf("codel xstats %+v; limit drops %d, all %d", x, countReason(env, DropQueue), len(env.drops))
		}
		if countReason(env, DropAQM) == 0 || x.ECNMark != 0 {
			t.Errorf("codel dropped %d by AQM, marked %d: the overload did not show", countReason(env, DropAQM), x.ECNMark)
		}
	})
	t.Run("fq_codel", func(t *testing.T) {
		env := &recEnv{}
		q, err := NewQdisc(&spec.FQCoDel{Limit: 200}, 1, 1e9)
		if err != nil {
			t.Fatal(err)
		}
		overload(q, env)
		x := QdiscXStats(q, env.now).FQCoDel
		if x == nil || x.MaxPacket != 1500 || x.NewFlowCount == 0 || x.DropOverlimit != countReason(env, DropQueue) || x.NewFlowsLen+x.OldFlowsLen != 1 {
			t.Fatalf("fq_codel xstats %+v; limit drops %d, all %d", x, countReason(env, DropQueue), len(env.drops))
		}
	})
	t.Run("pie", func(t *testing.T) {
		env := &recEnv{}
		q := newPIE(&spec.PIE{}, 7, 1e9)
		offered := overload(q, env)
		x := QdiscXStats(q, env.now).PIE
		if x == nil || x.Dropped != uint64(len(env.drops)) || x.Prob <= 0 || x.Prob > 1 || x.DelayUs == 0 {
			t.Fatalf("pie xstats %+v; drops %d", x, len(env.drops))
		}
		// packets_in counts what entered the queue, as the kernel's does.
		if x.PacketsIn == 0 || x.PacketsIn > uint64(offered) {
			t.Errorf("pie packets_in %d of %d offered", x.PacketsIn, offered)
		}
	})
	t.Run("red", func(t *testing.T) {
		env := &recEnv{}
		q := newRED(&spec.RED{Limit: 400000, Min: 30000, Max: 90000, Avpkt: 1000, Burst: 55}, 3, 1e9)
		overload(q, env)
		x := QdiscXStats(q, env.now).RED
		if x == nil || x.Early+x.PDrop != uint64(len(env.drops)) || x.Early == 0 || x.Marked != 0 {
			t.Fatalf("red xstats %+v; drops %d", x, len(env.drops))
		}
	})
	t.Run("pfifo", func(t *testing.T) {
		q, err := NewQdisc(&spec.PFIFO{Limit: 10}, 1, 1e9)
		if err != nil {
			t.Fatal(err)
		}
		if x := QdiscXStats(q, 1e9); x != nil {
			t.Errorf("pfifo has xstats %+v", x)
		}
	})
}

// TestSnapshotXStats: a pipeline's snapshot carries its queue
// disciplines' xstats, as a stage of their own and as a shaper's child.
func TestSnapshotXStats(t *testing.T) {
	pl, err := NewPipeline(mustParse(t, "tbf rate 10mbit burst 3kb limit 1mb | codel"), Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	now := int64(1e9)
	for i := 0; i < 100; i++ {
		p := testPacket(1500, false, 1)
		p.Arrival = now
		pl.Enqueue(p, now)
	}
	pl.Dequeue(now+50e6, nil)
	st := pl.Snapshot().Classes[0].Stages
	if len(st) != 2 || st[0].XStats != nil || st[1].XStats == nil || st[1].XStats.CoDel == nil || st[1].XStats.CoDel.MaxPacket != 1500 {
		t.Fatalf("stages %+v", st)
	}
}
