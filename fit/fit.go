// Package fit infers, from a capture of a TCP transfer, the path and the
// endpoints that produced it: the round trip, the bottleneck's rate, burst
// and buffer, the loss process, reordering and jitter, the receive window
// and send buffer, each with an interval and its evidence, and writes them
// as a wanlab spec and sysctls that a lab (`wanlab experiment --like`)
// applies to reproduce the transfer. What the capture does not show is
// said, never guessed.
package fit

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/internal/binom"
	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/predict"
	"github.com/wanlab/wanlab/tuner"
	"github.com/wanlab/wanlab/units"
)

// Options tune a fit.
type Options struct {
	// Flow picks the connection (analyze's --flow syntax); empty: the one
	// that carried the most data.
	Flow string
	// WindowRatio is the share of a receive buffer the receiver's kernel
	// offered as window (0: predict.ScalingRatio, Linux's default).
	WindowRatio float64
	// Progress, when set, gets one line per step.
	Progress func(string)
	// MaxOpen is the analysis's budget of connections open at once (0:
	// analyzer.DefaultMaxOpen; `--max-open-connections`).
	MaxOpen int
	// MaxPackets is the budget of the fitted connection's packets (0:
	// DefaultMaxPackets; `--max-packets`): beyond it, the first are fitted.
	MaxPackets int
}

// Result is a fit. JSON names are a contract (docs/fit.md).
type Result struct {
	File       string     `json:"file"`
	Connection ConnInfo   `json:"connection"`
	Others     []ConnInfo `json:"other_connections,omitempty"`
	// OthersUnlisted counts the other connections with data left out of
	// Others, which lists at most MaxOthersListed (those with the most
	// data, in capture order).
	OthersUnlisted int `json:"other_connections_unlisted,omitempty"`
	// ReadStopped says why the capture's reader gave up before its end
	// (the analyzer's read_stopped): the fit is of the frames before it.
	// Empty when the whole file was read.
	ReadStopped string `json:"read_stopped,omitempty"`
	// ReaderWarnings are the notes on how the capture was read (the part
	// read, broken records), also in Notes: what `experiment --like`
	// reports beside its lab.
	ReaderWarnings []string `json:"reader_warnings,omitempty"`
	// CapturedAt is where the capture was taken: "client", "server",
	// "middle" or "unknown".
	CapturedAt string   `json:"captured_at"`
	Transfer   Transfer `json:"transfer"`
	// RequestResponse is set when the connection carried requests and
	// responses in turns (Transfer.Direction "request-response").
	RequestResponse *RequestResponse `json:"request_response,omitempty"`
	Directions      []Direction      `json:"directions"`
	Sysctls         Sysctls          `json:"sysctls"`
	// SelfCheck is how well the answer reproduces the capture; claims it
	// rejects are withheld (unknown, with the self-check named).
	SelfCheck *SelfCheck `json:"self_check"`
	// Notes says plainly what could not be inferred, and why.
	Notes []string `json:"notes"`
}

// ConnInfo names a connection of the capture.
type ConnInfo struct {
	Index      int     `json:"index"`
	Client     string  `json:"client"`
	Server     string  `json:"server"`
	DurationMs float64 `json:"duration_ms"`
	// Bytes is the data the connection carried, both ways.
	Bytes int64 `json:"bytes"`
}

// Transfer is what the connection did, for a lab to do the same.
type Transfer struct {
	// Direction is "download" (the server sent the data), "upload", or
	// "request-response" (turns of requests and answers: RequestResponse).
	Direction   string `json:"direction"`
	Bytes       int64  `json:"bytes"`
	Connections int    `json:"connections"`
	// RateBps is the data rate measured (unique bytes over the transfer
	// time), Limit the analyzer's diagnosis of what bound it, or the
	// receive window where the fit finds it bound the flight.
	RateBps float64 `json:"rate_bps"`
	Limit   string  `json:"limit"`
	// RTTP50Ms (the median round trip: data to ACK near the sender, the
	// receiver's timestamps echoed near the receiver, else the handshake;
	// both legs in the middle) and LossRate are what a reproduction is compared on.
	RTTP50Ms   float64 `json:"rtt_p50_ms"`
	LossRate   float64 `json:"loss_rate"`
	WindowMax  int64   `json:"window_max_bytes"`
	DataPkts   int     `json:"data_packets"`
	ResentPkts int     `json:"resent_packets"`
	// LossEpisodes is how many times the path lost data: runs of lost
	// segments within two round trips of one another count once (a slow
	// start's overshoot drops hundreds together). A reproduction's
	// retransmission rate is compared by episodes, not segments.
	LossEpisodes int `json:"loss_episodes"`
	// RateDecilesBps is the data rate in each tenth of the transfer time
	// (from the first byte acknowledged to the last), the rate over time a
	// reproduction is compared on.
	RateDecilesBps []float64 `json:"rate_deciles_bps"`
}

// Direction is one direction of the path: from where to where, the spec a
// lab applies to it, and the parameters behind the spec.
type Direction struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Data says this direction carried the transfer's data.
	Data bool `json:"data"`
	// Spec is the direction's impairment in tc syntax, what `experiment
	// --like` applies (to-client for server to client).
	Spec string `json:"spec"`
	// Bottleneck is "token bucket", "fixed link" or "" (none seen);
	// LossModel "random", "bursty", "none" or "unknown" (too few losses
	// to tell, or to tell how they cluster); CongestionControl the
	// sender's signature ("loss-based (cubic)", "loss-based (reno)",
	// "model-based (bbr)") or "".
	Bottleneck        string           `json:"bottleneck"`
	LossModel         string           `json:"loss_model"`
	CongestionControl string           `json:"congestion_control"`
	CapturedNear      string           `json:"captured_near"`
	Params            map[string]Param `json:"params"`
}

// Sysctls are the settings of each end, key to value.
type Sysctls struct {
	Client map[string]string `json:"client"`
	Server map[string]string `json:"server"`
}

// ErrNoConnection says the capture holds no TCP connection with data.
var ErrNoConnection = errors.New("no TCP connection with data")

// File fits the capture at path.
func File(path string, opt Options) (*Result, error) {
	sel, err := analyzer.ParseFlowSelector(opt.Flow)
	if err != nil {
		return nil, err
	}
	progress := opt.Progress
	if progress == nil {
		progress = func(string) {}
	}
	name := hostfile.Name(path) // as printed
	progress("analyzing " + name)
	conns := captureConns{sel: sel}
	res, err := analyzer.AnalyzeFile(path, analyzer.Options{NoSeries: true, FinishedPoints: -1, MaxOpen: opt.MaxOpen,
		OnFinish: conns.add, Wanted: conns.wanted})
	if err != nil {
		return nil, err
	}
	c := conns.best
	if c == nil {
		if opt.Flow != "" {
			return nil, fmt.Errorf("%s: --flow %q: %w among the %d connections", name, opt.Flow, ErrNoConnection, conns.n)
		}
		return nil, fmt.Errorf("%s: %w (%d TCP packets in %d connections)", name, ErrNoConnection, res.TCPPackets, conns.n)
	}
	out := &Result{File: name, Connection: connInfo(c)}
	out.ReaderWarnings = readerNotes(res, opt.MaxOpen)
	for _, n := range out.ReaderWarnings {
		out.Notes = append(out.Notes, "capture: "+n)
	}
	if res.ReadStopped != "" {
		out.ReadStopped = res.ReadStopped
	}
	for _, o := range conns.summaries {
		if o.info.Index != c.Index && o.info.Bytes > 0 {
			out.Others = append(out.Others, o.info)
		}
	}
	if len(out.Others) > 0 {
		out.Notes = append(out.Notes, fmt.Sprintf("the capture holds %d connections with data: connection %d (the most data) is fitted; pick another with --flow",
			len(out.Others)+1, c.Index))
	}
	out.Others, out.OthersUnlisted = listOthers(out.Others)
	progress(fmt.Sprintf("reading connection %d (%s <-> %s)", c.Index, c.Client, c.Server))
	maxPackets := opt.MaxPackets
	if maxPackets <= 0 {
		maxPackets = DefaultMaxPackets
	}
	recs, cut, err := readConnection(path, c, opt.MaxOpen, maxPackets)
	if err != nil {
		return nil, err
	}
	if cut {
		n := fmt.Sprintf("the connection has more than %d packets (the fit's budget, about %d bytes a packet; --max-packets raises it): fitted on its first %d", maxPackets, PacketBytes, maxPackets)
		out.Notes = append(out.Notes, n)
		out.ReaderWarnings = append(out.ReaderWarnings, n)
	}
	ratio := opt.WindowRatio
	if ratio <= 0 {
		ratio = predict.ScalingRatio
	}
	dataDir := 1
	if c.Directions[0].UniqueBytes > c.Directions[1].UniqueBytes {
		dataDir = 0
	}
	progress("fitting the path")
	f := newFlow(recs, c, dataDir)
	fitDirection(out, c, f, recs, ratio, maxPackets)
	for _, d := range out.Directions {
		clampToDomain(d.Params)
	}
	if err := plausible(out); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	progress("checking the fit against the capture")
	out.SelfCheck = checkSelf(out, f, maxPackets)
	if rr := f.turns(recs, c, conns.summaries); rr != nil {
		out.RequestResponse = rr
		out.Transfer.Direction = "request-response"
		out.Transfer.Connections = rr.Connections
	}
	return out, nil
}

