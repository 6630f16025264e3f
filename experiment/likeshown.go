package experiment

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/fit"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// NotShown is a part of the path or of the application that a
// reproduction needs and the capture does not show: what it is, the value
// the lab assumed, and why that value.
type NotShown struct {
	What    string `json:"what"`
	Assumed string `json:"assumed"`
	Why     string `json:"why"`
}

// dataDirection is the analyzer's view of the fitted connection's data
// direction in the original capture: the client's data for an upload, the
// server's otherwise.
func dataDirection(capture string, f *fit.Result) (*analyzer.Connection, *analyzer.Direction, error) {
	ar, err := analyzer.AnalyzeFile(capture, analyzer.Options{NoSeries: true})
	if err != nil {
		return nil, nil, err
	}
	for _, c := range ar.Connections {
		if c.Index != f.Connection.Index {
			continue
		}
		d := c.Directions[1]
		if f.Transfer.Direction == "upload" {
			d = c.Directions[0]
		}
		if d == nil {
			break
		}
		return c, d, nil
	}
	return nil, nil, fmt.Errorf("%s: connection %d: not found again by the analyzer", f.File, f.Connection.Index)
}

// labRTT is the round trip of the lab's path: the two directions' netem
// delays.
func labRTT(cfg *Config) time.Duration {
	specs, err := cfg.Specs()
	if err != nil {
		return 0
	}
	var rtt time.Duration
	for _, s := range specs {
		for _, st := range s.Stages {
			if n, ok := st.(*spec.Netem); ok {
				rtt += n.Latency
			}
		}
	}
	return rtt
}

// paceTick is how often a paced application writes: short against the
// round trips a lab runs, long against the Go runtime's timer resolution.
const paceTick = 5 * time.Millisecond

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// initialWindowSegments is Linux's initial congestion window (RFC 6928's
// ten segments): what an answer's first round trip carries.
const initialWindowSegments = 10

// delayedAckMin is Linux's shortest delayed-ACK timer (TCP_DELACK_MIN,
// 40 ms): the least a client holding its ACK adds to an answer that
// Nagle's algorithm holds behind it. The timer grows with the gaps
// between segments; the lab's stalls stay within twice it.
const delayedAckMin = 40 * time.Millisecond

// requestTimeoutSlack is how many times the original's slowest answer a
// reproduction's request may take before it counts as failed.
const requestTimeoutSlack = 4

