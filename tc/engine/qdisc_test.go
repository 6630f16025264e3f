package engine

import (
	"math"
	"testing"
)

// TestTBFWithFIFOChildIsTBF checks the child-qdisc path against tbf's own
// FIFO: "tbf ... | bfifo limit L" queues and shapes as "tbf ... limit L",
// every departure within a microsecond, the same packets dropped.
func TestTBFWithFIFOChildIsTBF(t *testing.T) {
	for _, c := range []struct{ plain, child string }{
		{"tbf rate 10mbit burst 10kb limit 100kb", "tbf rate 10mbit burst 10kb limit 1mb | bfifo limit 100kb"},
		{"delay 10ms | tbf rate 1mbit burst 3kb limit 30kb peakrate 2mbit mtu 1600", "delay 10ms | tbf rate 1mbit burst 3kb limit 5kb peakrate 2mbit mtu 1600 | bfifo limit 30kb"},
	} {
		a, pa := run(t, c.plain, 20000, 2000, 1200, 1)
		b, pb := run(t, c.child, 20000, 2000, 1200, 1)
		if len(a) != len(b) {
			t.Fatalf("%s: %d packets out, %s: %d", c.plain, len(a), c.child, len(b))
		}
		for i := range a {
			if a[i].Seq != b[i].Seq || math.Abs(float64(a[i].Depart-b[i].Depart)) > 1000 {
				t.Fatalf("packet %d: %s departs %+v, %s %+v", i, c.plain, a[i], c.child, b[i])
			}
		}
		sa, sb := pa.Snapshot(), pb.Snapshot()
		if sa.Totals.Drops != sb.Totals.Drops {
			t.Errorf("drops %+v vs %+v", sa.Totals.Drops, sb.Totals.Drops)
		}
		st := sb.Classes[0].Stages
		if got := st[len(st)-1]; got.Kind != "bfifo" || got.Drops.Queue != sb.Totals.Drops.Queue || got.PacketsOut != uint64(len(b)) {
			t.Errorf("child stage %+v, totals %+v", got, sb.Totals)
		}
	}
}

// TestQueueStageAlonePassesThrough checks a queue discipline without a
// shaper in front: it never holds a packet past the instant it arrived.
func TestQueueStageAlonePassesThrough(t *testing.T) {
	out, pl := run(t, "delay 20ms | pfifo limit 2", 5000, 10000, 1000, 1)
	if len(out) != 5000 {
		t.Fatalf("%d of 5000 packets left", len(out))
	}
	for _, p := range out {
		if p.Depart-p.Arrival != 20e6 {
			t.Fatalf("packet %+v: delay %d ns, want 20ms", p, p.Depart-p.Arrival)
		}
	}
	if d := pl.Snapshot().Totals.Drops.Total(); d != 0 {
		t.Errorf("%d drops", d)
	}
}