func connInfo(c *analyzer.Connection) ConnInfo {
	return ConnInfo{Index: c.Index, Client: c.Client.String(), Server: c.Server.String(),
		DurationMs: c.Duration.Seconds() * 1000, Bytes: c.UniqueBytes()}
}

// fitDirection infers everything and fills out.
func fitDirection(out *Result, c *analyzer.Connection, f *flow, recs []record, ratio float64, budget int) {
	st := f.st
	p := map[string]Param{}
	note := func(name string, q Param) {
		p[name] = q
		if !q.Known() {
			out.Notes = append(out.Notes, name+": "+q.Unknown)
		}
	}
	where, whereWhy := f.capturePoint()
	rtt := f.baseRTT(where)
	note("rtt_ms", rtt)
	out.CapturedAt = map[string]string{"sender": sideName(f.dir, true), "receiver": sideName(f.dir, false)}[where]
	if out.CapturedAt == "" {
		out.CapturedAt = where
	}
	f.queueing()
	jitter := f.jitter(where)
	rate := f.bottleneckRate(where)
	if !rate.Known() && !(jitter.Known() && jitter.Value > 0) {
		// No queue held long enough, or steadily enough, to clock the
		// ACKs by: the packets' spacing may still show the bottleneck.
		if d := f.dispersionRate(where); d.Known() {
			rate = d
			f.rate, f.rateLo, f.rateHi = d.Value, d.Low, d.High
		} else {
			rate.Unknown += "; " + d.Unknown
		}
	}
	note("rate_bps", rate)
	runs, sent, reorders := f.losses(where)
	if r, ok := f.rateAtLosses(runs); ok {
		// The episodes' rate says there is a bottleneck: its losses are
		// tail drops (its rate stays unknown: "at least").
		rate = r
		out.Notes = slices.DeleteFunc(out.Notes, func(n string) bool { return strings.HasPrefix(n, "rate_bps: ") })
		note("rate_bps", rate)
		for i := range runs {
			runs[i].full = true
		}
	}
	// Near the sender, where the capture's sends are the path's input,
	// the bottleneck the replay likelihood fits fills a rate the queue's
	// estimators left unknown; the losses within a round trip of the
	// drops its bucket makes are tail drops, not random loss.
	var bucket *bucketFit
	if where == "sender" && !rate.Known() {
		bucket = f.fitBucket(budget)
		if bucket.Bucket && !bucket.RateOpen {
			rate = withSamples(known(bucket.Rate, bucket.RateLo, bucket.RateHi, bucket.Why), bucket.Timed)
			f.rate, f.rateLo, f.rateHi = bucket.Rate, bucket.RateLo, bucket.RateHi
			out.Notes = slices.DeleteFunc(out.Notes, func(n string) bool { return strings.HasPrefix(n, "rate_bps: ") })
			note("rate_bps", rate)
			for i := range runs {
				if bucket.explains(runs[i].t, f.base) {
					runs[i].full = true
				}
			}
		} else {
			rate.Unknown += "; " + bucket.Why
			out.Notes = slices.DeleteFunc(out.Notes, func(n string) bool { return strings.HasPrefix(n, "rate_bps: ") })
			note("rate_bps", rate)
		}
	}
	line := f.delayLineDrops(runs, where, f.base/2)
	if line.limit.Known() || line.episodes >= 2 {
		note("delay_limit_packets", line.limit)
	}
	firstLoss := time.Duration(0)
	for _, r := range runs {
		if firstLoss == 0 || r.t < firstLoss {
			firstLoss = r.t
		}
	}
	burst, kind := f.burst(firstLoss, where)
	if rate.Known() {
		note("burst_bytes", burst)
	}
	var randSegs, randRuns, congSegs, multi int
	longest := 0
	var drops []lossRun
	for _, r := range runs {
		if r.full {
			congSegs += r.segs
			if !r.line {
				drops = append(drops, r)
			}
			continue
		}
		randSegs += r.segs
		randRuns++
		if r.segs >= 2 {
			multi++
		}
		longest = max(longest, r.segs)
	}
	buffer := f.bufferSize(congSegs, drops)
	if bucket != nil && bucket.Bucket && !bucket.RateOpen {
		// The rate is the replay likelihood's. Its buffer trades off
		// against the burst the model assumes (b(R)), and was 32-52 %
		// off on the lab's small buffers; nor do the delays the data
		// met at the overflows stand beside that rate (a busy core's
		// stall lengthened them: 3.2 ms met at a 2.5 ms buffer). The
		// buffer is not claimed.
		buffer = unknown("the bottleneck's rate came from the replay likelihood, whose buffer trades off against the burst it assumes: not identified")
	}
	note("buffer_bytes", buffer)
	p["congestion_losses"] = known(float64(congSegs), float64(congSegs), float64(congSegs),
		"segments lost at a full bottleneck queue (tail drops, not counted as random loss): runs that met the queue at the overflows' level, runs clustered as independent losses seldom are (several within two round trips), the runs within two round trips of those, and a delay line's overflows (delay_limit_packets)")
	lp := lossFit(lossCounts{segs: randSegs, runs: randRuns, multi: multi, longest: longest, sent: sent}, where)
	lossModel, lossSpec := lp.model, lp.spec
	for k, v := range lp.params {
		p[k] = v
	}
	out.Notes = append(out.Notes, lp.notes...)
	reorderSpec := ""
	if where == "sender" {
		note("reorder_percent", unknown("reordering shows at the receiver; this capture was taken near the sender"))
	} else if sent > 0 {
		k := len(reorders)
		lo, hi := binom.Wilson(k, sent, binom.Z95)
		if k == 0 {
			p["reorder_percent"] = withSamples(known(0, 0, ruleOfThree(sent), units.Sprintf("no segment arrived out of order: under %.2g %% at 95 %%", ruleOfThree(sent))), sent)
		} else {
			s := sorted(reorders)
			p["reorder_percent"] = withSamples(known(float64(k)/float64(sent)*100, lo*100, hi*100, fmt.Sprintf(
				"%d of %d segments arrived ahead of others (above a hole that the segments they overtook filled within three quarters of a round trip)", k, sent)), sent)
			p["reorder_depth_packets"] = known(quantile(s, 0.5), s[0], s[len(s)-1], "how many segments each overtook (median, range)")
			if (!jitter.Known() || jitter.Value == 0) && k >= 5 {
				reorderSpec = "reorder " + pct(float64(k)/float64(sent)*100)
			}
		}
	}
	note("jitter_ms", jitter)
	if jitter.Known() {
		rtt = jitteredMin(rtt, jitter.Value, f.baseSamples())
		note("rtt_ms", rtt)
	}

	// The endpoints.
	rx := c.Directions[1-f.dir]
	if st.PeerMaxWindowBytes > 0 {
		p["receive_window_bytes"] = known(float64(st.PeerMaxWindowBytes), float64(st.PeerMaxWindowBytes-int64(f.mss)), float64(st.PeerMaxWindowBytes),
			fmt.Sprintf("largest window the receiver advertised; data in flight within 10 %% of the window on %.0f %% of data segments", st.WindowLimitedShare*100))
	}
	limit := ""
	if d := st.Diagnosis; d != nil {
		limit = d.Limit
	} else if c.Diagnosis != nil {
		limit = c.Diagnosis.Limit
	}
	perRTT, steadyBps := f.perRoundTrip(st.DataRateBps)
	// The round trip rose as a queue's does while data flowed: the
	// analyzer's own test (its median at 1.5 times the base and 2 ms
	// more, from data to ACK near the sender, from the receiver's
	// timestamps echoed elsewhere, less their tick), against the fit's
	// base, not the analyzer's (near the receiver its handshake, which
	// called a reordered path's recovery waits a queue and its limit
	// bandwidth).
	baseMs := float64(f.base) / float64(time.Millisecond)
	medMs := st.RTTP50Ms
	if where != "sender" {
		medMs = 0
		if st.EchoRTTSamples >= 10 {
			medMs = st.EchoRTTP50Ms - 1
		}
	}
	limit, why := fitLimit(limitEvidence{limit: limit, where: where, lossModel: lossModel, rate: rate, transferBps: st.DataRateBps,
		lossRuns: len(runs), perRTT: perRTT, window: float64(st.PeerMaxWindowBytes),
		queued:    baseMs > 0 && medMs >= 1.5*baseMs+2,
		queueHeld: f.queueHeld(), tailDrops: len(drops)})
	if why != "" {
		out.Notes = append(out.Notes, why)
	}
	sender, receiver := map[string]string{}, map[string]string{}
	bound := limit == analyzer.LimitReceiveWindow || st.WindowLimitedShare >= 0.5 || f.windowBound(rate)
	// Near the sender a flight that reached the largest window met the
	// window's cap at its peak, however seldom: a reproduction with a
	// larger one lets the flight grow further (into a delay line's
	// limit, a buffer's) than the original's did.
	capped := where == "sender" && st.PeerMaxWindowBytes > 0 && float64(st.MaxInFlightBytes) >= windowCapShare*float64(st.PeerMaxWindowBytes)
	if bound || capped {
		why := "the window bound the flight"
		if bound {
			// The window bound the flight: the limit, where the analyzer
			// (near the receiver, the flight only estimated) said another.
			limit = analyzer.LimitReceiveWindow
		} else {
			why = fmt.Sprintf("the flight reached the largest window at its peak (%s of %s), though within 10 %% of the window on %.0f %% of data segments only: the window's cap",
				units.Size(st.MaxInFlightBytes).Human(), units.Size(st.PeerMaxWindowBytes).Human(), st.WindowLimitedShare*100)
		}
		buf := predict.BufferFor(units.Size(st.PeerMaxWindowBytes), ratio)
		note("receive_buffer_bytes", known(float64(buf), float64(predict.BufferFor(units.Size(st.PeerMaxWindowBytes), ratio*1.1)),
			float64(predict.BufferFor(units.Size(st.PeerMaxWindowBytes), ratio*0.9)),
			fmt.Sprintf("%s: window / %.2f (the share of the buffer %s offers as window; pass --window-ratio if the receiver's kernel differs)",
				why, ratio, ratioSource(ratio))))
		max := (int64(buf) + 4095) / 4096 * 4096
		receiver["net.ipv4.tcp_rmem"] = fmt.Sprintf("4096 %d %d", min(131072, max), max)
	} else {
		note("receive_buffer_bytes", unknown(fmt.Sprintf("the receive window never bound the flight (%.0f %% of segments near it): the buffer was at least %s / %.2f",
			st.WindowLimitedShare*100, units.Size(st.PeerMaxWindowBytes).Human(), ratio)))
	}
	goal := int64(tuner.SizeGoal(units.Size(f.mss)))
	oneSkb := where == "sender" && (limit == analyzer.LimitCongestion || limit == "") && !rate.Known() && len(runs) == 0 &&
		holdsOneSkb(st, goal, f.base)
	if limit == analyzer.LimitSendBuffer || oneSkb {
		limit = analyzer.LimitSendBuffer
		fl := st.P50InFlightBytes
		lo, hi := float64(fl)*0.9, float64(st.MaxInFlightBytes)
		ev := fmt.Sprintf("median data in flight %s with the window and the path far from full: the sender's buffer held it back", units.Size(fl).Human())
		if where != "sender" {
			// Away from the sender the flight is the data delivered
			// per round trip.
			fl = int64(perRTT)
			lo, hi = float64(fl)*0.9, float64(fl)*1.1
			ev = fmt.Sprintf("data delivered per round trip %s (%s, the median of the transfer's last eight tenths, times %s) with the window and the path far from full, and no loss: the sender's buffer held it back",
				units.Size(fl).Human(), units.Rate(steadyBps).Human(), ms(f.base))
		}
		wmem := fl
		if fl <= goal*5/4 {
			wmem = 4096
			ev += fmt.Sprintf("; one size goal (%s) in flight is what any tcp_wmem max up to it gives", units.Size(goal).Human())
		}
		note("send_window_bytes", known(float64(fl), lo, hi, ev))
		sender["net.ipv4.tcp_wmem"] = fmt.Sprintf("4096 %d %d", min(16384, wmem), wmem)
	}
	p["mss_bytes"] = known(float64(f.mss), float64(f.mss), float64(f.mss), "the smaller MSS option of the SYNs, or the largest segment")
	if st.WindowScaleKnown {
		p["window_scale"] = known(float64(max(rx.WindowScale, 0)), float64(max(rx.WindowScale, 0)), float64(max(rx.WindowScale, 0)), "the receiver's SYN")
	} else {
		note("window_scale", unknown("the handshake was not captured: window scaling unknown, windows are raw"))
	}
	if c.HandshakeSeen {
		if !(st.SACKPermitted && rx.SACKPermitted) {
			sender["net.ipv4.tcp_sack"], receiver["net.ipv4.tcp_sack"] = "0", "0"
		}
		if !(st.Timestamps && rx.Timestamps) {
			sender["net.ipv4.tcp_timestamps"], receiver["net.ipv4.tcp_timestamps"] = "0", "0"
		}
		if !st.WindowScaleKnown || st.WindowScale < 0 || rx.WindowScale < 0 {
			sender["net.ipv4.tcp_window_scaling"], receiver["net.ipv4.tcp_window_scaling"] = "0", "0"
		}
	}
	cc, ccWhy := "", "the data in flight is known near the sender only"
	if where == "sender" {
		cc, ccWhy = f.congestionControl(runs)
		if p := f.probeRTT(); len(p) > 0 && (cc == "" || cc == "model-based (bbr)") {
			cc, ccWhy = "model-based (bbr)", fmt.Sprintf("BBR's ProbeRTT: the data in flight held at 4 segments for 150 ms or more while sending, %d times (first at %.2f s)", len(p), p[0].Seconds())
		}
	}
	if cc != "" {
		name := strings.TrimSuffix(strings.TrimPrefix(cc[strings.IndexByte(cc, '(')+1:], ""), ")")
		sender["net.ipv4.tcp_congestion_control"] = name
	} else {
		out.Notes = append(out.Notes, "congestion control: "+ccWhy)
	}

	// The specs: the round trip split evenly, the bottleneck and the
	// losses on the data's direction.
	// The round trip split evenly. netem's jitter is uniform in +-J around
	// the delay, so the lowest RTT is the sum of the delays less J.
	oneWay := time.Duration(0)
	if rtt.Known() {
		v := rtt.Value
		if jitter.Known() {
			v += jitter.Value
		}
		oneWay = time.Duration(v * float64(time.Millisecond) / 2)
	}
	dataSpec := netemStage(oneWay, jitter, lossSpec, reorderSpec)
	if rate.Known() && dataSpec != "" {
		// netem's limit (1000 packets by default) counts the packets in
		// its delay line and in its child's queue: room for both, so that
		// the tbf's limit is the buffer.
		pkt := float64(f.mss) * f.ipFact
		need := int(math.Ceil((oneWay.Seconds()*rate.Value/8 + p["buffer_bytes"].Value*1.5) / pkt * 1.2))
		switch {
		case line.limit.Known():
			dataSpec += fmt.Sprintf(" limit %d", line.spec)
		case max(need, line.spec) > lineDefault:
			dataSpec += fmt.Sprintf(" limit %d", max(need, line.spec))
		}
	} else if line.spec > 0 && oneWay > 0 {
		// The delay line's limit where it overflowed; room where it came
		// near netem's default without.
		dataSpec += fmt.Sprintf(" limit %d", line.spec)
	}
	if rate.Known() {
		r := roundRate(rate.Value)
		b := burstBytes(burst, r, f.mss)
		lim := units.Size(0)
		if bq := p["buffer_bytes"]; bq.Value > 0 {
			lim = units.Size(bq.Value)
			if !bq.Known() {
				lim = lim * 3 / 2 // at least what was seen; more never filled
			}
		}
		lim = max(lim, b+units.Size(2*f.mss)) // tbf needs room for a burst and a packet
		tbf := fmt.Sprintf("tbf rate %s burst %s limit %s", r, roundSize(b), roundSize(lim))
		if dataSpec == "" {
			dataSpec = tbf
		} else {
			dataSpec += " | " + tbf
		}
	}
	ackSpec := netemStage(oneWay, Param{}, "", "")
	from, to := st.From.String(), st.To.String()
	out.Directions = []Direction{
		{From: from, To: to, Data: true, Spec: dataSpec, Bottleneck: bottleneckKind(rate, kind), LossModel: lossModel,
			CongestionControl: cc, CapturedNear: where, Params: p},
		{From: to, To: from, Spec: ackSpec, CapturedNear: map[string]string{"sender": "receiver", "receiver": "sender"}[where],
			Params: map[string]Param{"rtt_ms": rtt}},
	}
	if out.Directions[1].CapturedNear == "" {
		out.Directions[1].CapturedNear = where
	}
	p["rtt_ms"] = Param{Value: rtt.Value, Low: rtt.Low, High: rtt.High, Evidence: rtt.Evidence + "; captured near the " + where + ": " + whereWhy, Unknown: rtt.Unknown}
	if f.dir == 1 {
		out.Sysctls = Sysctls{Client: receiver, Server: sender}
	} else {
		out.Sysctls = Sysctls{Client: sender, Server: receiver}
	}
	out.Transfer = Transfer{Direction: map[int]string{0: "upload", 1: "download"}[f.dir], Bytes: st.UniqueBytes, Connections: 1,
		RateBps: st.DataRateBps, Limit: limit, LossRate: st.LossRate, WindowMax: st.PeerMaxWindowBytes,
		DataPkts: st.DataPackets, ResentPkts: st.ResentPackets + st.GapFills, LossEpisodes: len(episodesOf(f, runs))}
	// The median round trip as the capture point sees it: the analyzer's
	// (never 0 where it timed one); both legs' in the middle; the echoes'
	// where the ends' reactions alone put it near the receiver.
	switch {
	case where == "middle" && st.RTTSamples > 0 && st.EchoRTTSamples > 0:
		out.Transfer.RTTP50Ms = st.RTTP50Ms + st.EchoRTTP50Ms
	case where == "receiver" && st.CapturedNear != where:
		out.Transfer.RTTP50Ms = st.EchoRTTP50Ms
	default:
		out.Transfer.RTTP50Ms = st.PathRTTP50Ms
	}
	out.Transfer.RateDecilesBps = f.deciles()
}

