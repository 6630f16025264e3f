package analyzer

import (
	"math"
	"time"

	"github.com/wanlab/wanlab/predict"

	"github.com/wanlab/wanlab/units"
)

// Limits a diagnosis can name.
const (
	LimitReceiveWindow = "receive-window"
	LimitSendBuffer    = "send-buffer"
	LimitLoss          = "loss"
	LimitDelayedAck    = "delayed-ack"
	LimitApplication   = "application"
	LimitBandwidth     = "bandwidth"
	LimitCongestion    = "congestion-window"
	// LimitSlowStart: the transfer ended while its window was still
	// opening (or within a few segments): no setting of the path or the
	// buffers would have made it faster; fewer round trips would.
	LimitSlowStart = "slow-start"
	// LimitUnknown: the capture does not decide between the limits left.
	LimitUnknown = "unknown"
	// LimitNone is no longer written; kept for readers of older JSON.
	LimitNone = "none"
)

// Linux's default maxima of the socket buffers (net.ipv4.tcp_wmem and
// tcp_rmem's third field): advice never goes below them, and a buffer
// limit under them is an application's SO_SNDBUF/SO_RCVBUF or a lowered
// sysctl.
const (
	linuxWmemMax = 4 << 20
	linuxRmemMax = 6 << 20
)

// Diagnosis says what limited one direction's transfer, why the analyzer
// thinks so, and what to change.
type Diagnosis struct {
	Direction string `json:"direction"` // "client->server" or "server->client"
	Limit     string `json:"limit"`
	// Limits are the periods of the transfer and the limit of each, where
	// two limits or more alternate (request/response turns, a loss, the
	// window reached late); absent otherwise.
	Limits   []Period `json:"limits,omitempty"`
	Evidence []string `json:"evidence"`
	Advice   []string `json:"advice"`
	// RateBps is the measured data rate; PredictedBps what the advice
	// should give (0: no prediction).
	RateBps      float64 `json:"rate_bps"`
	PredictedBps float64 `json:"predicted_bps"`
	// PredictedGain is PredictedBps over RateBps: what following the
	// advice should multiply the rate by (0: no prediction).
	PredictedGain float64 `json:"predicted_gain"`
	// Ceilings are the rates each limit the capture shows would allow:
	// the receive window over the round trip, the loss's Mathis bound, the
	// bottleneck or the send buffer where they limited; the measured rate
	// sits below the lowest that held.
	Ceilings []Ceiling `json:"ceilings"`
	// WindowRatio is the share of a receive buffer the kernel offers as
	// window that the advice assumed, and WindowRatioSource why: the
	// tuner's measurement of the receiver's kernel (inside `wanlab
	// experiment`) or Linux's default.
	WindowRatio       float64 `json:"window_ratio"`
	WindowRatioSource string  `json:"window_ratio_source"`
}

// WindowRatio is the share of a socket's receive buffer the kernel
// offers as window, which turns a buffer size into a window and a
// predicted rate (predict.WindowRate), and where the figure comes from.
type WindowRatio struct {
	Ratio  float64
	Source string
}

// DefaultWindowRatio is what the analysis assumes when nothing measured the
// receiver's kernel: Linux's default share.
var DefaultWindowRatio = WindowRatio{Ratio: predict.ScalingRatio,
	Source: "assumed: Linux's default, the receiver's kernel was not measured (`wanlab tune show` on it does)"}

// Rediagnose diagnoses c again with the window ratio wr (as the
// experiment does once the tuner has measured the receiver's kernel), in
// place: pointers to its diagnoses stay valid.
func (c *Connection) Rediagnose(wr WindowRatio) {
	for i, d := range c.Directions {
		if d == nil || d.Diagnosis == nil {
			continue
		}
		name := "client->server"
		if i == 1 {
			name = "server->client"
		}
		*d.Diagnosis = *diagnoseDirection(name, d, c.Directions[1-i], c, wr)
	}
}

