package fit

import (
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/analyzer/decode"
)

// ackClocked is a download through a 10 Mbit/s bottleneck next to the
// server with 10 ms each way, a window of 30 segments of 1000 bytes, the
// client ACKing every second segment 30 µs after it arrives and the
// server sending 15 µs after each ACK: what a capture at each end shows,
// with neither timestamps nor a handshake (it starts mid-stream).
func ackClocked(n int) (atServer, atClient []pkt) {
	const (
		mss  = 1000
		cwnd = 30
		isn  = 5000
	)
	us := time.Microsecond
	oneWay, serial := 10*time.Millisecond, 800*us
	sent := make([]time.Duration, n)   // the server sends
	arrive := make([]time.Duration, n) // the client receives
	acked := make([]time.Duration, n)  // the ACK covering it reaches the server
	var link time.Duration
	for i := range n {
		switch {
		case i < cwnd:
			sent[i] = time.Duration(i) * 10 * us
		default:
			j := (i - cwnd) | 1 // the ACK that opened the window for it
			sent[i] = acked[j] + 15*us
			if i%2 == 1 {
				sent[i] += 5 * us
			}
		}
		link = max(link, sent[i]) + serial
		arrive[i] = link + oneWay
		if i%2 == 1 {
			acked[i] = arrive[i] + 30*us + oneWay
			acked[i-1] = acked[i]
		}
	}
	for i := range n {
		seq := uint32(isn + i*mss)
		atServer = append(atServer, pkt{dir: 1, ack: true, seq: seq, acknum: 100, payload: mss, at: sent[i]})
		atClient = append(atClient, pkt{dir: 1, ack: true, seq: seq, acknum: 100, payload: mss, at: arrive[i]})
		if i%2 == 1 && i+1 < n {
			atServer = append(atServer, pkt{dir: 0, ack: true, seq: 100, acknum: seq + mss, at: acked[i]})
			atClient = append(atClient, pkt{dir: 0, ack: true, seq: 100, acknum: seq + mss, at: arrive[i] + 30*us})
		}
	}
	for _, ps := range [][]pkt{atServer, atClient} {
		sort.SliceStable(ps, func(a, b int) bool { return ps[a].at < ps[b].at })
	}
	return atServer, atClient
}