// holdsOneSkb says a sender's flight never grew past one skb (a size
// goal) for twenty round trips or more with the window far away (two
// thirds of it at most, and the flight never near it: a receiver's
// window that autotuning grows with what it gets stays small behind a
// sender that sends little, 83 KiB over a 44 KiB flight once): with no
// loss and no queue either, a send buffer that holds one size goal, as
// a congestion window would have grown (the analyzer, seeing no other
// cause, may name it).
func holdsOneSkb(st *analyzer.Direction, goal int64, rtt time.Duration) bool {
	return st.MaxInFlightBytes > 0 && st.MaxInFlightBytes <= goal*5/4 &&
		2*st.PeerMaxWindowBytes > 3*st.MaxInFlightBytes && st.WindowLimitedShare < 0.05 &&
		rtt > 0 && st.TransferMs >= 20*rtt.Seconds()*1000
}

// perRoundTrip is the data delivered per round trip (bytes) at the rate
// of the transfer's last eight tenths (their median: slow start's first
// two lower the mean), and that rate; the transfer's mean rate where the
// deciles are not known.
func (f *flow) perRoundTrip(meanBps float64) (bytes, bps float64) {
	bps = meanBps
	if d := f.deciles(); len(d) == 10 {
		bps = quantile(sorted(d[2:]), 0.5)
	}
	return bps / 8 * f.base.Seconds(), bps
}