// Thresholds of the diagnosis. Each is a judgement, documented here.
const (
	// Window limited: flight within 10 % of the peer's window on at least
	// this share of data segments.
	windowLimitedShare = 0.3
	// ... or, wherever the capture was taken, a rate at least this share
	// of window/RTT.
	windowRateShare = 0.7 // a jittery path delivers a window per mean RTT, not per minimum
	// Loss limited: at least this retransmission rate, and a rate at most
	// lossRateSlack times the Mathis bound.
	lossMinRate   = 0.001
	lossRateSlack = 2.0
	// The sender waiting (idle or between turns) for more than this share
	// of the transfer is its application's limit before any loss: the
	// network carried nothing most of the time.
	appMostShare = 0.5
	// Application limited: idle (nothing outstanding) this share of the
	// transfer time.
	appIdleShare = 0.3
	// Delayed ACK: stalls cost at least this share of the transfer time.
	delackShare = 0.1
	// Bandwidth limited: median RTT this much above the minimum.
	queueRTTFactor = 1.5
	// ... unless this share of segments came out of order: delay jitter
	// reorders and spreads arrivals, so the pauses of an ACK-clocked flight
	// vanish without a saturated bottleneck.
	reorderShare = 0.01
	// Send-buffer limited: median flight below this share of the peer's
	// window.
	sndbufShare = 0.5
	// Saturated bottleneck: pauses (gaps > RTT/4 between data segments)
	// below this share of a transfer at least 10 RTTs long.
	saturatedPauseShare = 0.1
	// Receiving application: zero windows in at least this share of the
	// receiver's ACKs.
	receiverAppShare = 0.001
	// sendRatio: the share of a send buffer the advice counts as flight.
	sendRatio = predict.ScalingRatio
	// Bufferbloat: the RTT rose at least this much (and at least half the
	// minimum RTT) above its minimum at the 95th percentile.
	bufferbloatMs = 5.0
	// A bandwidth limit without an RTT rise in the median needs a
	// standing queue: the median RTT at least this much, and this share of
	// the minimum, above the minimum. A transfer that filled its
	// bottleneck keeps a queue there; one paced below it keeps none.
	standingQueueMs    = 2.0
	standingQueueShare = 0.25
	// busyQueueShare: a queue that reached half the round trip at times
	// counts as a bottleneck the transfer filled where it held in at
	// least half the samples, the median this share of the minimum above
	// it (a queue now and then is a burst's, or a busy host's).
	busyQueueShare = 0.1
	// windowReached: a round carrying this share of the receiver's window
	// reached it (the window, not the ramp, held it).
	windowReached = 0.8
	// plateauRounds: rounds at the peak after it was first reached that
	// make a plateau (a window held at one size).
	plateauRounds = 3
	// burstPauseShare: near the receiver, a window-limited flight arrives
	// as bursts with silences of a large share of each round trip.
	burstPauseShare = 0.5
	// windowRoundsShare: rounds filling the offered window on at least
	// this share of the round trips is a receive-window limit.
	windowRoundsShare = 0.5
	// appBursts: bursts enough to judge who released them; ackClockedShare:
	// under this share released by ACKs, the application released them.
	appBursts       = 8
	ackClockedShare = 0.5
	// appRounds: round trips without loss over which any congestion
	// window would have grown well past its start.
	appRounds = 16
)

func diagnose(c *Connection, wr WindowRatio) {
	best := -1
	for i, d := range c.Directions {
		if d.UniqueBytes == 0 {
			continue
		}
		peer := c.Directions[1-i]
		name := "client->server"
		if i == 1 {
			name = "server->client"
		}
		d.Diagnosis = diagnoseDirection(name, d, peer, c, wr)
		if best < 0 || d.UniqueBytes > c.Directions[best].UniqueBytes {
			best = i
		}
	}
	if best >= 0 {
		c.Diagnosis = c.Directions[best].Diagnosis
	}
}

// shortTransfer is the evidence of a transfer too short to diagnose;
// shortTransfers holds it written for the first segment counts.
const shortTransfer = "only %d segments' worth of data: too short for the network to be the limit"

var shortTransfers = func() (s [20]string) {
	for i := range s {
		s[i] = sprintf(shortTransfer, ai(i))
	}
	return s
}()

// nextPow2 rounds n up to a power of two (buffer sizes read better so).
func nextPow2(n float64) int64 {
	p := int64(1)
	for float64(p) < n {
		p <<= 1
	}
	return p
}

func diagnoseDirection(name string, d, peer *Direction, c *Connection, wr WindowRatio) *Diagnosis {
	dg := diagnoseLimit(name, d, peer, c, wr)
	// Rounds that show no limit by themselves are held by the transfer's
	// own, unless it is one a round would show (slow start, loss, an idle
	// sender, a delayed ACK): then by the sender's congestion window. A
	// receiver that closed its window holds every round it did not.
	steady := dg.Limit
	switch {
	case steady == LimitApplication && peer.ZeroWindows > 0:
	case steady == LimitApplication || steady == LimitLoss || steady == LimitSlowStart || steady == LimitDelayedAck:
		steady = LimitCongestion
	}
	dg.Limits = namePeriods(d.periods, steady)
	if dg.PredictedBps > 0 && dg.RateBps > 0 {
		dg.PredictedGain = dg.PredictedBps / dg.RateBps
	}
	dg.Ceilings = ceilings(dg, d, peer)
	return dg
}

