package engine

import (
	"strings"
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

// TestXStatsShown: the xstats a simulation ends with are in its stages'
// JSON and printed on one tc -s style line in its text.
func TestXStatsShown(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{"tbf rate 50mbit burst 10kb limit 100kb | codel", "xstats of stage 2 (codel): count "},
		{"tbf rate 50mbit burst 10kb limit 100kb | fq_codel", "xstats of stage 2 (fq_codel): maxpacket 1500 drop_overlimit "},
		{"tbf rate 50mbit burst 10kb limit 100kb | pie", "xstats of stage 2 (pie): prob "},
		{"tbf rate 50mbit burst 10kb limit 100kb | red limit 400kb avpkt 1500 probability 0.1 min 30kb max 90kb", "xstats of stage 2 (red): marked "},
	} {
		res, err := Simulate(SimConfig{Impairment: spec.PipelineImpairment(spec.MustParse(c.spec)), Packets: 5000, PPS: 8000})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Stages) != 2 || res.Stages[1].XStats == nil || res.Stages[0].XStats != nil {
			t.Fatalf("%s: stages %+v", c.spec, res.Stages)
		}
		var b strings.Builder
		if err := res.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), c.want) || strings.Count(b.String(), "xstats of") != 1 {
			t.Errorf("%s: text lacks %q:\n%s", c.spec, c.want, b.String())
		}
	}
	if s := (*XStats)(nil).String(); s != "" {
		t.Errorf("nil xstats print %q", s)
	}
	if got := tcTime(119001); got != "119.0ms" || tcTime(42) != "42us" || tcTime(1500000) != "1.5s" {
		t.Errorf("tcTime: %s %s %s", got, tcTime(42), tcTime(1500000))
	}
}