// busyQueueShare is the share of the RTT samples a bottleneck's queue
// must hold in for the bottleneck, not the window, to have held the
// transfer.
const busyQueueShare = 0.5

// queueHeld is the share of the RTT samples that met a queue at the
// bottleneck, where the queue moved as one does (smoothQueue, the rate's
// own test); else 0.
func (f *flow) queueHeld() float64 {
	if f.qmax < f.theta || f.qRho < smoothQueue {
		return 0
	}
	return f.qShare
}

// windowCapShare is how near the largest window the flight must come,
// near the sender, for the window's cap to be the buffer's.
const windowCapShare = 0.9

// limitEvidence is what fitLimit weighs the analyzer's limit against.
type limitEvidence struct {
	limit, where, lossModel string
	rate                    Param   // the bottleneck's rate, if the fit found it
	transferBps             float64 // the transfer's mean rate
	lossRuns                int     // loss runs not taken for tail drops
	perRTT, window          float64 // data delivered per round trip; the receiver's largest window (bytes)
	// queued says the round trip rose as a queue's does while data
	// flowed (its median at 1.5 times the base and 2 ms more: the
	// analyzer's own test).
	queued bool
	// queueHeld is the share of the RTT samples that met a smooth queue
	// at the bottleneck (0 where it did not move as a queue does);
	// tailDrops the loss runs that met it full (a delay line's apart).
	queueHeld float64
	tailDrops int
}

// fitLimit is the analyzer's limit (what held the transfer back) less
// what it could not know from where the capture was taken. Away from
// the sender the data in flight is its estimate (near the receiver the
// data beyond the receiver's own ACKs, a segment or two), which reads as
// a send buffer holding the flight back (and --like would then pin the
// reproduction's sender to one skb): it stands only where nothing else
// could have, with no bottleneck's rate, no loss, and the data delivered
// per round trip half the receiver's window or less. A bottleneck's tail
// drops are losses to the analyzer, which the fit tells apart (lossModel
// "none": no loss of the path's own). Its bandwidth without a queue's
// rise rests on how evenly the data flowed, which a flight spread over
// the round trip gives too: it stands only with a bottleneck's rate
// found. Where a bottleneck's rate is known and the transfer ran at 80 %
// of it or more, that rate is the limit, not the congestion window
// (which the bottleneck then held) nor a limit not taken; else no limit
// is named, and why says so. Nor is the congestion window named where a
// bottleneck's queue held in most of the samples and overflowed, with its
// rate unknown: the bottleneck held the transfer, however unevenly its
// ACKs came back (behind 1 Gbit/s at 10 ms a BDP's buffer held in 58-93
// % of the samples, with 782-2034 segments dropped, and the server's
// ACKs, bunched by its host, gave no one rate; the buckets a window held
// after slow start's overflow held their queue in 8-37 %).
func fitLimit(e limitEvidence) (string, string) {
	atRate := e.rate.Known() && e.transferBps >= 0.8*e.rate.Value
	var why string
	switch e.limit {
	case analyzer.LimitSendBuffer:
		if e.where == "sender" || !(e.rate.Known() || e.lossRuns > 0 || e.perRTT > e.window/2) {
			return e.limit, ""
		}
		why = "the data in flight is known near the sender only, and this path had a bottleneck, losses or half a window per round trip"
	case analyzer.LimitLoss:
		if e.lossModel != "none" {
			return e.limit, ""
		}
		why = "its losses were a full queue's, and no bottleneck's rate is known"
	case analyzer.LimitBandwidth:
		if e.rate.Known() || e.queued {
			return e.limit, ""
		}
		why = "without a queue's rise in the round trip it rests on how evenly the data flowed, which a flight spread over the round trip gives too, and no bottleneck's rate was found"
	case analyzer.LimitCongestion:
		if atRate {
			return analyzer.LimitBandwidth, ""
		}
		if e.rate.Known() || e.tailDrops == 0 || e.queueHeld < busyQueueShare {
			return e.limit, ""
		}
		why = fmt.Sprintf("a bottleneck's queue held in %.0f %% of the RTT samples and overflowed in %d loss runs: the bottleneck held the transfer, not the window, but its rate was not measured (rate_bps says why)",
			e.queueHeld*100, e.tailDrops)
	default:
		return e.limit, ""
	}
	if atRate {
		return analyzer.LimitBandwidth, ""
	}
	return "", fmt.Sprintf("limit: the analyzer's %q is not taken (%s); the transfer ran at %s", e.limit, why, units.Rate(e.transferBps).Human())
}