func diagnoseLimit(name string, d, peer *Direction, c *Connection, wr WindowRatio) *Diagnosis {
	// Every diagnosis has evidence, most two to four sentences; advice
	// stays nil (JSON null) when there is none.
	if wr.Ratio <= 0 || wr.Ratio > 1 {
		wr = DefaultWindowRatio
	}
	dg := &Diagnosis{Direction: name, RateBps: d.DataRateBps, Evidence: make([]string, 0, 4),
		WindowRatio: wr.Ratio, WindowRatioSource: wr.Source}
	rate := d.DataRateBps / 8 // bytes/s
	rttMin := d.PathRTTMs / 1e3
	rttMed := d.RTTP50Ms / 1e3
	medSource := "karn"
	if d.CapturedNear == "receiver" || d.RTTSamples == 0 {
		// Next to the receiver the data-to-ACK time is not the path's;
		// the echo RTT (receiver's TSval to the data echoing it) shows how
		// the round trip grew; without timestamps the handshake is all.
		rttMed, medSource = rttMin, d.PathRTTSource
		if d.EchoRTTSamples >= 10 {
			rttMed = max(rttMin, d.EchoRTTP50Ms/1e3-0.001) // the TSval tick adds up to 1 ms
			medSource = "echo"
		}
	}
	source := d.PathRTTSource
	if rttMin == 0 && d.TSRTTSamples > 0 {
		rttMin, rttMed, source, medSource = d.TSRTTMinMs/1e3, d.TSRTTP50Ms/1e3, "timestamps", "timestamps"
	}
	// Segment size: what the sender actually sent, bounded by the MSS the
	// receiver announced (GRO captures show larger super-segments).
	mss := float64(peer.MSS)
	if seg := float64(d.MaxSegmentBytes); seg > 0 && (mss == 0 || seg <= mss) {
		mss = seg
	}
	if mss == 0 {
		mss = 1448
	}
	peerWin := float64(d.PeerMaxWindowBytes)
	flight := float64(d.P50InFlightBytes)
	maxFlight := float64(d.MaxInFlightBytes)
	if d.CapturedNear == "receiver" {
		// Flight is invisible near the receiver; a rate over an RTT is it
		// (the median RTT from its echoed timestamps includes a queue).
		flight = rate * rttMed
		maxFlight = flight
	}
	transfer := d.TransferMs
	rp := d.Ramp
	ev := func(f string, a ...farg) { dg.Evidence = append(dg.Evidence, sprintf(f, a...)) }
	adv := func(f string, a ...farg) { dg.Advice = append(dg.Advice, sprintf(f, a...)) }
	sender, receiver := aa(d.From.Addr()), aa(d.To.Addr())

	ev("%s of data in %.1f ms: %s; min RTT %.3g ms (from %s), median %.3g ms",
		asz(float64(d.UniqueBytes)), af(transfer), amb(rate), af(rttMin*1e3), as(rttSourceName(source)), af(rttMed*1e3))
	if d.CapturedNear == "receiver" {
		if d.EchoRTTSamples >= 10 {
			ev("captured near the receiver %s: min RTT from the handshake, median from %d timestamp echoes; bytes in flight estimated as rate x RTT", receiver, ai(d.EchoRTTSamples))
		} else {
			ev("captured near the receiver %s: RTT from the handshake, bytes in flight estimated as rate x RTT", receiver)
		}
	}
	// Without both SYNs the window scale is unknown and windows are raw
	// header values: the window tests would compare flight with a window
	// up to 16384 times too small, so they are skipped.
	windowKnown := d.WindowScaleKnown
	if !windowKnown {
		ev("handshake not captured: window scaling unknown, so receive-window and send-buffer limits cannot be tested (capture from the connection's start)")
	}

	if float64(d.UniqueBytes) < 20*mss {
		dg.Limit = LimitSlowStart
		if n := int(float64(d.UniqueBytes)/mss) + 1; uint(n) < uint(len(shortTransfers)) {
			dg.Evidence = append(dg.Evidence, shortTransfers[n]) // most connections of a busy server
		} else {
			ev(shortTransfer, ai(n))
		}
		if d.DelayedAckStalls > 0 {
			dg.Limit = LimitDelayedAck
			delayedAckAdvice(dg, d, rttMin, sender, receiver)
		}
		return dg
	}

	lossP := d.LossRate
	busyRate := d.BusyRateBps() / 8 // bytes/s while the sender had data
	waited := d.WaitedMs()          // the sender had nothing to send
	var mathis float64
	if lossP > 0 && rttMed > 0 {
		mathis = predict.Mathis(units.Size(mss), secondsDur(rttMed), lossP).BytesPerSecond()
	}

	switch {
	case d.DelayedAckStalls > 0 && transfer > 0 && d.DelayedAckTotalMs >= delackShare*transfer:
		dg.Limit = LimitDelayedAck
		delayedAckAdvice(dg, d, rttMin, sender, receiver)

	// The network's bounds are compared with the rate while data was
	// outstanding: a rate averaged over the sender's idle time is the
	// application's, not the path's.
	case lossP >= lossMinRate && mathis > 0 && busyRate <= lossRateSlack*mathis && waited < appMostShare*transfer:
		dg.Limit = LimitLoss
		ev("%d of %d data segments sent again (p = %.2f %%: %d re-sent, %d filling gaps; Wireshark: %d retransmissions, %d fast, %d spurious, %d out-of-order), %d triple duplicate ACKs from the receiver",
			ai(d.ResentPackets+d.GapFills), ai(d.DataPackets+d.GapFills), af(lossP*100), ai(d.ResentPackets), ai(d.GapFills),
			ai(d.RetransmittedPackets), ai(d.FastRetransmissions), ai(d.SpuriousRetransmissions), ai(d.OutOfOrderPackets), ai(peer.TripleDupAcks))
		ev("Mathis bound MSS*1.2247/(RTT*sqrt(p)) = %.0f B * 1.2247 / (%.3g ms * sqrt(%.4f)) = %s, with the median RTT from %s; measured %s",
			af(mss), af(rttMed*1e3), af(lossP), amb(mathis), as(rttSourceName(medSource)), amb(rate))
		adv("the loss happens on the path between %s and %s: buffer and window settings cannot help; find the drop point (tc -s qdisc show: drops/overlimits; ip -s link: errors) and remove it", sender, receiver)
		adv("if the loss is random and cannot be removed, a congestion control that does not treat every loss as congestion helps: on %s run `wanlab tune apply --set net.ipv4.tcp_congestion_control=bbr`", sender)
		dg.PredictedBps = 8 * mathis * math.Sqrt(10)
		adv("predicted: at a tenth of the loss rate the bound rises sqrt(10)x, to about %s", amb(mathis*math.Sqrt(10)))

	case transfer > 0 && waited >= appIdleShare*transfer:
		dg.Limit = LimitApplication
		if d.IdleTotalMs > 0 {
			ev("the sender had nothing outstanding for %.1f ms in %d gaps (%.0f %% of the transfer; longest %.1f ms) while the receiver's window was open",
				af(d.IdleTotalMs), ai(d.IdleGaps), af(100*d.IdleTotalMs/transfer), af(d.IdleMaxMs))
		}
		if d.Turns > 0 {
			ev("%d request/response turns: the sender's data answered the peer's, and between its answers it waited %.1f ms (%.0f %% of the transfer) with nothing to send",
				ai(d.Turns), af(d.TurnTotalMs), af(100*d.TurnTotalMs/transfer))
			adv("the requests and their answers took turns: fewer round trips would help (pipeline or batch the requests, HTTP/2 multiplexing, or larger responses); the path and the buffers are not the limit")
		}
		adv("the application on %s did not hand data to TCP fast enough (or waited for the next request): TCP and network tuning will not speed this up; write larger chunks, pipeline requests, or find what the application waits for", sender)
		if busy := transfer - waited; busy > 0 {
			dg.PredictedBps = d.BusyRateBps()
			adv("predicted: without the idle gaps the same data would take %.1f ms, %s", af(busy), amb(busyRate))
		}

	// Near the sender a window (congestion, receive or buffer) releases
	// each burst on an ACK; bursts that began on their own were the
	// application's writes.
	case d.CapturedNear == "sender" && d.Bursts >= appBursts && float64(d.AckedBursts) < ackClockedShare*float64(d.Bursts):
		dg.Limit = LimitApplication
		ev("%d of %d bursts began on their own, not on an ACK (%d within %.0f ms of one): the application's writes released them, at their own pace",
			ai(d.Bursts-d.AckedBursts), ai(d.Bursts), ai(d.AckedBursts), af(ackClockNs/1e6))
		adv("the application on %s wrote its data at its own pace (a stream, a relay, a rate limit of its own): TCP and network tuning will not speed this up; find what paces its writes", sender)

	// Near the receiver the same shows a round trip later: a burst an ACK
	// released arrives one round trip after that ACK left.
	case d.CapturedNear == "receiver" && d.Bursts >= appBursts && float64(d.RTTAckedBursts) < ackClockedShare*float64(d.Bursts):
		dg.Limit = LimitApplication
		ev("%d of %d bursts arrived with no ACK of the receiver's a round trip (%.3g ms, within an eighth) before them: no ACK released them, the application's writes did, at their own pace",
			ai(d.Bursts-d.RTTAckedBursts), ai(d.Bursts), af(rttMin*1e3))
		adv("the application on %s wrote its data at its own pace (a stream, a relay, a rate limit of its own): TCP and network tuning will not speed this up; find what paces its writes", sender)

	case peer.ZeroWindows > 0 && zeroWindowShare(d, peer) >= receiverAppShare:
		dg.Limit = LimitApplication
		ev("the receiver %s advertised a zero window %d times (%d zero-window probes; %.1f %% of its packets): its application did not read as fast as the data arrived",
			receiver, ai(peer.ZeroWindows), ai(d.ZeroWindowProbes), af(100*zeroWindowShare(d, peer)))
		adv("the receiving application on %s is the bottleneck: a larger receive buffer only postpones the stall; make it read faster (larger reads, fewer per-read costs, a separate reader thread)", receiver)

	case rp.Rounds > 0 && rp.Growing && (peerWin == 0 || float64(rp.PeakBytes) < windowReached*peerWin):
		dg.Limit = LimitSlowStart
		ev("the transfer ended while its window was still opening: %d round trips, the first carrying %s and the last full one %s (the most of any), below the receiver's %s window and with nothing sent again",
			ai(rp.Rounds), asz(float64(rp.InitialBytes)), asz(float64(rp.PeakBytes)), asz(peerWin))
		adv("no buffer, window or path setting would have made this transfer faster: it was over before slow start ended; fewer round trips would (reuse the connection: keep-alive, HTTP/2 or pipelining; a larger initial window on %s: `ip route change <route> initcwnd 20`)", sender)
		if rttMin > 0 && transfer > rttMin*1e3 {
			p := float64(d.UniqueBytes) / (transfer/1e3 - rttMin)
			dg.PredictedBps = 8 * p
			adv("predicted: one round trip fewer (twice the initial window) takes %.1f ms instead of %.1f ms: %s", af(transfer-rttMin*1e3), af(transfer), amb(p))
		}

	// A bottleneck the transfer filled: a queue at the median, or one that
	// reached half the round trip at times (a buffer filled) and held in
	// most samples; near the receiver without reordering (a jitter
	// spreads the round trips too), near the sender with a flight of at
	// least the path's bandwidth-delay product. A rate averaged below a bottleneck it never
	// filled leaves no queue.
	case rttMin > 0 && rttMed >= queueRTTFactor*rttMin+0.002 && flight > 1.3*rate*rttMin,
		rttMin > 0 && transfer >= 10*rttMin*1e3 &&
			(d.QueueDelayP50Ms >= max(standingQueueMs, standingQueueShare*rttMin*1e3) ||
				(d.QueueRTTSource != "" && d.QueueDelayMs >= max(bufferbloatMs, 0.5*rttMin*1e3) &&
					d.QueueDelayP50Ms >= busyQueueShare*rttMin*1e3)) &&
			((d.CapturedNear == "receiver" && float64(reordered(d)) < reorderShare*float64(d.DataPackets)) ||
				(d.CapturedNear == "sender" && float64(d.P50InFlightBytes) >= rate*rttMin)):
		dg.Limit = LimitBandwidth
		q := (rttMed - rttMin) * rate
		if d.PauseShare < saturatedPauseShare {
			ev("data flowed without pauses longer than a quarter RTT (%.0f %% of the time paused): the bottleneck was busy all along", af(100*d.PauseShare))
		}
		if rttMed >= queueRTTFactor*rttMin+0.002 {
			ev("RTT rose from %.3g ms (min) to %.3g ms (median) while the rate held at %s: a queue of about %s built at the bottleneck",
				af(rttMin*1e3), af(rttMed*1e3), amb(rate), asz(q))
			ev("median flight %s is more than the path's bandwidth-delay product %s", asz(flight), asz(rate*rttMin))
		}
		adv("the bottleneck between %s and %s runs at about %s: more window or buffer only adds queueing delay", sender, receiver, amb(rate))
		adv("to keep the rate but cut the delay, use a congestion control that paces to the bottleneck (on %s: `wanlab tune apply --set net.ipv4.tcp_congestion_control=bbr`) or shorten the bottleneck queue (tbf limit/latency)", sender)
		dg.PredictedBps = 8 * rate

	case windowKnown && d.CapturedNear != "receiver" && (d.WindowLimitedShare >= windowLimitedShare || (d.DataPackets > 0 && float64(d.WindowFull)/float64(d.DataPackets) >= 0.1)),
		windowKnown && rttMin > 0 && peerWin > 0 && rate >= windowRateShare*peerWin/rttMin,
		// The rounds reached the window and held there, or most of them
		// filled the window offered while they ran (a window still
		// growing with the receiver's buffer: the flight followed it).
		windowKnown && peerWin > 0 && rp.Flat >= plateauRounds && float64(rp.PlateauBytes) >= windowReached*peerWin,
		windowKnown && rp.ClassedRounds >= plateauRounds && float64(rp.WindowRounds) >= windowRoundsShare*float64(rp.ClassedRounds):
		dg.Limit = LimitReceiveWindow
		if d.CapturedNear == "receiver" {
			ev("the rate is %.0f %% of what the receive window %s advertised allows per RTT", af(100*rate*rttMin/peerWin), receiver)
		} else {
			ev("bytes in flight were within 10 %% of the receive window %s advertised on %.0f %% of data segments (%d window-full segments)",
				receiver, af(100*d.WindowLimitedShare), ai(d.WindowFull))
		}
		if rttMin > 0 {
			ev("throughput = window / RTT = %s / %.3g ms = %s; measured %s",
				asz(peerWin), af(rttMin*1e3), amb(peerWin/rttMin), amb(rate))
		}
		target := 4 * peerWin
		buf := nextPow2(max(target/wr.Ratio, linuxRmemMax))
		adv("raise the receive buffer on %s: net.ipv4.tcp_rmem max >= %d bytes (the kernel offers about %.0f %% of the buffer as window; %s), e.g. `wanlab tune apply --set net.ipv4.tcp_rmem=\"4096 131072 %d\"`; an application that sets SO_RCVBUF also needs net.core.rmem_max >= %d",
			receiver, ai(buf), af(wr.Ratio*100), as(wr.Source), ai(buf), ai(buf))
		if rttMin > 0 {
			p := predict.WindowRate(units.Size(float64(buf)*wr.Ratio), secondsDur(rttMin)).BytesPerSecond()
			dg.PredictedBps = 8 * p
			adv("predicted: a %s buffer gives a %s window, which allows up to %s at this RTT, if the path has the capacity (the next limit is then congestion or bandwidth)", asz(float64(buf)), asz(float64(buf)*wr.Ratio), amb(p))
		}

	// Near the receiver the flight is only the rate over a round trip: a
	// send buffer cannot be told there from a congestion window that
	// losses held down, so it is named only where nothing was lost.
	// Nor where the receiver SACKed more than its losses explain (a
	// flight's worth of ACKs each): data arrived above holes that no
	// re-send filled, a reordering, whose spurious recoveries hold the
	// congestion window flat (the grid's reordering paths at 50 and 200
	// ms, 1684 and 2843 SACKs with none re-sent: TCP_INFO's send-buffer
	// limited time was nil).
	// The sender's own evidence of a buffer: its rounds held flat at one
	// size (not still opening) below half the receiver's window, nothing
	// lost; near the receiver, where the flight is only the rate over a
	// round trip, the flat rounds came as ACK-clocked bursts through
	// enough of them to rule out a window still growing. Without rounds
	// (no handshake) the flight's median and maximum stand in.
	case windowKnown && peerWin > 0 && lossP < lossMinRate &&
		(d.CapturedNear != "receiver" || d.ResentPackets+d.GapFills == 0) &&
		float64(peer.SACKPackets) <= float64(d.ResentPackets+d.GapFills+1)*maxFlight/max(mss, 1) &&
		((rp.Rounds > 0 && !rp.Growing && rp.Flat >= plateauRounds && float64(rp.PlateauBytes) < windowReached*peerWin) ||
			(rp.Rounds == 0 && flight > 0 && flight <= sndbufShare*peerWin && maxFlight <= 1.5*flight+2*mss)) &&
		(d.CapturedNear != "receiver" || (d.PauseShare >= burstPauseShare && rp.Flat >= 2*plateauRounds)):
		if rp.Rounds > 0 {
			flight, maxFlight = float64(rp.PlateauBytes), float64(rp.PlateauBytes)
		}
		dg.Limit = LimitSendBuffer
		ev("bytes in flight stayed near %s (median; max %s), only %.0f %% of the %s window %s offered, without loss",
			asz(flight), asz(maxFlight), af(100*flight/peerWin), asz(peerWin), receiver)
		if rttMin > 0 {
			ev("throughput = flight / RTT = %s / %.3g ms = %s; measured %s", asz(flight), af(rttMin*1e3), amb(flight/rttMin), amb(rate))
		}
		buf := nextPow2(peerWin / sendRatio)
		if d.CapturedNear == "receiver" {
			ev("near the receiver the sender's buffer and its application cannot be told apart: both hold the flight flat (capture at the sender to tell)")
		}
		if buf <= linuxWmemMax {
			adv("a flight this small is under Linux's default send buffer (net.ipv4.tcp_wmem max %d bytes): on %s an application that sets SO_SNDBUF, or a tcp_wmem lowered below the default, held it; let the buffer autotune (do not set SO_SNDBUF) or set it to at least %d bytes",
				ai(int64(linuxWmemMax)), sender, ai(buf))
		} else {
			adv("raise the send buffer on %s: net.ipv4.tcp_wmem max >= %d bytes, e.g. `wanlab tune apply --set net.ipv4.tcp_wmem=\"4096 16384 %d\"` (an application that sets SO_SNDBUF also needs net.core.wmem_max >= %d)", sender, ai(buf), ai(buf), ai(buf))
		}
		if rttMin > 0 {
			p := predict.WindowRate(units.Size(peerWin), secondsDur(rttMin)).BytesPerSecond()
			dg.PredictedBps = 8 * p
			adv("predicted: the flight can then fill the receiver's %s window: up to %s at this RTT", asz(peerWin), amb(p))
		}

	case !windowKnown:
		dg.Limit = LimitUnknown
		ev("no loss, delayed-ACK, idle or queueing signature; without the window scale the remaining candidates (receive window, send buffer, congestion window) cannot be told apart")

	// A congestion window grows in every round trip without loss; near the
	// receiver, rounds that neither grew nor held at any size through many
	// round trips with nothing lost, arriving in bursts, are data handed
	// over as it came: the sending application's pace (a relay, a proxy,
	// a stream).
	case d.CapturedNear == "receiver" && d.ResentPackets+d.GapFills == 0 && rp.Rounds >= appRounds && !rp.Growing && rp.Flat == 0 &&
		d.PauseShare >= burstPauseShare:
		dg.Limit = LimitApplication
		ev("over %d round trips with nothing lost the rounds neither grew (as a congestion window would) nor held at one size (as a buffer would): the most any round carried was %s, below the receiver's %s window; the data came as the sender's application handed it over",
			ai(rp.Rounds), asz(float64(rp.PeakBytes)), asz(peerWin))
		adv("the application on %s (or the relay it reads from) set the pace: TCP and network tuning will not speed this up; find what it waits for", sender)

	default:
		dg.Limit = LimitCongestion
		if lossP >= lossMinRate {
			ev("flight reached %s (median %s) below the receiver's %s window, without a queue building; %.2f %% of segments were sent again, yet the rate stayed above the Mathis bound: the sender's congestion window (slow start, growth, a loss-tolerant congestion control) set the pace",
				asz(maxFlight), asz(flight), asz(peerWin), af(lossP*100))
		} else {
			ev("flight reached %s (median %s) below the receiver's %s window, without a queue building or significant loss: the sender's congestion window (slow start, growth) set the pace",
				asz(maxFlight), asz(flight), asz(peerWin))
		}
		if d.CapturedNear == "receiver" && peerWin > 0 && flight <= sndbufShare*peerWin && d.ResentPackets+d.GapFills > 0 {
			ev("the sender's buffer could hold the flight the same way, but near the receiver the flight is only estimated, and %d segments were sent again: a congestion window that losses held down explains it too (capture near the sender to tell them apart)",
				ai(d.ResentPackets+d.GapFills))
		}
		adv("for short transfers a larger initial window helps (`ip route change <route> initcwnd 20` on %s); long transfers grow out of this limit", sender)
		if rttMin > 0 && peerWin > 0 {
			p := predict.WindowRate(units.Size(peerWin), secondsDur(rttMin)).BytesPerSecond()
			dg.PredictedBps = 8 * p
			adv("predicted: at most %s once the congestion window reaches the receiver's window", amb(p))
		}
	}
	if q := d.QueueDelayMs; d.QueueRTTSource != "" && q >= bufferbloatMs && q >= 0.5*rttMin*1e3 {
		ev("a queue of %.0f ms built at the bottleneck while data flowed: the RTT (%s) rose %.0f ms above its minimum at the 95th percentile, %.0f ms at the median (bufferbloat)",
			af(q), as(rttSourceName(d.QueueRTTSource)), af(q), af(d.QueueDelayP50Ms))
		if dg.Limit != LimitBandwidth {
			adv("the bottleneck queue between %s and %s adds up to %.0f ms of delay: an AQM on the bottleneck link (fq_codel or cake: `tc qdisc replace dev DEV root fq_codel`) keeps it short without costing rate", sender, receiver, af(q))
		}
	}
	if peer.ZeroWindows > 0 && dg.Limit != LimitApplication {
		ev("the receiver advertised a zero window %d times (%d zero-window probes): its application did not always read fast enough", ai(peer.ZeroWindows), ai(d.ZeroWindowProbes))
	}
	return dg
}

