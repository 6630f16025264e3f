package experiment

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/fit"
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

// labRTT is the round trip the lab's path has: the fit's where it
// inferred one, else the one shownPath adds (the capture's own minimum).
func labRTT(f *fit.Result, d *analyzer.Direction) time.Duration {
	for _, dir := range f.Directions {
		if rtt := dir.Params["rtt_ms"]; dir.Data && rtt.Known() {
			return msDuration(rtt.Value)
		}
	}
	return msDuration(d.PathRTTMs)
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// initialWindowSegments is Linux's initial congestion window (RFC 6928's
// ten segments): what an answer's first round trip carries.
const initialWindowSegments = 10

// delayedAckMin is Linux's shortest delayed-ACK timer (TCP_DELACK_MIN,
// 40 ms): the least a client holding its ACK adds to an answer that
// Nagle's algorithm holds behind it.
const delayedAckMin = 40 * time.Millisecond

// requestTimeoutSlack is how many times the original's slowest answer a
// reproduction's request may take before it counts as failed.
const requestTimeoutSlack = 4

// shownPath completes the lab cfg a fit describes with what the capture
// does bound where the fit says nothing, and lists what it assumed:
//
//   - the round trip, where the fit withheld it: the capture's minimum
//     round trip of the data (the analyzer's path RTT), split evenly;
//   - a bottleneck the transfer never filled: none;
//   - an application that paced its sender (the analyzer's diagnosis
//     "application"): writes at the rate it sent while it had data, with
//     its waits spread evenly through the transfer;
//   - a request/response server's think time: the client's median
//     latency less the round trip, the answer's time on the wire and,
//     where the original was delayed-ACK limited, the delayed-ACK timer.
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
	if j := data.Params["jitter_ms"]; !j.Known() && d.PathRTTP50Ms > (1+verdictRTTTolerance)*d.PathRTTMs {
		out = append(out, NotShown{What: "the round trip's variation", Assumed: "none: every packet has the lab's fixed delay",
			Why: units.Sprintf("the capture's median round trip %.4g ms is over its minimum %.4g ms, and the fit did not model why (%s)", d.PathRTTP50Ms, d.PathRTTMs, j.Unknown)})
	}
	if r := data.Params["rate_bps"]; !r.Known() {
		out = append(out, NotShown{What: "a bottleneck", Assumed: "none: the lab's path is as fast as this host",
			Why: "the transfer never filled one: " + r.Unknown})
	}
	app := d.Diagnosis != nil && d.Diagnosis.Limit == analyzer.LimitApplication
	if rr := f.RequestResponse; rr != nil {
		out = append(out, shownAnswers(cfg, f, d, rr, labRTT(f, d), app)...)
		return out
	}
	if app {
		cfg.WriteRate = units.Rate(d.BusyRateBps())
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

// shownAnswers sets a request/response lab's server from what the capture
// shows of its answers: their pace (where the application's rate, not
// slow start, set the time an answer took), its think time, Nagle's
// algorithm (on where the original's median answer had a delayed-ACK
// stall in it) and the requests' timeout.
func shownAnswers(cfg *Config, f *fit.Result, d *analyzer.Direction, rr *fit.RequestResponse, rtt time.Duration, app bool) []NotShown {
	var out []NotShown
	mss := 1460.0 // Ethernet's MSS, where the fit read none
	for _, dir := range f.Directions {
		if m := dir.Params["mss_bytes"]; dir.Data && m.Known() {
			mss = m.Value
		}
	}
	// Slow start doubles from the initial window: the round trips an
	// answer of this size takes, the first to its last byte's ACK.
	rounds := math.Ceil(math.Log2(float64(rr.ResponseBytes)/(initialWindowSegments*mss) + 1))
	wire := time.Duration(max(0, rounds-1)) * rtt
	// The analyzer's busy time of an answer runs from its first byte to
	// its last's ACK: longer than slow start's rounds, the application
	// set it, at the answer's size over that time less the last ACK's
	// round trip.
	if busy := units.Rate(d.BusyRateBps()); app && busy > 0 {
		if took := busy.TxTime(units.Size(rr.ResponseBytes)); took > time.Duration(max(1, rounds))*rtt {
			wire = took - rtt
			cfg.WriteRate = units.Rate(8 * float64(rr.ResponseBytes) / wire.Seconds())
			out = append(out, NotShown{What: "the application's pace",
				Assumed: fmt.Sprintf("answers written at %s", cfg.WriteRate.Human()),
				Why: fmt.Sprintf("an answer of %s took %v from its first byte to its last's ACK, more than slow start's %.0f round trips: the application's rate, assumed the same for every answer",
					units.Size(rr.ResponseBytes).Human(), took.Round(time.Millisecond), max(1, rounds))})
		}
	}
	think := msDuration(rr.LatencyP50Ms) - rtt - wire
	stall := f.Transfer.Limit == analyzer.LimitDelayedAck && think >= delayedAckMin
	cfg.NoNagle = !stall
	why := fmt.Sprintf("the client's median latency %.4g ms less the round trip %v and the answer's %v on the wire",
		rr.LatencyP50Ms, rtt.Round(10*time.Microsecond), wire.Round(10*time.Microsecond))
	if stall {
		think -= delayedAckMin
		why += fmt.Sprintf(" and the delayed-ACK timer's %v (the original was delayed-ACK limited: the lab's answer in two writes with Nagle's algorithm on stalls the same way)", delayedAckMin)
	}
	think = max(think, time.Microsecond)
	cfg.ThinkTime = think.Round(10 * time.Microsecond)
	out = append(out, NotShown{What: "the server's think time", Assumed: cfg.ThinkTime.String(),
		Why: why + units.Sprintf("; the capture shows the latency, not how it splits between the path and the server (the fit read %.4g ms from where the capture was taken)", rr.ThinkMs)})
	cfg.RequestTimeout = max(5*time.Second, requestTimeoutSlack*msDuration(rr.LatencyP99Ms))
	return out
}