// windowBound says the receive window bound the transfer wherever the
// capture was taken: no sustained queue at any bottleneck, and the rate
// reached a window per round trip (the 75th percentile of the transfer's
// last eight tenths at 80 % of it or more): nothing but the window can
// hold a transfer there.
func (f *flow) windowBound(rate Param) bool {
	if rate.Known() || f.base <= 0 || f.st.PeerMaxWindowBytes <= 0 {
		return false
	}
	d := f.deciles()
	if len(d) != 10 {
		return false
	}
	steady := quantile(sorted(d[2:]), 0.75)
	return steady >= 0.8*float64(predict.WindowRate(units.Size(f.st.PeerMaxWindowBytes), f.base))
}

// deciles is the delivery rate (payload) in each tenth of the transfer.
func (f *flow) deciles() []float64 {
	del := f.delivered()
	i0 := 0
	for i0 < len(del) && del[i0].v <= 0 {
		i0++
	}
	if len(del)-i0 < 2 {
		return nil
	}
	del = del[i0:]
	t0, t1 := del[0].t, del[len(del)-1].t
	if t1 <= t0 {
		return nil
	}
	step := (t1 - t0) / 10
	out := make([]float64, 10)
	j := 0
	for k := range out {
		a, b := t0+time.Duration(k)*step, t0+time.Duration(k+1)*step
		out[k] = float64(at(del, b, &j)-at(del, a, &j)) * 8 / step.Seconds()
	}
	return out
}

func withSamples(p Param, n int) Param {
	p.Samples = n
	return p
}

func sideName(dir int, sender bool) string {
	// dir 1: the server sends.
	if (dir == 1) == sender {
		return "server"
	}
	return "client"
}

func ratioSource(r float64) string {
	if r == predict.ScalingRatio {
		return "Linux offers by default (assumed: the capture does not say)"
	}
	return "the receiver's kernel (given)"
}

func bottleneckKind(rate Param, kind string) string {
	if !rate.Known() {
		return ""
	}
	return kind
}

// lossCounts are the loss runs a fit did not take for tail drops: their
// segments and number, those of two segments or more, the longest run, and
// the segments sent.
type lossCounts struct {
	segs, runs, multi, longest, sent int
}

// lossResult is the loss process a fit infers: the params (loss_percent,
// the Gilbert model's), the class, the netem stage and the notes.
type lossResult struct {
	params map[string]Param
	model  string // none, random, bursty, unknown
	spec   string
	notes  []string
}

// lossFit infers the loss process from the runs left once the tail drops
// are out.
func lossFit(c lossCounts, where string) lossResult {
	lp := lossResult{params: map[string]Param{}, model: "none"}
	randSegs, randRuns, multi, longest, sent := c.segs, c.runs, c.multi, c.longest, c.sent
	if sent <= 0 {
		return lp
	}
	lo, hi := binom.Wilson(randSegs, sent, binom.Z95)
	pr := float64(randSegs) / float64(sent)
	if randSegs == 0 {
		lp.params["loss_percent"] = Param{Value: 0, High: ruleOfThree(sent), Samples: sent,
			Evidence: units.Sprintf("no loss observed apart from the queue's: under %.2g %% at 95 %% (%d segments)", ruleOfThree(sent), sent)}
		lp.notes = append(lp.notes, units.Sprintf("loss: none observed: under %.2g %% at 95 %% over %d segments", ruleOfThree(sent), sent))
	} else if randSegs < 5 {
		// Too few for a process, and no rate either: a path with no
		// loss of its own shows as many (a tail loss probe re-sends a
		// segment that was not lost; a tail drop the queue's samples
		// missed). A range from 0.
		lp.model = "unknown"
		lp.params["loss_percent"] = Param{Value: pr * 100, Low: 0, High: hi * 100, Unknown: units.Sprintf(
			"%d of %d segments sent again with no queue to explain it: too few for a loss process (a tail loss probe re-sends one segment that was not lost, a tail drop the queue's samples missed is one too): the path's own loss is between 0 and %.3g %%", randSegs, sent, hi*100)}
		lp.notes = append(lp.notes, fmt.Sprintf("loss: %d isolated re-sends in %d segments: no loss process inferred", randSegs, sent))
	} else if randRuns < 5 && longest >= 5 {
		// A few runs, one of five segments or more: independent
		// losses make one such seldom (p^4 of the runs), an
		// overflow or a bursty channel always; too few runs to
		// tell which (the grid's delay line at 200 ms: 130 segments
		// in 2 runs beside its 3 overflows, read as 0.28 % of random
		// loss).
		lp.model = "unknown"
		lp.params["loss_percent"] = Param{Value: pr * 100, Low: 0, High: hi * 100, Unknown: units.Sprintf(
			"%d of %d segments lost in %d runs, the longest %d, with no queue seen full: independent losses seldom make such a run; a buffer's overflows (tail drops the queue's samples missed) or a bursty channel, too few runs to tell which: the path's own loss is between 0 and %.3g %%",
			randSegs, sent, randRuns, longest, hi*100)}
		lp.notes = append(lp.notes, fmt.Sprintf("loss: %d segments in %d long runs: overflows or a bursty channel, not told apart", randSegs, randRuns))
	} else {
		lp.params["loss_percent"] = known(pr*100, lo*100, hi*100, fmt.Sprintf("%d of %d segments lost with the bottleneck queue not full, in %d runs (%s)",
			randSegs, sent, randRuns, map[bool]string{true: "sent again by the sender", false: "holes the receiver saw filled by retransmissions"}[where == "sender"]))
		lp.params["loss_percent"] = withSamples(lp.params["loss_percent"], sent)
		lp.model = "random"
		lp.spec = "loss " + pct(pr*100)
		expect := float64(randRuns) * pr
		// Bursty when far more runs hold two or more segments than
		// independent losses give (about runs x p): 4 standard
		// deviations and two runs above it, so random loss is
		// called bursty about once in 10,000 fits.
		if randRuns < 5 {
			// Too few runs to tell how they cluster.
			lp.model = "unknown"
			lp.notes = append(lp.notes, fmt.Sprintf("loss model: %d segments lost in %d runs: too few runs to tell random loss from bursty", randSegs, randRuns))
		} else if multi >= 3 && float64(multi) > expect+4*math.Sqrt(expect*(1-pr))+2 {
			lp.model = "bursty"
			meanRun := float64(randSegs) / float64(randRuns)
			r := 1 / meanRun
			gp := pr * r / (1 - pr)
			lp.params["gemodel_p_percent"] = known(gp*100, gp*100*lo/pr, gp*100*hi/pr, fmt.Sprintf("Gilbert-Elliott fit: p = loss x r / (1 - loss)"))
			lp.params["gemodel_r_percent"] = known(r*100, r*100*0.8, min(100, r*100*1.25), fmt.Sprintf(
				"mean loss run %.2f segments (%d of %d runs longer than one; independent losses would give about %.1f)", meanRun, multi, randRuns, expect))
			lp.spec = "loss gemodel " + pct(gp*100) + " " + pct(r*100)
		} else if chance := binom.Tail(randRuns, multi, pr); chance < lossMultiChance {
			// More runs of two or more than independent losses give (a
			// chance under 1e-3: a random fit is so called once in 1,000),
			// too few to call bursty: a bursty channel seen over a few
			// runs, or tail drops the queue's samples missed. The rate
			// stands, the process is not told.
			lp.model = "unknown"
			lp.notes = append(lp.notes, units.Sprintf("loss model: %d of %d runs held two segments or more where independent losses give about %.2g (a chance of %.1g): too many for random loss, too few to call it bursty",
				multi, randRuns, expect, chance))
		}
	}
	return lp
}

// lossMultiChance is the chance below which a fit's runs of two or more
// segments are too many for independent losses.
const lossMultiChance = 1e-3

// netemStage writes the netem stage of a direction, or "" when it has
// nothing to do.
func netemStage(oneWay time.Duration, jitter Param, loss, reorder string) string {
	var parts []string
	if oneWay > 0 {
		d := "delay " + dur(oneWay)
		if jitter.Known() && jitter.Value > 0 {
			d += " " + dur(time.Duration(jitter.Value*float64(time.Millisecond)))
		}
		parts = append(parts, d)
	}
	if loss != "" {
		parts = append(parts, loss)
	}
	if reorder != "" && oneWay > 0 {
		parts = append(parts, reorder)
	}
	return strings.Join(parts, " ")
}

