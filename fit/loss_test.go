package fit

import (
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/analyzer/decode"
)

// TestSpuriousResendsAreNoLoss: near the sender, a re-send the receiver
// reports as a duplicate (a D-SACK below its cumulative ACK: the send
// before it arrived, the ACK came late) is no loss; a re-send it does
// not report is one. So is a re-send of data already acknowledged when
// it left (the analyzer's spurious retransmission).
func TestSpuriousResendsAreNoLoss(t *testing.T) {
	const mss = 1000
	ms := time.Millisecond
	f := &flow{mss: mss, base: 20 * ms, isn: 1}
	data := func(i int, at time.Duration, fl analyzer.PacketFlags) record {
		return record{t: at, seq: uint32(1 + i*mss), payload: mss, aflags: fl, karn: -1, inflight: -1}
	}
	for i := range 20 {
		f.data = append(f.data, data(i, time.Duration(i)*ms, 0))
	}
	f.data = append(f.data,
		data(5, 40*ms, analyzer.Retransmission),         // an RTO's re-send: the ACK was late
		data(10, 45*ms, analyzer.FastRetransmission),    // a real loss
		data(2, 50*ms, analyzer.SpuriousRetransmission)) // already acknowledged
	ack := func(at time.Duration, upto int, sack ...decode.SACKBlock) record {
		r := record{t: at, ack: uint32(1 + upto*mss), flags: decode.FlagACK, karn: -1, nsack: len(sack)}
		copy(r.sack[:], sack)
		return r
	}
	f.acks = []record{
		ack(30*ms, 10),
		ack(60*ms, 10, decode.SACKBlock{Left: 1 + 5*mss, Right: 1 + 6*mss}, decode.SACKBlock{Left: 1 + 11*mss, Right: 1 + 20*mss}),
		ack(70*ms, 20),
	}
	runs, sent, _ := f.losses("sender")
	if len(runs) != 1 || runs[0].segs != 1 || sent != 21 {
		t.Errorf("runs %+v, %d sent: want the one real loss (segment 10) of 21 segments", runs, sent)
	}
	if n := len(f.dsacks()); n != 1 {
		t.Errorf("%d D-SACKs, want 1", n)
	}
	if del := f.delivered(); len(del) == 0 || del[len(del)-1].v != 20*mss {
		t.Errorf("delivered %v, want %d at the end", del, 20*mss)
	}
}