// shownPath completes the lab cfg a fit describes with what the capture
// does bound where the fit says nothing, and lists what it assumed:
//
//   - the round trip, where the fit withheld it: the capture's minimum
//     round trip of the data (the analyzer's path RTT), split evenly;
//   - a median round trip over the minimum that the fit explained by
//     neither a queue nor jitter: for a sender the path alone held back,
//     a bottleneck at its steady delivery rate with the queue it showed;
//     else the median as the lab's fixed delay;
//   - a bottleneck never filled, a loss the fit withheld, a congestion
//     control it did not read: none, none, Linux's default;
//   - an application that paced its sender (the analyzer's diagnosis
//     "application"): writes at the rate it sent while it had data, with
//     its waits spread evenly through the transfer;
//   - a request/response server's think time (shownAnswers), which Like
//     corrects by the lab's own share of the latency on a first run.
func shownPath(cfg *Config, f *fit.Result, d *analyzer.Direction) []NotShown {
	var out []NotShown
	var data fit.Direction
	for _, dir := range f.Directions {
		if dir.Data {
			data = dir
		}
	}
	if rtt := data.Params["rtt_ms"]; !rtt.Known() && d.PathRTTMs > 0 && !strings.Contains(data.Spec, "delay") {
		oneWay := msDuration(d.PathRTTMs / 2).Round(10 * time.Microsecond)
		delay := fmt.Sprintf("delay %dus", oneWay.Microseconds())
		cfg.AppendStage(ToClient, delay)
		cfg.AppendStage(ToServer, delay)
		out = append(out, NotShown{What: "the path's round trip",
			Assumed: units.Sprintf("%.4g ms (%s each way)", d.PathRTTMs, oneWay),
			Why:     units.Sprintf("the fit withheld it (%s); the capture's own minimum round trip of the data (%s) bounds it", rtt.Unknown, d.PathRTTSource)})
	}
	// The round trip rose over its minimum while data flowed, and the fit
	// modelled neither a bottleneck's queue nor jitter for it.
	rate, jitter := data.Params["rate_bps"], data.Params["jitter_ms"]
	spread := !rate.Known() && !jitter.Known() && d.PathRTTP50Ms > (1+verdictRTTTolerance)*d.PathRTTMs
	if spread && f.RequestResponse == nil && networkLimited(d) && steadyDelivery(f) > 0 {
		// A sender that nothing but the path held back, with a queue at
		// its median round trip, delivered at the bottleneck's rate (BBR's
		// model of a path: its delivery rate is the bottleneck's while a
		// queue stands): the transfer's steady tenths, its first (slow
		// start) left out.
		r := steadyDelivery(f)
		queue := msDuration(max(d.QueueDelayMs, d.PathRTTP50Ms-d.PathRTTMs))
		burst := max(units.Size(2*mssOf(f)), units.Size(r.BytesPerSecond()*bucketTime.Seconds()))
		limit := max(burst+units.Size(2*mssOf(f)), units.Size(r.BytesPerSecond()*queue.Seconds()))
		cfg.AppendStage(ToClient, fmt.Sprintf("tbf rate %dbit burst %db limit %db", int64(r), int64(burst), int64(limit)))
		out = append(out, NotShown{What: "the bottleneck's rate",
			Assumed: fmt.Sprintf("%s with a queue of %v (%s)", r.Human(), queue.Round(100*time.Microsecond), limit.Human()),
			Why: units.Sprintf("the fit withheld it (%s); the sender was held back by the path alone (%s) and its median round trip %.4g ms stood over the minimum %.4g ms: a queue, which a bottleneck empties at the rate the transfer delivered (its median tenth after the first)",
				rate.Unknown, d.Diagnosis.Limit, d.PathRTTP50Ms, d.PathRTTMs)})
	} else if spread {
		oneWay := msDuration(d.PathRTTP50Ms / 2).Round(10 * time.Microsecond)
		for _, dir := range []string{ToClient, ToServer} {
			t, err := withDelay(cfg.Impair[dir], oneWay)
			if err != nil {
				return append(out, NotShown{What: "the round trip's variation", Assumed: "none", Why: err.Error()})
			}
			cfg.Impair[dir] = t
		}
		out = append(out, NotShown{What: "the round trip's variation",
			Assumed: units.Sprintf("none: every packet has the median round trip %.4g ms (%v each way)", d.PathRTTP50Ms, oneWay),
			Why: units.Sprintf("the capture's median round trip %.4g ms is over its minimum %.4g ms and the fit modelled neither a queue nor jitter for it (%s): the lab's fixed delay is the one most packets had",
				d.PathRTTP50Ms, d.PathRTTMs, jitter.Unknown)})
	}
	if !rate.Known() && !strings.Contains(cfg.Impair[ToClient], "tbf") {
		out = append(out, NotShown{What: "a bottleneck", Assumed: "none: the lab's path is as fast as this host",
			Why: "the transfer never filled one: " + rate.Unknown})
	}
	if l := data.Params["loss_percent"]; !l.Known() {
		out = append(out, NotShown{What: "the path's loss", Assumed: "none",
			Why: "the fit withheld it: " + l.Unknown})
	}
	if data.CongestionControl == "" {
		out = append(out, NotShown{What: "the sender's congestion control",
			Assumed: fmt.Sprintf("%s from Linux's initial window of %d segments", cfg.Server.CC, initialWindowSegments),
			Why: fmt.Sprintf("the capture shows no reaction of the sender's to loss that names it: Linux's default (the original's first round trip carried %s, %.3g segments, and its rounds peaked at the %d of %d)",
				units.Size(d.Ramp.InitialBytes).Human(), float64(d.Ramp.InitialBytes)/mssOf(f), d.Ramp.PeakRound+1, d.Ramp.Rounds)})
	}
	app := d.Diagnosis != nil && d.Diagnosis.Limit == analyzer.LimitApplication
	if rr := f.RequestResponse; rr != nil {
		out = append(out, shownAnswers(cfg, f, rr, labRTT(cfg))...)
		return out
	}
	if app {
		cfg.WriteRate = units.Rate(d.BusyRateBps())
		cfg.WriteChunk = max(units.Size(mssOf(f)), units.Size(cfg.WriteRate.BytesPerSecond()*paceTick.Seconds()))
		if gaps := d.IdleGaps + d.Turns; gaps > 0 && d.WaitedMs() > 0 {
			cfg.WritePauses = gaps
			cfg.WritePause = msDuration(d.WaitedMs() / float64(gaps))
		}
		out = append(out, NotShown{What: "the application's pace",
			Assumed: fmt.Sprintf("writes at %s (the rate it sent at while it had data) stopping %d times for %v",
				cfg.WriteRate.Human(), cfg.WritePauses, cfg.WritePause.Round(time.Millisecond)),
			Why: units.Sprintf("the sender was application-limited: it waited %.4g ms of the %.4g ms (%d idle gaps, %d turns); the capture shows how long, not what for or when, so the waits are spread evenly",
				d.WaitedMs(), d.TransferMs, d.IdleGaps, d.Turns)})
	}
	return out
}

// notShownThink names the server's think time in LikeResult.NotShown.
const notShownThink = "the server's think time"