// dur writes a delay to 10 µs.
func dur(d time.Duration) string {
	us := d.Round(10 * time.Microsecond).Microseconds()
	if us%1000 == 0 {
		return strconv.FormatInt(us/1000, 10) + "ms"
	}
	return strconv.FormatFloat(float64(us)/1000, 'f', -1, 64) + "ms"
}

func pct(v float64) string {
	return strconv.FormatFloat(significant(v, 3), 'g', -1, 64) + "%"
}

func roundRate(bps float64) units.Rate {
	return units.Rate(significant(bps/1000, 3) * 1000)
}

// roundSize rounds up to a whole kilobyte.
func roundSize(s units.Size) units.Size { return (s + 1023) / 1024 * 1024 }

// burstBytes is tbf's burst: the bucket measured, or for a fixed link the
// least tbf needs at this rate (two packets, and a kernel timer tick's
// worth of the rate).
func burstBytes(b Param, r units.Rate, mss int) units.Size {
	least := units.Size(max(2*(mss+52), int(r.BytesPerSecond()/250)))
	if b.Known() {
		return max(units.Size(b.Value), least)
	}
	return least
}

// jitter is the delay's variation that no queue explains: queue samples
// that do not follow each other (a queue drains and fills smoothly; a
// random delay per packet does not), with the reordering a random delay
// per packet causes.
func (f *flow) jitter(where string) Param {
	// Below this the spread is the hosts' own (their reaction times, the
	// timers' slack), not a delay anyone configured.
	floor := max(1, f.base.Seconds()*1000*0.05)
	if where == "receiver" {
		if p, ok := f.owdJitter(); ok {
			if p.Value < floor {
				return withSamples(known(0, 0, floor, fmt.Sprintf("%s: no jitter beyond %.2f ms (the hosts' own spread)", p.Evidence, floor)), p.Samples)
			}
			// The reordering the fit counts (a few ahead of many) is a
			// tenth of what a jitter shuffles: a twentieth at the least.
			_, sent, reorders := f.losses(where)
			if why := f.reorderedTooLittle(p.Value, 20, sent, len(reorders)); why != "" {
				return unknown(fmt.Sprintf("the one-way delays varied by +-%.2f ms, %s", p.Value, why))
			}
			return p
		}
	}
	if where == "sender" {
		if p, ok := f.coverJitter(floor); ok {
			return p
		}
		// Segments the receiver got out of order (SACKed holes closed
		// with nothing sent again): their ACKs wait for the holes, so
		// the RTT samples left are of the segments a jitter delayed
		// least, and their spread says nothing of it.
		if n := f.unsentHoles; n >= max(5, len(f.data)/100) {
			return unknown(fmt.Sprintf("%d holes in the receiver's SACKs closed with nothing sent again (reordering), and a random delay shows in the one-way delays near the receiver, not in the round trips near the sender", n))
		}
	}
	if len(f.queue) < 30 {
		return unknown(fmt.Sprintf("%d RTT samples: too few to measure jitter", len(f.queue)))
	}
	vs := make([]float64, len(f.queue))
	for i, q := range f.queue {
		vs[i] = q.v.Seconds() * 1000
	}
	_, sd := meanStd(vs)
	rho := lag1(vs)
	if sd*math.Sqrt(3) < floor {
		return known(0, 0, floor, fmt.Sprintf("RTT spread %.3f ms (standard deviation): no jitter beyond %.2f ms", sd, floor))
	}
	if rho >= 0.7 {
		return unknown(fmt.Sprintf("the RTT varied by %.2f ms but smoothly (lag-1 correlation %.2f): a queue, whose variation hides any jitter", sd, rho))
	}
	// A random delay per packet reorders them (netem's queue is ordered
	// by departure time): without reordering at the receiver the spread is
	// the hosts' (delayed ACKs, loss recovery, the sending application).
	if where == "sender" {
		return unknown(fmt.Sprintf("the RTT varied by %.2f ms, uncorrelated; a random delay would reorder segments, which only a capture near the receiver shows", sd))
	}
	_, sent, reorders := f.losses(where)
	if float64(len(reorders)) < 0.01*float64(len(f.data)) {
		return unknown(fmt.Sprintf("the RTT varied by %.2f ms, uncorrelated, but only %d segments arrived out of order: not a random delay per packet (which reorders them)", sd, len(reorders)))
	}
	j := sd * math.Sqrt(3) // netem's jitter is uniform in +-J: sd = J/sqrt(3)
	if why := f.reorderedTooLittle(j, 5, sent, len(reorders)); why != "" {
		return unknown(fmt.Sprintf("the RTT varied by %.2f ms, uncorrelated, %s", sd, why))
	}
	// A queue that comes and goes was taken for one: not a bottleneck.
	f.qmax, f.qp95 = 0, 0
	n := float64(len(vs))
	return known(j, j*(1-1.96/math.Sqrt(2*n)), j*(1+1.96/math.Sqrt(2*n)), fmt.Sprintf(
		"RTT standard deviation %.3f ms over %d samples, uncorrelated from one to the next (%.2f): a random delay uniform in +-%.2f ms", sd, len(vs), rho, j))
}

// coverJitter measures a random delay per packet near the sender from
// the round trip of every wire segment sent once, timed by the first ACK
// that holds it: a jitter's early segments by their SACKs (the receiver
// answers data out of order at once), the late ones by the cumulative
// ACK of the hole they fill (at once too), the rest by the ACK after
// them. Not ok where the SACKs held under 1 % of the segments first (no
// reordering: the old ways apply) or fewer than 100 were timed.
// A delay uniform in +-J spreads them over 2J: their interquartile range
// is J and their 5th to 95th percentiles 1.8 J apart, from one to the
// next independently (a queue moves them together). Quantiles, not the
// standard deviation, which a few delayed ACKs or a loss's recovery
// lift (2.61 for 2 ms at 10 ms); a reordering's few sent ahead of a
// delay line, and a loss's recovery, spread the tails and not the middle.
func (f *flow) coverJitter(floor float64) (Param, bool) {
	cs := slices.Clone(f.covs)
	nsack := 0
	for _, c := range cs {
		if c.sack {
			nsack++
		}
	}
	if len(cs) < 100 || nsack*100 < len(cs) {
		return Param{}, false
	}
	slices.SortStableFunc(cs, func(a, b cover) int { return cmp.Compare(a.sent, b.sent) })
	vs := make([]float64, len(cs))
	for i, c := range cs {
		vs[i] = (c.at - c.sent).Seconds() * 1000
	}
	rho := lag1(vs)
	s := sorted(vs)
	j := quantile(s, 0.75) - quantile(s, 0.25)
	wide := (quantile(s, 0.95) - quantile(s, 0.05)) / 1.8
	spread := fmt.Sprintf("%d segments' round trips, each timed by the first ACK holding it (%d by a SACK block): interquartile range %.3f ms, 5th-95th percentiles %.3f ms apart", len(vs), nsack, j, wide*1.8)
	switch {
	case j < floor && wide < floor:
		return withSamples(known(0, 0, floor, spread+fmt.Sprintf(": no jitter beyond %.2f ms", floor)), len(vs)), true
	case rho >= 0.7:
		return unknown(fmt.Sprintf("%s, but varying smoothly (lag-1 correlation %.2f): a queue, whose variation hides any jitter", spread, rho)), true
	case j <= 0 || math.Abs(wide/j-1) > 0.25:
		return unknown(fmt.Sprintf("%s: not a delay uniform in +-J (its 5th-95th percentiles are 1.8 times its interquartile range apart)", spread)), true
	}
	if why := f.reorderedTooLittle(j, 5, len(cs), nsack); why != "" {
		return unknown(spread + ", " + why), true
	}
	// The queueing the spread was taken for is none: no bottleneck.
	f.qmax, f.qp95 = 0, 0
	// The interquartile range of n uniform draws over 2J: standard
	// deviation J/sqrt(n); the neighbours' delays are not quite
	// independent, so twice that.
	e := 2 * 1.96 / math.Sqrt(float64(len(vs)))
	return withSamples(known(j, j*(1-e), j*(1+e), fmt.Sprintf(
		"%s, uncorrelated from one to the next (%.2f): a random delay uniform in +-%.2f ms", spread, rho, j)), len(vs)), true
}