// rttSourceName says in words where an RTT came from.
func rttSourceName(s string) string {
	switch s {
	case "karn":
		return "data to ACK, Karn's rule"
	case "timestamps":
		return "TCP timestamp echoes"
	case "echo":
		return "the receiver's timestamps echoed by new data"
	case "handshake":
		return "the handshake"
	case "":
		return "no sample"
	}
	return s
}

// secondsDur turns seconds into a Duration.
func secondsDur(s float64) time.Duration { return time.Duration(s * 1e9) }

func delayedAckAdvice(dg *Diagnosis, d *Direction, rttMin float64, sender, receiver farg) {
	dg.Evidence = append(dg.Evidence, sprintf(
		"%d lone segments were acknowledged at least 30 ms later than the %.3g ms minimum RTT, costing %.1f ms of %.1f ms: the receiver's delayed-ACK timer (40 ms minimum on Linux)",
		ai(d.DelayedAckStalls), af(rttMin*1e3), af(d.DelayedAckTotalMs), af(d.TransferMs)))
	dg.Advice = append(dg.Advice,
		sprintf("on %v (the receiver) acknowledge at once: set TCP_QUICKACK on the socket after each read, or `ip route change <route to %v> quickack 1`", receiver, sender),
		sprintf("on %v (the sender) set TCP_NODELAY so a small last segment is not held back by Nagle while the receiver waits", sender))
	if d.TransferMs > d.DelayedAckTotalMs && d.TransferMs > 0 {
		busy := max(d.TransferMs-d.DelayedAckTotalMs, rttMin*1e3)
		p := float64(d.UniqueBytes) / (busy / 1e3)
		dg.PredictedBps = 8 * p
		dg.Advice = append(dg.Advice, sprintf("predicted: %.1f ms instead of %.1f ms, %s", af(busy), af(d.TransferMs), amb(p)))
	}
}