// shownAnswers sets a request/response lab's server from what the capture
// shows of its answers: its think time (the whole of the median latency
// the path does not explain: the server's work and its pace alike, which
// the capture does not tell apart), Nagle's algorithm (on where the
// original's median answer had a delayed-ACK stall in it) and the
// requests' timeout.
func shownAnswers(cfg *Config, f *fit.Result, rr *fit.RequestResponse, rtt time.Duration) []NotShown {
	var out []NotShown
	mss := mssOf(f)
	// Slow start doubles from the initial window: the round trips an
	// answer of this size takes, the first to its last byte's ACK. Where
	// the connections carried more than one answer each, the median
	// answer rides the window an earlier one opened: one round trip.
	rounds := math.Ceil(math.Log2(float64(rr.ResponseBytes)/(initialWindowSegments*mss) + 1))
	if rr.Requests > rr.Connections {
		rounds = 1
	}
	wire := time.Duration(max(0, rounds-1)) * rtt
	// What the path leaves of the median latency is the server's: its
	// think time (the fit's reading of it, as far as the latency has room)
	// and, where the original was delayed-ACK limited, the stall of the
	// client's delayed ACK behind the answer's second write, which the
	// lab's server makes with Nagle's algorithm on while it thinks for
	// less than the client's timer runs.
	left := max(0, msDuration(rr.LatencyP50Ms)-rtt-wire)
	think := min(max(0, msDuration(rr.ThinkMs)), left)
	stall := left - think
	delayedAck := f.Transfer.Limit == analyzer.LimitDelayedAck
	nagle := delayedAck && think < delayedAckMin && stall >= delayedAckMin/2 && stall <= 2*delayedAckMin
	why := fmt.Sprintf("the fit's reading %.4g ms, within the client's median latency %.4g ms less the round trip %v and the answer's %v on the wire",
		rr.ThinkMs, rr.LatencyP50Ms, rtt.Round(10*time.Microsecond), wire.Round(10*time.Microsecond))
	switch {
	case nagle:
		why += fmt.Sprintf("; the %v left is the client's delayed-ACK stall (the original was delayed-ACK limited), which the lab's answer in two writes with Nagle's algorithm on makes", stall.Round(10*time.Microsecond))
	case stall > 0:
		think = left
		why += fmt.Sprintf("; the %v left is taken as the server's too", stall.Round(10*time.Microsecond))
		if delayedAck {
			out = append(out, NotShown{What: "the client's delayed-ACK timer", Assumed: fmt.Sprintf("the stall as the server's think time, Nagle's algorithm off"),
				Why: fmt.Sprintf("the original was delayed-ACK limited with %v of its median answer unexplained; a Linux client's timer (%v, up to twice that) stalls for less or the think time covers it", stall.Round(time.Millisecond), delayedAckMin)})
		}
	}
	cfg.NoNagle = !nagle
	cfg.ThinkTime = max(think, 10*time.Microsecond).Round(10 * time.Microsecond)
	out = append(out, NotShown{What: notShownThink, Assumed: cfg.ThinkTime.String(),
		Why: why + "; the capture shows the latency, not how it splits between the path and the server"})
	cfg.RequestTimeout = max(5*time.Second, requestTimeoutSlack*msDuration(rr.LatencyP99Ms))
	return out
}

// mssOf is the data direction's MSS the fit read, or Ethernet's.
func mssOf(f *fit.Result) float64 {
	for _, dir := range f.Directions {
		if m := dir.Params["mss_bytes"]; dir.Data && m.Known() {
			return m.Value
		}
	}
	return 1460
}

// bucketTime is the token bucket's size in time at its rate: a
// millisecond's data, the burst a link's own framing and a host's
// interrupt coalescing let through at once.
const bucketTime = time.Millisecond

// networkLimited says nothing at the ends held the sender back: not its
// application, not the receive window or its own buffer, not a short
// transfer's slow start or a delayed ACK.
func networkLimited(d *analyzer.Direction) bool {
	if d.Diagnosis == nil {
		return false
	}
	switch d.Diagnosis.Limit {
	case analyzer.LimitBandwidth, analyzer.LimitCongestion, analyzer.LimitLoss:
		return true
	}
	return false
}

// withDelay is the spec text with its first netem stage's delay set to
// oneWay (a netem stage put first where there is none).
func withDelay(text string, oneWay time.Duration) (string, error) {
	s, err := spec.Parse(text)
	if err != nil {
		return "", err
	}
	for _, st := range s.Stages {
		if n, ok := st.(*spec.Netem); ok {
			n.Latency = oneWay
			return s.String(), nil
		}
	}
	s.Stages = append([]spec.Stage{&spec.Netem{Latency: oneWay}}, s.Stages...)
	return s.String(), nil
}

// steadyDelivery is the transfer's median tenth after the first (slow
// start's), 0 where the fit has no tenths.
func steadyDelivery(f *fit.Result) units.Rate {
	if len(f.Transfer.RateDecilesBps) < 2 {
		return 0
	}
	steady := slices.Sorted(slices.Values(f.Transfer.RateDecilesBps[1:]))
	return units.Rate(steady[len(steady)/2])
}