// reorderedTooLittle says why a delay uniform in +-j ms is not what
// spread the delays, or "": it sends a segment ahead of the one before it
// whenever their delays differ by more than their spacing s, (2J - s)^2 /
// (2 (2J)^2) of them at the least, 1 % or more. Fewer reordered (under 1 %,
// or under a part of that when it is 5 % or more): the segments were sent
// ahead by themselves (netem's reorder, a few with no delay at all) or
// none were, and the spread is theirs or the hosts', not a delay per
// packet.
func (f *flow) reorderedTooLittle(j, part float64, sent, reordered int) string {
	segs, span := f.segmentsSent()
	if segs < 2 || sent == 0 {
		return ""
	}
	w := 2 * j / 1000
	s := span.Seconds() / float64(segs-1)
	got := float64(reordered) / float64(sent)
	if want := (w - s) * (w - s) / (2 * w * w); s < w && want >= 0.05 && (got < want/part || got < 0.01) {
		return units.Sprintf("with %.2g %% of the segments reordered: a random delay of +-%.2f ms at their spacing (%s) would reorder %.0f %% or more; not a delay per packet (segments sent ahead by themselves, or the hosts' spread)",
			got*100, j, ms(time.Duration(s*1e9)), want*100)
	}
	return ""
}

// owdJitter measures a random delay per packet on the data's way from
// one-way delays, near the receiver, where the round trips a jitter
// leaves are few (it reorders the segments, whose samples are left out).
// The first new segment of each tick of the sender's TSval clock left at
// the tick's start, within a packet time or two when the sender sends
// three segments a tick or more: its arrival less the tick's time (the
// clocks' rates matched by a fit over the transfer) is the one-way delay
// and a constant. Consecutive ticks' delays differ by a per-packet delay
// twice over and by little of a queue (which moves smoothly); the median
// absolute difference of two draws uniform in +-J is 0.586 J, and the
// segments netem sends ahead with no delay (its reorder) are outliers it
// sheds.
func (f *flow) owdJitter() (Param, bool) {
	type tick struct {
		v    uint32
		t    time.Duration
		segs int
	}
	var ticks []tick
	recs := make([]record, 0, len(f.data))
	for _, d := range f.data {
		if d.hasTS && d.payload > 0 {
			recs = append(recs, d)
		}
	}
	if len(recs) < 100 {
		return Param{}, false
	}
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].tsval != recs[j].tsval {
			return int32(recs[i].tsval-recs[j].tsval) < 0
		}
		return f.off(recs[i].seq) < f.off(recs[j].seq)
	})
	var high int64 // the data sent in the ticks before: below it, re-sends
	for i := 0; i < len(recs); {
		j, first, next := i, -1, high
		for ; j < len(recs) && recs[j].tsval == recs[i].tsval; j++ {
			o := f.off(recs[j].seq)
			if o < high {
				continue
			}
			if first < 0 {
				first = j
			}
			next = max(next, o+int64(recs[j].payload))
		}
		if first >= 0 {
			ticks = append(ticks, tick{recs[first].tsval, recs[first].t, j - i})
		}
		high, i = next, j
	}
	if len(ticks) < 50 {
		return Param{}, false
	}
	// The sender's clock against the capture's: least squares.
	var sx, sy, sxx, sxy float64
	for _, k := range ticks {
		x, y := float64(k.v-ticks[0].v), k.t.Seconds()
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	n := float64(len(ticks))
	den := n*sxx - sx*sx
	if den <= 0 {
		return Param{}, false
	}
	per := (n*sxy - sx*sy) / den // seconds a tick
	if per <= 0 || per > 0.02 {
		return Param{}, false
	}
	var diffs []float64
	for i := 1; i < len(ticks); i++ {
		a, b := ticks[i-1], ticks[i]
		if b.v-a.v != 1 || a.segs < 3 || b.segs < 3 {
			continue // the sender paused, or sent too little to leave at a tick's start
		}
		diffs = append(diffs, math.Abs(b.t.Seconds()-a.t.Seconds()-per))
	}
	if len(diffs) < 30 {
		return f.owdSpread(recs, per, ticks[0].v)
	}
	mad := quantile(sorted(diffs), 0.5)
	j := mad / 0.586 * 1000 // ms
	m := float64(len(diffs))
	// The sends' own spread at a tick's start adds to the differences:
	// the low end allows for a quarter of a millisecond of it.
	p := withSamples(known(j, max(j*(1-2.2/math.Sqrt(m))-0.25, 0), j*(1+2.2/math.Sqrt(m)), fmt.Sprintf(
		"one-way delays of the first segment of %d ticks of the sender's clock (%.3f ms a tick): consecutive ones %.3f ms apart (median), as two draws uniform in +-%.2f ms are", len(diffs), per*1000, mad*1000, j)), len(diffs))
	return p, true
}

// owdSpread measures a jitter from every new segment's one-way delay
// (its arrival less its TSval's time, recs sorted by TSval), where too few
// ticks start with a segment for owdJitter's differences (a long round
// trip's slow sends): each is the delay and when in its tick the segment
// left, a tick's spread at most. A delay uniform in +-J spreads them over
// 2J (interquartile range J, 5th-95th percentiles 1.8 J apart),
// independently from one to the next; claimed where J is four ticks or
// more (the tick then adds under 25 %).
func (f *flow) owdSpread(recs []record, per float64, v0 uint32) (Param, bool) {
	var vs []float64
	var high int64
	for _, r := range recs {
		o := f.off(r.seq)
		if o < high {
			continue // sent again
		}
		high = max(high, o+int64(r.payload))
		vs = append(vs, (r.t.Seconds()-per*float64(r.tsval-v0))*1000)
	}
	if len(vs) < 100 {
		return Param{}, false
	}
	rho := lag1(vs)
	s := sorted(vs)
	j := quantile(s, 0.75) - quantile(s, 0.25)
	wide := (quantile(s, 0.95) - quantile(s, 0.05)) / 1.8
	tick := per * 1000
	if rho >= 0.7 || j < 4*tick || math.Abs(wide/j-1) > 0.25 {
		return Param{}, false
	}
	e := 2 * 1.96 / math.Sqrt(float64(len(vs)))
	return withSamples(known(j, max(j*(1-e)-tick, 0), j*(1+e), fmt.Sprintf(
		"one-way delays of %d segments by the sender's clock (%.3f ms a tick): interquartile range %.2f ms, 5th-95th percentiles %.2f ms apart, uncorrelated from one to the next (%.2f): a delay uniform in +-%.2f ms", len(vs), tick, j, wide*1.8, rho, j)), len(vs)), true
}

// segmentsSent is how many segments the data records hold (from their
// payloads: an offloaded record holds many) and the time from the first
// to the last.
func (f *flow) segmentsSent() (int, time.Duration) {
	if len(f.data) == 0 || f.mss <= 0 {
		return 0, 0
	}
	n := 0
	for _, d := range f.data {
		n += f.segsOf(d)
	}
	return n, f.data[len(f.data)-1].t - f.data[0].t
}

// segsOf is how many segments a data record holds (an offloaded one,
// many).
func (f *flow) segsOf(d record) int { return max(1, (d.payload+f.mss-1)/f.mss) }

// segsIn is how many segments n bytes of sequence space hold.
func (f *flow) segsIn(n int64) int { return int((n + int64(f.mss) - 1) / int64(f.mss)) }

// countFull is how many of runs met a full queue.
func countFull(runs []lossRun) int {
	n := 0
	for _, r := range runs {
		if r.full {
			n++
		}
	}
	return n
}