// zeroWindowShare is the share of the receiver's packets that advertised a
// zero window.
func zeroWindowShare(d, peer *Direction) float64 {
	if peer.Packets == 0 {
		return 0
	}
	return float64(peer.ZeroWindows) / float64(peer.Packets)
}

// Ceiling is the rate one limit allows.
type Ceiling struct {
	// Limit is the class it belongs to (receive-window, loss, bandwidth,
	// send-buffer).
	Limit string  `json:"limit"`
	Bps   float64 `json:"bps"`
	// How is the formula with its figures.
	How string `json:"how"`
}

// ceilings lists the rates each limit the capture shows allows (see
// Diagnosis.Ceilings).
func ceilings(dg *Diagnosis, d, peer *Direction) []Ceiling {
	out := []Ceiling{}
	rtt := d.PathRTTMs / 1e3
	if rtt <= 0 {
		return out
	}
	if win := float64(d.PeerMaxWindowBytes); d.WindowScaleKnown && win > 0 {
		out = append(out, Ceiling{Limit: LimitReceiveWindow, Bps: 8 * win / rtt,
			How: sprintf("largest receive window / RTT = %s / %.3g ms", asz(win), af(rtt*1e3))})
	}
	if p := d.LossRate; p > 0 {
		mss := float64(peer.MSS)
		if seg := float64(d.MaxSegmentBytes); seg > 0 && (mss == 0 || seg <= mss) {
			mss = seg
		}
		med := max(d.PathRTTP50Ms/1e3, rtt)
		m := predict.Mathis(units.Size(max(mss, 1)), secondsDur(med), p).BytesPerSecond()
		// Mathis bounds a Reno-like sender; a transfer well above it
		// (CUBIC, BBR) shows the bound did not hold, and it is no ceiling.
		if dg.Limit == LimitLoss || dg.RateBps <= lossRateSlack*8*m {
			out = append(out, Ceiling{Limit: LimitLoss, Bps: 8 * m,
				How: sprintf("Mathis MSS*1.2247/(RTT*sqrt(p)) = %.0f B * 1.2247 / (%.3g ms * sqrt(%.3g))", af(mss), af(med*1e3), af(p))})
		}
	}
	switch dg.Limit {
	case LimitBandwidth:
		out = append(out, Ceiling{Limit: LimitBandwidth, Bps: dg.RateBps, How: "the bottleneck's rate: the rate it delivered while its queue held"})
	case LimitSendBuffer:
		if f := float64(d.Ramp.PlateauBytes); f > 0 {
			out = append(out, Ceiling{Limit: LimitSendBuffer, Bps: 8 * f / rtt,
				How: sprintf("the flight the sender held / RTT = %s / %.3g ms", asz(f), af(rtt*1e3))})
		}
	}
	return out
}

// reordered estimates the segments that arrived out of order without
// being sent again: Wireshark's out-of-order flag also marks the re-sends
// that fill holes near the receiver.
func reordered(d *Direction) int {
	return max(0, d.OutOfOrderPackets-d.GapFills-d.ResentPackets)
}
