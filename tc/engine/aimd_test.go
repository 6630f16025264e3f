package engine

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// aimdResult is what a run of AIMD flows through a pipeline measured,
// over its second half.
type aimdResult struct {
	meanQueueMs, p50QueueMs float64
	utilization             float64
	drops, marks            int
}

// runAIMD drives flows TCP-like sources (additive increase of one packet
// per window, halving at most once per round trip on a loss or an ECN
// mark, which they learn an RTT later, as from duplicate ACKs) through the
// pipeline for s on the virtual clock, with a base round trip of rtt
// outside the pipeline, for dur seconds of a bottleneck of rateBps. The
// queueing delay is each packet's departure minus arrival (its own
// transmission time included).
func runAIMD(t *testing.T, s string, flows int, rateBps float64, rtt int64, dur float64) aimdResult {
	t.Helper()
	type flow struct {
		cwnd     float64
		inflight int
		lastCut  int64
	}
	fs := make([]flow, flows)
	for i := range fs {
		fs[i].cwnd = 2
	}
	type event struct {
		at   int64
		flow int
		lost bool
		mark bool
	}
	var acks, losses []event // both in time order
	var now int64 = 1e9
	var res aimdResult
	pl, err := NewPipeline(mustParse(t, s), Options{Seed: 1, OnDrop: func(p *Packet, _ DropReason) {
		losses = append(losses, event{at: now + rtt, flow: int(p.Data[21]), lost: true})
	}})
	if err != nil {
		t.Fatal(err)
	}
	pool := NewPool(Headroom + 1500)
	tmpl := udpPacket(1500)
	end := now + int64(dur*1e9)
	half := now + int64(dur*1e9/2)
	var delays []float64
	var bytesHalf float64
	send := func(i int) {
		for fs[i].inflight < int(fs[i].cwnd) {
			p := pool.Get()
			p.SetLen(1500)
			copy(p.Data, tmpl)
			p.Data[21] = byte(i) // source port: one flow each
			p.Arrival = now
			pl.Enqueue(p, now)
			fs[i].inflight++
		}
	}
	congestion := func(i int) {
		if now-fs[i].lastCut > rtt+int64(meanOr(delays, 0)*1e6) {
			fs[i].cwnd = math.Max(fs[i].cwnd/2, 2)
			fs[i].lastCut = now
		}
	}
	for i := range fs {
		send(i)
	}
	var batch []*Packet
	for now < end {
		next := int64(math.MaxInt64)
		if d, ok := pl.NextDeparture(); ok {
			next = d
		}
		if len(acks) > 0 {
			next = min(next, acks[0].at)
		}
		if len(losses) > 0 {
			next = min(next, losses[0].at)
		}
		now = max(now, next)
		batch = pl.Dequeue(now, batch[:0])
		for _, p := range batch {
			acks = append(acks, event{at: p.Depart + rtt, flow: int(p.Data[21]), mark: p.Flags&FlagECNMarked != 0})
			if p.Depart >= half {
				delays = append(delays, float64(p.Depart-p.Arrival)/1e6)
				bytesHalf += 1500
				if p.Flags&FlagECNMarked != 0 {
					res.marks++
				}
			}
			pool.Put(p)
		}
		for len(acks) > 0 && acks[0].at <= now {
			e := acks[0]
			acks = acks[1:]
			f := &fs[e.flow]
			f.inflight--
			if e.mark {
				congestion(e.flow)
			} else {
				f.cwnd += 1 / f.cwnd
			}
			send(e.flow)
		}
		for len(losses) > 0 && losses[0].at <= now {
			e := losses[0]
			losses = losses[1:]
			fs[e.flow].inflight--
			if e.at >= half {
				res.drops++
			}
			congestion(e.flow)
			send(e.flow)
		}
	}
	res.meanQueueMs = meanOr(delays, 0)
	slices.Sort(delays)
	if len(delays) > 0 {
		res.p50QueueMs = delays[len(delays)/2]
	}
	res.utilization = bytesHalf * 8 / (dur / 2) / rateBps
	return res
}

func meanOr(v []float64, def float64) float64 {
	if len(v) == 0 {
		return def
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// TestAIMDStandingQueue: TCP-like flows through a 10 Mbit/s bottleneck
// with a 1 MB buffer fill it with tail drop (a standing queue of hundreds
// of ms: bufferbloat), while codel and fq_codel keep it near their 5 ms
// target (within 3 times) and the link busy. (With a 20 ms round trip, 4
// flows of 2-4 packets each sit at twice the target: the bandwidth-delay
// product is 17 packets; so the 4-flow cases use 50 ms.)
func TestAIMDStandingQueue(t *testing.T) {
	const rate = 10e6
	const rtt = int64(20e6)
	fifo := runAIMD(t, "tbf rate 10mbit burst 10kb limit 1mb", 1, rate, rtt, 60)
	t.Logf("tail drop: %+v", fifo)
	if fifo.meanQueueMs < 200 {
		t.Errorf("tail drop: mean queueing delay %.1f ms, want the buffer's hundreds of ms", fifo.meanQueueMs)
	}
	for _, c := range []struct {
		spec  string
		flows int
		rtt   int64
	}{
		{"tbf rate 10mbit burst 10kb limit 1mb | codel", 1, rtt},
		{"tbf rate 10mbit burst 10kb limit 1mb | codel", 4, 50e6},
		{"tbf rate 10mbit burst 10kb limit 1mb | fq_codel", 1, rtt},
		{"tbf rate 10mbit burst 10kb limit 1mb | fq_codel", 4, 50e6},
		{"tbf rate 10mbit burst 10kb limit 1mb | fq_codel noecn", 4, 50e6},
	} {
		r := runAIMD(t, c.spec, c.flows, rate, c.rtt, 60)
		t.Logf("%s, %d flows, rtt %d ms: %+v", c.spec, c.flows, c.rtt/1e6, r)
		name := fmt.Sprintf("%s, %d flows", c.spec, c.flows)
		if r.meanQueueMs > 15 || r.p50QueueMs > 15 {
			t.Errorf("%s: queueing delay mean %.1f ms, median %.1f ms: want near the 5 ms target", name, r.meanQueueMs, r.p50QueueMs)
		}
		if r.utilization < 0.9 {
			t.Errorf("%s: link %.0f%% busy", name, 100*r.utilization)
		}
		if r.drops+r.marks == 0 {
			t.Errorf("%s: no drops or marks: nothing controlled the flows", name)
		}
	}
}