// congestionControl reads the sender's reaction to loss: how far the data
// in flight fell across each congestion event, the loss runs within a
// round trip of one another (one event: one reduction). The flight before
// is the largest from a round trip before the event's first loss to a
// round trip after its last, when the sender learns of it (in slow start
// the flight doubles meanwhile, and the reduction is of that); the flight
// after is the median of the round trip after recovery, two round trips
// after the last loss. Only events with no other in those windows count.
// The round trip is the base plus the queue the data met at the event:
// behind a full buffer it can be twice the base.
func (f *flow) congestionControl(runs []lossRun) (string, string) {
	if len(runs) < 2 {
		return "", "fewer than two loss events: the sender's reaction to loss is not seen"
	}
	// A reaction is read at a bottleneck's drops: a random loss's comes
	// at whatever window the sender had, often in a run of them or with
	// a timeout (the grid's CUBIC read as Reno at 0.5 % and as BBR
	// behind a bursty channel).
	if own := len(runs) - countFull(runs); own > 0 {
		return "", fmt.Sprintf("%d of the %d loss runs were the path's own (not a full queue's): the sender's reaction to loss is read at a bottleneck's drops alone", own, len(runs))
	}
	rttAt := func(t time.Duration, r lossRun) time.Duration {
		if q := f.queueAt(t); q > 0 {
			return f.base + q
		} else if r.queue > 0 {
			return f.base + r.queue
		}
		return f.base
	}
	type event struct{ first, last, rtt time.Duration }
	var events []event
	for _, r := range runs {
		if n := len(events); n > 0 && r.t <= events[n-1].last+events[n-1].rtt {
			events[n-1].last = r.t
			continue
		}
		events = append(events, event{first: r.t, last: r.t, rtt: rttAt(r.t, r)})
	}
	var ratios []float64
	for k, e := range events {
		if k == 0 {
			// The first event ends slow start (or BBR's startup): a
			// reduction from an overshoot that may take several rounds
			// to repair, or BBR's drain after it, says nothing of the
			// reaction to loss.
			continue
		}
		lo, hi := e.first-e.rtt, e.last+3*e.rtt
		if (k > 0 && events[k-1].last+3*events[k-1].rtt > lo) || (k+1 < len(events) && events[k+1].first < hi) {
			continue // another event's reaction in the windows
		}
		before := int64(0)
		var after []float64
		// The data are in capture order: only the event's windows are
		// read (a lossy capture has thousands of events).
		from := sort.Search(len(f.data), func(i int) bool { return f.data[i].t >= lo })
		for _, d := range f.data[from:] {
			if d.t > hi {
				break
			}
			if d.inflight < 0 {
				continue
			}
			switch {
			case d.t <= e.last+e.rtt:
				before = max(before, d.inflight)
			case d.t >= e.last+2*e.rtt:
				after = append(after, float64(d.inflight))
			}
		}
		if before > 0 && len(after) > 0 {
			ratios = append(ratios, quantile(sorted(after), 0.5)/float64(before))
		}
	}
	if len(ratios) < 2 {
		return "", fmt.Sprintf("%d loss events apart from one another with the data in flight known around them: the sender's reaction to loss is not seen", len(ratios))
	}
	class := func(x float64) string {
		switch {
		case x >= 0.3 && x < 0.58:
			return "loss-based (reno)"
		case x >= 0.58 && x < 0.85:
			return "loss-based (cubic)"
		case x >= 0.85:
			return "model-based (bbr)"
		}
		return ""
	}
	s := sorted(ratios)
	m := quantile(s, 0.5)
	c, n := class(m), 0
	for _, x := range s {
		if class(x) == c {
			n++
		}
	}
	// A signature is claimed only when most events show it: a BBR behind
	// a full buffer cuts its flight by 0.65-0.9 at random phases of its
	// gain cycle, between CUBIC's 0.7 and holding.
	if c == "" || 2*n <= len(s) {
		return "", fmt.Sprintf("in flight fell to %.2f of itself across %d loss events (%.2f-%.2f, %d of them in one class): no clear signature",
			m, len(s), quantile(s, 0.25), quantile(s, 0.75), n)
	}
	why := map[string]string{"loss-based (reno)": "Reno halves", "loss-based (cubic)": "CUBIC keeps 0.7", "model-based (bbr)": "not loss-based"}[c]
	return c, fmt.Sprintf("in flight fell to %.2f of itself across %d loss events, %d of them in this class (%s)", m, len(s), n, why)
}

// probeRTT finds BBR's ProbeRTT: the data in flight held at four segments
// (BBR's least window) for its 200 ms (150 ms or more of it seen, and four
// round trips) while the sender kept sending and the receiver's window
// stayed open, with more than three times that in flight before and
// after. No loss-based sender does that: one whose application or receiver
// pauses it stops sending, and slow start after a timeout doubles its
// flight each round trip. It returns when each began.
func (f *flow) probeRTT() []time.Duration {
	if f.mss <= 0 || len(f.data) < 100 {
		return nil
	}
	// Four segments in flight, and the segment just sent on top, of two
	// MSS when the sender sends GSO pairs: six.
	low := int64(6 * f.mss)
	var out []time.Duration
	openAt := func(t time.Duration) bool { // the receiver's last window before t
		i := sort.Search(len(f.acks), func(i int) bool { return f.acks[i].t > t })
		return i > 0 && f.acks[i-1].win > 8*low
	}
	for i := 0; i < len(f.data); {
		if f.data[i].inflight < 0 || f.data[i].inflight > low {
			i++
			continue
		}
		j, sent := i, 0
		for j < len(f.data) && f.data[j].inflight >= 0 && f.data[j].inflight <= low {
			j++
			sent++
		}
		start, end := f.data[i].t, f.data[min(j, len(f.data)-1)].t
		after := int64(0)
		for k := j; k < min(j+100, len(f.data)); k++ {
			after = max(after, f.data[k].inflight)
		}
		if i > 0 && end-start >= max(150*time.Millisecond, 4*f.base) && sent >= 4 && f.data[i-1].inflight > 3*low && after > 3*low &&
			openAt(start) && openAt(f.data[j-1].t) {
			out = append(out, start)
		}
		i = j
	}
	return out
}

// RequestResponse is a connection that carried requests and responses in
// turns (a web server's keep-alive connections) rather than one bulk
// transfer: what a lab needs to run the same load.
type RequestResponse struct {
	// Connections to the same server port in the capture, and the
	// requests they carried (each a client data burst followed by the
	// server's answer).
	Connections int `json:"connections"`
	Requests    int `json:"requests"`
	// RequestBytes and ResponseBytes are medians per turn; ThinkMs is the
	// server's median time from a request's last byte to its answer's
	// first, less the capture point's leg to the server.
	RequestBytes  int     `json:"request_bytes"`
	ResponseBytes int     `json:"response_bytes"`
	ThinkMs       float64 `json:"think_ms"`
	// LatencyP50Ms and LatencyP99Ms are the client's view: a request's
	// first byte to its answer's last, plus the leg the capture point
	// does not see.
	LatencyP50Ms float64 `json:"latency_p50_ms"`
	LatencyP99Ms float64 `json:"latency_p99_ms"`
}

// minTurns is how many request/response turns make a connection a
// request/response one.
const minTurns = 3

// turns finds the request/response turns of the fitted connection: client
// data, then server data, then client data again.
func (f *flow) turns(recs []record, cs *analyzer.Connection, peers []connSummary) *RequestResponse {
	if f.dir != 1 {
		return nil
	}
	type turn struct {
		reqFirst, reqLast, respFirst, respLast time.Duration
		reqBytes, respBytes                    int
	}
	var ts []turn
	var cur *turn
	for _, r := range recs {
		if r.payload == 0 || r.aflags&analyzer.AnyRetransmission != 0 {
			continue
		}
		switch {
		case r.dir == 0 && (cur == nil || cur.respBytes > 0):
			ts = append(ts, turn{reqFirst: r.t, reqLast: r.t, reqBytes: r.payload})
			cur = &ts[len(ts)-1]
		case r.dir == 0:
			cur.reqLast, cur.reqBytes = r.t, cur.reqBytes+r.payload
		case cur != nil:
			if cur.respBytes == 0 {
				cur.respFirst = r.t
			}
			cur.respLast, cur.respBytes = r.t, cur.respBytes+r.payload
		}
	}
	var done []turn
	for _, t := range ts {
		if t.respBytes > 0 {
			done = append(done, t)
		}
	}
	if len(done) < minTurns {
		return nil
	}
	var req, resp, think, lat []float64
	leg := max(f.kmin, 0) // capture point to the client and back: what the client's view adds
	srv := max(f.emin, 0)
	for _, t := range done {
		req = append(req, float64(t.reqBytes))
		resp = append(resp, float64(t.respBytes))
		think = append(think, max(0, (t.respFirst-t.reqLast-srv).Seconds()*1000))
		lat = append(lat, (t.respLast-t.reqFirst+leg).Seconds()*1000)
	}
	rr := &RequestResponse{Connections: 1, Requests: len(done),
		RequestBytes: int(quantile(sorted(req), 0.5)), ResponseBytes: int(quantile(sorted(resp), 0.5)),
		ThinkMs: quantile(sorted(think), 0.5), LatencyP50Ms: quantile(sorted(lat), 0.5), LatencyP99Ms: quantile(sorted(lat), 0.99)}
	// The capture's other connections to the same server port did the
	// same: a request is one client burst, counted by its data segments.
	for _, o := range peers {
		if o.info.Index == cs.Index || o.server != cs.Server || o.requests == 0 {
			continue
		}
		rr.Connections++
		rr.Requests += o.requests
	}
	return rr
}