// TestPlacementWithoutTimestampsOrHandshake: a capture with neither
// TCP timestamps nor the handshake is placed by the ends' reactions: at
// the server new data follows each ACK at once and the data-to-ACK time
// is the round trip; at the client each ACK follows its data at once.
// Near the sender the round trip is the data-to-ACK time; near the
// receiver it is not known (that time is the receiver's delay).
func TestPlacementWithoutTimestampsOrHandshake(t *testing.T) {
	srv, cli := ackClocked(3000)
	for _, c := range []struct {
		name string
		pkts []pkt
		want string
	}{{"at the server", srv, "server"}, {"at the client", cli, "client"}} {
		f, err := File(writeCapture(t, c.pkts), Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if f.CapturedAt != c.want {
			t.Errorf("%s: captured at %q, want %q (%s)", c.name, f.CapturedAt, c.want, f.Directions[0].Params["rtt_ms"].Evidence)
		}
		rtt := f.Directions[0].Params["rtt_ms"]
		t.Logf("%s: %s%s", c.name, rtt.Evidence, rtt.Unknown)
		switch c.want {
		case "server":
			if !rtt.Known() || rtt.Value < 20 || rtt.Value > 22 {
				t.Errorf("%s: rtt %+v, want the data-to-ACK time, 20-22 ms", c.name, rtt)
			}
		case "client":
			if rtt.Known() {
				t.Errorf("%s: rtt %+v claimed from the receiver's delay", c.name, rtt)
			}
		}
	}
}

// TestHolesFilledUnsent: a hole the receiver's SACK showed that closes
// with nothing sent again is a reordering; one a retransmission filled is
// not.
func TestHolesFilledUnsent(t *testing.T) {
	const mss = 1000
	ms := time.Millisecond
	for _, resend := range []bool{false, true} {
		f := &flow{mss: mss, isn: 1}
		for i := range 10 {
			f.data = append(f.data, record{t: time.Duration(i) * ms, seq: uint32(1 + i*mss), payload: mss, karn: -1, inflight: -1})
		}
		if resend {
			f.data = append(f.data, record{t: 15 * ms, seq: 1 + 3*mss, payload: mss, aflags: analyzer.FastRetransmission, karn: -1, inflight: -1})
		}
		hole := record{t: 12 * ms, ack: 1 + 3*mss, flags: decode.FlagACK, karn: -1, nsack: 1}
		hole.sack[0] = decode.SACKBlock{Left: 1 + 4*mss, Right: 1 + 10*mss}
		f.acks = []record{hole, {t: 20 * ms, ack: 1 + 10*mss, flags: decode.FlagACK, karn: -1}}
		if got, want := f.holesFilledUnsent(), map[bool]int{false: 1, true: 0}[resend]; got != want {
			t.Errorf("resent %v: %d holes filled unsent, want %d", resend, got, want)
		}
	}
}

// TestLimitFromWhereItWasTaken: the analyzer's send buffer away from the
// sender (its flight there an estimate) stands only where nothing else
// could have held the transfer (no bottleneck, no loss, under half a
// window per round trip: a sender pinned to one skb, seen from the
// client); its loss where every loss was a full queue's goes, and so
// does its bandwidth with no rate found and no queue's rise in the round
// trip. In their place, and in the congestion
// window's, the bottleneck's rate where the transfer ran near it, else
// no limit named.
func TestLimitFromWhereItWasTaken(t *testing.T) {
	rate := known(100e6, 99e6, 101e6, "")
	none := unknown("no queue")
	ms := time.Millisecond
	for _, c := range []struct {
		limit, where, model string
		rate                Param
		bps                 float64
		runs                int
		queued              bool
		want                string
	}{
		{analyzer.LimitSendBuffer, "sender", "none", rate, 50e6, 3, false, analyzer.LimitSendBuffer},
		{analyzer.LimitSendBuffer, "receiver", "none", rate, 85e6, 0, false, analyzer.LimitBandwidth},
		{analyzer.LimitSendBuffer, "receiver", "none", none, 85e6, 3, false, ""},
		{analyzer.LimitSendBuffer, "middle", "none", rate, 50e6, 0, false, ""},
		{analyzer.LimitSendBuffer, "receiver", "none", none, 4e6, 0, false, analyzer.LimitSendBuffer},
		{analyzer.LimitSendBuffer, "receiver", "none", none, 200e6, 0, false, ""},
		{analyzer.LimitLoss, "receiver", "none", rate, 95e6, 5, false, analyzer.LimitBandwidth},
		{analyzer.LimitLoss, "sender", "random", rate, 95e6, 5, false, analyzer.LimitLoss},
		{analyzer.LimitReceiveWindow, "receiver", "none", rate, 10e6, 0, false, analyzer.LimitReceiveWindow},
		// The congestion window where a bottleneck's rate held: the rate.
		{analyzer.LimitCongestion, "sender", "none", rate, 93e6, 2, false, analyzer.LimitBandwidth},
		{analyzer.LimitCongestion, "receiver", "none", rate, 54e6, 9, false, analyzer.LimitCongestion},
		{analyzer.LimitCongestion, "sender", "random", none, 54e6, 9, false, analyzer.LimitCongestion},
		// Bandwidth: with a rate, or a queue's rise.
		{analyzer.LimitBandwidth, "receiver", "none", none, 27e6, 0, false, ""},
		{analyzer.LimitBandwidth, "receiver", "none", none, 27e6, 0, true, analyzer.LimitBandwidth},
		{analyzer.LimitBandwidth, "receiver", "none", rate, 95e6, 0, false, analyzer.LimitBandwidth},
		{analyzer.LimitBandwidth, "sender", "none", none, 27e6, 0, false, ""},
		{analyzer.LimitBandwidth, "sender", "none", none, 27e6, 0, true, analyzer.LimitBandwidth},
	} {
		// A 100 ms round trip and a 2 MiB window: half of it per round
		// trip is 84 Mbit/s.
		got, why := fitLimit(limitEvidence{limit: c.limit, where: c.where, lossModel: c.model, rate: c.rate, transferBps: c.bps, lossRuns: c.runs,
			perRTT: c.bps / 8 * (100 * ms).Seconds(), window: 2 << 20, queued: c.queued})
		if got != c.want || (got == "" && why == "") {
			t.Errorf("%s from the %s (%s loss in %d runs, rate known %v, %.0f bit/s): %q (%s), want %q", c.limit, c.where, c.model, c.runs, c.rate.Known(), c.bps, got, why, c.want)
		}
	}
	// The congestion window where a bottleneck's queue held in most of
	// the samples and overflowed, its rate unknown: no limit named (the
	// bottleneck held it). A queue in a few samples after slow start's
	// overflow, or one that never overflowed, leaves the window.
	for _, c := range []struct {
		rate  Param
		held  float64
		drops int
		want  string
	}{
		{none, 0.85, 40, ""},
		{none, 0.5, 1, ""},
		{none, 0.2, 40, analyzer.LimitCongestion},
		{none, 0.85, 0, analyzer.LimitCongestion},
		{rate, 0.85, 40, analyzer.LimitCongestion}, // a rate far above the transfer's: the window
	} {
		got, why := fitLimit(limitEvidence{limit: analyzer.LimitCongestion, where: "sender", lossModel: "none", rate: c.rate, transferBps: 54e6,
			lossRuns: c.drops, queueHeld: c.held, tailDrops: c.drops})
		if got != c.want || (got == "" && !strings.Contains(why, "overflowed")) {
			t.Errorf("congestion-window, a queue in %.0f %% of the samples, %d tail drops, rate known %v: %q (%s), want %q", c.held*100, c.drops, c.rate.Known(), got, why, c.want)
		}
	}
}

// TestOneSkbSendBuffer: a flight held at one skb for many round trips,
// the window far from it, is a send buffer's (the send-buffer scenario
// once: 44 KiB at most under an 83 KiB window autotuning kept small);
// one at the window, or for a few round trips only, is not.
func TestOneSkbSendBuffer(t *testing.T) {
	const goal = 65160
	ms := time.Millisecond
	for _, c := range []struct {
		name                string
		maxFlight, window   int64
		windowShare, lasted float64
		want                bool
	}{
		{"one skb under a small window", 44850, 84992, 0, 6540, true},
		{"one skb under a large one", 44850, 1 << 20, 0, 6540, true},
		{"at the window", 44850, 46000, 0.6, 6540, false},
		{"a few round trips", 44850, 1 << 20, 0, 900, false},
		{"past one skb", 200000, 1 << 20, 0, 6540, false},
	} {
		st := &analyzer.Direction{DirectionStats: analyzer.DirectionStats{MaxInFlightBytes: c.maxFlight, PeerMaxWindowBytes: c.window, WindowLimitedShare: c.windowShare, TransferMs: c.lasted}}
		if got := holdsOneSkb(st, goal, 100*ms); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestJitteredMinimum: the lowest of a few jittered round trips lies
// above the delays' sum by up to 2j (1 - 0.05^(1/n)): the interval of a
// base from 8 echoes with 2 ms of jitter reaches 1.3 ms below it, one
// from 93 echoes 0.13 ms, one without jitter stays as it was.
func TestJitteredMinimum(t *testing.T) {
	base := known(8.87, 8.82, 8.87, "lowest")
	for _, c := range []struct {
		j      float64
		n      int
		wantLo float64
	}{{2.09, 8, 8.87 - 1.30}, {2.09, 93, 8.87 - 0.13}, {0, 8, 8.82}, {2.09, 1, 8.87 - 3.97}} {
		got := jitteredMin(base, c.j, c.n)
		if math.Abs(got.Low-c.wantLo) > 0.01 || got.Value != base.Value || got.High != base.High {
			t.Errorf("jitter %.2f ms over %d samples: %+v, want the low end %.2f", c.j, c.n, got, c.wantLo)
		}
	}
}
