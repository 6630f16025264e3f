package experiment

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/analyzer/report"
	"github.com/wanlab/wanlab/fit"
	"github.com/wanlab/wanlab/internal/binom"
	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/predict"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/tuner"
	"github.com/wanlab/wanlab/units"
)

// LikeResult is `experiment --like`: a field capture fitted, the lab the
// fit describes run, and the two compared; with --try, the fix run on the
// reproduced path. JSON names are a contract (docs/fit.md).
type LikeResult struct {
	Capture string      `json:"capture"`
	Fit     *fit.Result `json:"fit"`
	// Side is the lab capture compared with the original: the one taken
	// where the original was ("client" or "server").
	Side string `json:"side"`
	// Calibration says how the receive buffer was set: the window the
	// original's receiver advertised over the share of its buffer this
	// kernel offers, measured on a first run when it differed.
	Calibration string `json:"calibration,omitempty"`
	// Warnings says where the lab differs from the capture by its range
	// (a load capped at MaxConcurrency).
	Warnings []string `json:"warnings,omitempty"`
	// Deadline is the time the whole reproduction had
	// (LikeOptions.Deadline, or LikeDeadline's from the original's
	// duration).
	Deadline   time.Duration `json:"deadline_ns"`
	Run        *Result       `json:"run"`
	Refit      *fit.Result   `json:"refit"`
	Similarity []Similarity  `json:"similarity"`
	Reproduced bool          `json:"reproduced"`
	// Verdict is Pantheon's judgement of the run beside the original:
	// the rate (request/response: the median latency) within 15 %, the
	// RTT within 5 %.
	Verdict Verdict `json:"verdict"`
	// NotShown lists what the reproduction needed and the capture did not
	// show, with the value the lab assumed and why.
	NotShown []NotShown `json:"not_shown"`
	// Runs are the reproduction's runs (LikeOptions.Runs; one by
	// default). Reproduced says more than half of them were; Run, Refit
	// and Similarity are the median by rate of those that agree with it.
	Runs           []LikeRun     `json:"runs"`
	ReproducedRuns int           `json:"reproduced_runs"`
	Tries          []Try         `json:"tries,omitempty"`
	Elapsed        time.Duration `json:"elapsed_ns"`
	Out            string        `json:"out"`
	Report         string        `json:"report"`
	JSON           string        `json:"json"`
}

// LikeRun is one run of the reproduction: its directory, what it
// carried and how it compared.
type LikeRun struct {
	Out        string       `json:"out"`
	RateBps    float64      `json:"rate_bps"`
	Resent     float64      `json:"retransmission_rate"`
	Similarity []Similarity `json:"similarity"`
	Reproduced bool         `json:"reproduced"`
	Verdict    Verdict      `json:"verdict"`
}

// LikeOptions are what --like runs besides the lab: Tries (KEY=VALUE, or
// client:KEY=VALUE / server:KEY=VALUE), each a run on the reproduced
// path, and Runs, how many times the reproduction runs (0 or 1: once).
type LikeOptions struct {
	Tries []string
	Runs  int
	// Deadline bounds the whole reproduction, every run and try (0:
	// LikeDeadline's, from the original's duration; `--deadline`).
	Deadline time.Duration
}

// Similarity is one measure of the original against the reproduction.
type Similarity struct {
	Measure        string  `json:"measure"`
	Original       float64 `json:"original"`
	Reproduced     float64 `json:"reproduced"`
	OriginalText   string  `json:"original_text,omitempty"`
	ReproducedText string  `json:"reproduced_text,omitempty"`
	// Figure is reproduced over original for a number, the mean relative
	// agreement (1 is the same) for the rate over time, 1 or 0 for the
	// diagnosis.
	Figure    float64 `json:"figure"`
	Within    bool    `json:"within"`
	Tolerance string  `json:"tolerance"`
}

// Try is one --try: the fix run on the reproduced path.
type Try struct {
	// Change maps "client" or "server" to the sysctls the try wrote there.
	Change       map[string]map[string]string `json:"change"`
	Run          *Result                      `json:"run"`
	BeforeBps    float64                      `json:"before_bps"`
	AfterBps     float64                      `json:"after_bps"`
	PredictedBps float64                      `json:"predicted_bps"`
	Prediction   string                       `json:"prediction"`
}

// LikeConfig is the lab a fit describes: its data direction's spec on the
// way to the client and the reverse on the way to the server, both ends'
// sysctls, and the transfer's size. The lab's server sends the data: an
// upload is reproduced with the roles turned round, the original's client
// (its sender) as the lab's server. base carries what the command line
// set (output, timeouts, --kernel, --vms).
func LikeConfig(f *fit.Result, base Config) (Config, error) {
	cfg := base
	cfg.Name = "like " + filepath.Base(f.File)
	cfg.Impair = map[string]string{}
	for _, d := range f.Directions {
		if d.Data {
			cfg.Impair[ToClient] = d.Spec
		} else {
			cfg.Impair[ToServer] = d.Spec
		}
	}
	sender, receiver := f.Sysctls.Server, f.Sysctls.Client
	if upload(f) {
		sender, receiver = receiver, sender
	}
	cfg.ClientSysctls = mergeSysctls(base.ClientSysctls, receiver)
	cfg.ServerSysctls = mergeSysctls(base.ServerSysctls, sender)
	// The congestion control the fit read from the capture; where it read
	// none, Linux's default (cubic), not this machine's (which may be
	// bbr: another sender than the original's, most likely).
	for _, h := range []struct {
		cc      *string
		sysctls map[string]string
	}{{&cfg.Client.CC, cfg.ClientSysctls}, {&cfg.Server.CC, cfg.ServerSysctls}} {
		if *h.cc == "" {
			*h.cc = likeCC
			if v := h.sysctls["net.ipv4.tcp_congestion_control"]; v != "" {
				*h.cc = v
			}
		}
	}
	switch rr := f.RequestResponse; {
	case rr != nil:
		// The same requests over as many connections, answers of the
		// same size from the lab's server (seed 003's: two writes with
		// Nagle on, unless --nodelay).
		cfg.Requests, cfg.Concurrency = rr.Requests, rr.Connections
		cfg.RRBody = units.Size(max(1, rr.ResponseBytes-labHeaderBytes))
	case f.Transfer.Direction != "download" && !upload(f):
		return base, fmt.Errorf("%s: transfer %q: experiment reproduces downloads, uploads and request/response loads", f.File, f.Transfer.Direction)
	case cfg.Size == 0:
		cfg.Size = units.Size(max(f.Transfer.Bytes, 64<<10))
	}
	if _, err := cfg.Specs(); err != nil {
		return cfg, fmt.Errorf("the fit's spec: %w", err)
	}
	return cfg, cfg.CheckSysctls()
}

// upload says the fitted transfer's data went from the client to the
// server.
func upload(f *fit.Result) bool { return f.Transfer.Direction == "upload" }

// labSide is the lab's end that stands where the original capture was
// taken: the receiver's (the lab's client) where the original was taken at
// the receiver, the sender's (the lab's server) otherwise.
func labSide(f *fit.Result) string {
	atReceiver := f.CapturedAt == "client"
	if upload(f) {
		atReceiver = f.CapturedAt == "server"
	}
	if atReceiver {
		return SideClient
	}
	return SideServer
}

// likeCC is the congestion control a reproduction's hosts run where the
// capture does not show the original's: Linux's default.
const likeCC = "cubic"

// labHeaderBytes is what the lab's server sends before a response's body
// (its status line and headers): a response of the original's size is a
// body of that much less.
const labHeaderBytes = 117

func mergeSysctls(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range b {
		out[k] = v
	}
	for k, v := range a { // the command line's own win
		out[k] = v
	}
	return out
}

// ErrCapture is matched (errors.Is) by Like's errors that come from the
// capture itself (not one, no connection to fit): the user's input.
var ErrCapture = errors.New("unusable capture")

// captureError marks err as ErrCapture without changing its text.
type captureError struct{ err error }

func (e captureError) Error() string   { return e.err.Error() }
func (e captureError) Unwrap() []error { return []error{e.err, ErrCapture} }

// Like fits the capture, runs the lab that reproduces it (lo.Runs times),
// compares the two and runs each of lo.Tries on the reproduced path.
func Like(ctx context.Context, capture string, base Config, opt fit.Options, lo LikeOptions) (*LikeResult, error) {
	start := time.Now()
	log := base.Log
	if log == nil {
		log = io.Discard
	}
	logf := func(format string, args ...any) { fmt.Fprintf(log, format+"\n", args...) }
	changes, err := parseTries(lo.Tries)
	if err != nil {
		return nil, err
	}
	if lo.Runs < 0 || lo.Runs > MaxLikeRuns {
		return nil, fmt.Errorf("--runs %d: want 1 to %d", lo.Runs, MaxLikeRuns)
	}
	// The capture is read before anything is made: a file that is no
	// capture leaves no output directory behind.
	opt.Progress = func(line string) { logf("fit: %s", line) }
	fitted, err := fit.File(capture, opt)
	if err != nil {
		return nil, captureError{err}
	}
	// The lab is checked against its range before anything is made.
	cfg, err := LikeConfig(fitted, base)
	if err != nil {
		return nil, captureError{err}
	}
	_, origData, err := dataDirection(capture, fitted)
	if err != nil {
		return nil, captureError{err}
	}
	notShown := shownPath(&cfg, fitted, origData)
	for _, n := range notShown {
		logf("like: not shown: %s: assumed %s (%s)", n.What, n.Assumed, n.Why)
	}
	var warnings []string
	if w := capConcurrency(&cfg); w != "" {
		warnings = append(warnings, w)
		logf("like: warning: %s", w)
	}
	if err := cfg.CheckRange(); err != nil {
		return nil, captureError{fmt.Errorf("the fit's %w", err)}
	}
	deadline := lo.Deadline
	if deadline <= 0 {
		deadline = LikeDeadline(fitted, max(1, lo.Runs)+len(changes))
	}
	ctx, cancel := context.WithTimeoutCause(ctx, deadline, likeDeadlineError{deadline: deadline, original: fittedDuration(fitted), flag: lo.Deadline > 0})
	defer cancel()
	out, err := outDir(base.Out, start, base.Force)
	if err != nil {
		return nil, err
	}
	res := &LikeResult{Capture: capture, Out: out, Fit: fitted, Warnings: warnings, Deadline: deadline, NotShown: notShown}
	res.Side = labSide(fitted)
	run := func(name string, cfg Config) (*Result, error) {
		cfg.Out = filepath.Join(out, name)
		cfg.Progress = base.Progress
		logf("like: %s: %s", name, describeSpecs(cfg))
		r, err := Run(ctx, cfg)
		if err != nil && errors.Is(context.Cause(ctx), ErrLikeDeadline) {
			return nil, fmt.Errorf("%s: %w (the lab was removed; what ran is in %s)", name, context.Cause(ctx), out)
		}
		return r, err
	}
	if res.Run, err = run("reproduction", cfg); err != nil {
		return nil, err
	}
	// The receive buffer: the original's window over this kernel's share,
	// which the first run measured (TCP_INFO) when its window bound it.
	if calibrated, ratio, ok := calibrate(res.Fit, cfg, res.Run); ok {
		res.Calibration = fmt.Sprintf("the client's tcp_rmem max set from the original's window %s over the share %.2f this kernel offered as window on the first run (it was %s at the assumed %.2f)",
			units.Size(res.Fit.Transfer.WindowMax).Human(), ratio, cfg.ClientSysctls["net.ipv4.tcp_rmem"], predict.ScalingRatio)
		cfg = calibrated
		logf("like: %s", res.Calibration)
		if res.Run, err = run("reproduction-calibrated", cfg); err != nil {
			return nil, err
		}
	}
	// The server's think time: the first run measured the lab's own share
	// of the client's latency (its round trips, its slow start, its
	// window after idle); the server thinks for the rest.
	if think, ok := calibrateThink(res.Fit, cfg, res.Run); ok {
		res.Calibration = strings.TrimPrefix(res.Calibration+"; ", "; ") +
			fmt.Sprintf("the server's think time set to %v from %v, the original's median latency %.4g ms less the lab's own share of it on the first run (%v)",
				think, cfg.ThinkTime, res.Fit.RequestResponse.LatencyP50Ms, res.Run.RR.Latency.P50-cfg.ThinkTime)
		cfg.ThinkTime = think
		for i, n := range res.NotShown {
			if n.What == notShownThink {
				res.NotShown[i].Assumed = think.String()
				res.NotShown[i].Why += fmt.Sprintf("; set to %v on a first run that gave %v (the lab's own share of the latency measured)", think, n.Assumed)
			}
		}
		logf("like: %s", res.Calibration)
		if res.Run, err = run("reproduction-think", cfg); err != nil {
			return nil, err
		}
	}
	type done struct {
		run   *Result
		refit *fit.Result
	}
	var runs []done
	for i := range max(1, lo.Runs) {
		r := res.Run
		if i > 0 {
			if r, err = run(fmt.Sprintf("reproduction-%d", i+1), cfg); err != nil {
				return nil, err
			}
		}
		rf, err := refit(r, res.Side, opt)
		if err != nil {
			return nil, err
		}
		lr := LikeRun{Out: r.Out, RateBps: rf.Transfer.RateBps, Resent: resentShare(rf), Similarity: compare(res.Fit, rf), Reproduced: true,
			Verdict: verdict(res.Fit, rf, origData, labDataDirection(r, res.Side, rf))}
		for _, s := range lr.Similarity {
			lr.Reproduced = lr.Reproduced && s.Within
		}
		if lr.Reproduced {
			res.ReproducedRuns++
		}
		res.Runs = append(res.Runs, lr)
		runs = append(runs, done{r, rf})
	}
	// Side by side: of the runs that agree with the verdict, the median by
	// rate (of an even number, the lower).
	oks, rates := make([]bool, len(runs)), make([]float64, len(runs))
	for i, lr := range res.Runs {
		oks[i], rates[i] = lr.Reproduced, lr.RateBps
	}
	var mid int
	res.Reproduced, mid = sideBySide(oks, rates)
	res.Run, res.Refit, res.Similarity, res.Verdict = runs[mid].run, runs[mid].refit, res.Runs[mid].Similarity, res.Runs[mid].Verdict
	for i, ch := range changes {
		tcfg := cfg
		tcfg.ClientSysctls = mergeSysctls(nil, cfg.ClientSysctls)
		tcfg.ServerSysctls = mergeSysctls(nil, cfg.ServerSysctls)
		for k, v := range ch["client"] {
			tcfg.ClientSysctls[k] = v
		}
		for k, v := range ch["server"] {
			tcfg.ServerSysctls[k] = v
		}
		if err := tcfg.CheckSysctls(); err != nil {
			return nil, fmt.Errorf("--try: %w", err)
		}
		tr := Try{Change: ch}
		if tr.Run, err = run(fmt.Sprintf("try-%d", i+1), tcfg); err != nil {
			return nil, err
		}
		after, err := refit(tr.Run, res.Side, opt)
		if err != nil {
			return nil, err
		}
		tr.BeforeBps, tr.AfterBps = res.Refit.Transfer.RateBps, after.Transfer.RateBps
		tr.PredictedBps, tr.Prediction = predictTry(res.Refit, res.Run, ch)
		res.Tries = append(res.Tries, tr)
	}
	res.Elapsed = time.Since(start)
	return res, writeLike(res)
}

// sideBySide is the verdict over runs that each reproduced or not (more
// than half did) and the run to show beside the original: of those that
// agree with the verdict, the median by rate (of an even number, the
// lower).
func sideBySide(oks []bool, rates []float64) (bool, int) {
	n := 0
	for _, ok := range oks {
		if ok {
			n++
		}
	}
	verdict := 2*n > len(oks)
	var idx []int
	for i, ok := range oks {
		if ok == verdict {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(rates[a], rates[b]) })
	return verdict, idx[(len(idx)-1)/2]
}

// MaxLikeRuns bounds LikeOptions.Runs (--runs): each is a whole transfer.
const MaxLikeRuns = 20

// resentShare is the share of a fit's data packets sent again.
func resentShare(f *fit.Result) float64 {
	if f.Transfer.DataPkts == 0 {
		return 0
	}
	return float64(f.Transfer.ResentPkts) / float64(f.Transfer.DataPkts)
}

// describeSpecs is one line of what a run applies.
func describeSpecs(cfg Config) string {
	var parts []string
	for _, dir := range []string{ToClient, ToServer} {
		if s := cfg.Impair[dir]; s != "" {
			parts = append(parts, dir+"="+s)
		}
	}
	for _, side := range []struct {
		name string
		kv   map[string]string
	}{{"client", cfg.ClientSysctls}, {"server", cfg.ServerSysctls}} {
		keys := make([]string, 0, len(side.kv))
		for k := range side.kv {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %s=%q", side.name, k, side.kv[k]))
		}
	}
	if cfg.Server.CC != "" {
		parts = append(parts, "congestion control "+cfg.Server.CC)
	}
	return strings.Join(parts, "; ")
}

// calibrate returns the config with the client's receive buffer set from
// the original's window and the share of the buffer the first run's
// client offered as window, when the first run was receive-window limited
// (or its client's buffer grew to the cap set: its largest window is then
// the share of the cap) and its window missed the original's by more than
// 5 %.
func calibrate(f *fit.Result, cfg Config, run *Result) (Config, float64, bool) {
	receiver := f.Sysctls.Client
	if upload(f) {
		receiver = f.Sysctls.Server
	}
	if _, set := receiver["net.ipv4.tcp_rmem"]; !set {
		return cfg, 0, false
	}
	cr := run.Captures[SideServer]
	if cr == nil || len(cr.Connections) == 0 || f.Transfer.WindowMax <= 0 {
		return cfg, 0, false
	}
	var w int64
	for _, c := range cr.Connections {
		for _, d := range c.Directions {
			w = max(w, d.PeerMaxWindowBytes)
		}
	}
	if w > 0 && math.Abs(float64(w)/float64(f.Transfer.WindowMax)-1) <= 0.05 {
		return cfg, 0, false
	}
	ratio := LearnedRatio(run)
	if d := run.Download; ratio <= 0 && d != nil && w > 0 {
		// Not window-limited for long, but the client's buffer grew to
		// the cap set: its largest window is this kernel's share of it.
		if t, err := tuner.ParseTriple(cfg.ClientSysctls["net.ipv4.tcp_rmem"]); err == nil && t.Max > 0 && int64(d.ClientEffective.RcvBuf) >= t.Max {
			if r := float64(w) / float64(t.Max); r >= 0.2 && r <= 1 {
				ratio = r
			}
		}
	}
	if ratio <= 0 {
		return cfg, 0, false
	}
	buf := predict.BufferFor(units.Size(f.Transfer.WindowMax), ratio)
	maxB := (int64(buf) + 4095) / 4096 * 4096
	out := cfg
	out.ClientSysctls = mergeSysctls(nil, cfg.ClientSysctls)
	out.ClientSysctls["net.ipv4.tcp_rmem"] = fmt.Sprintf("4096 %d %d", min(131072, maxB), maxB)
	return out, ratio, true
}

// calibrateThink returns the think time that gives the lab's client the
// original's median latency, from the first run's: when that run's missed
// it by more than a tenth of the verdict's tolerance.
func calibrateThink(f *fit.Result, cfg Config, run *Result) (time.Duration, bool) {
	rr := f.RequestResponse
	if rr == nil || run.RR == nil || run.RR.Latency.P50 <= 0 {
		return 0, false
	}
	want := msDuration(rr.LatencyP50Ms)
	miss := want - run.RR.Latency.P50
	if math.Abs(float64(miss)) <= verdictRateTolerance/10*float64(want) {
		return 0, false
	}
	think := max(10*time.Microsecond, cfg.withDefaults().ThinkTime+miss).Round(10 * time.Microsecond)
	return think, think != cfg.withDefaults().ThinkTime
}

// refit fits the lab's capture taken where the original was.
func refit(run *Result, side string, opt fit.Options) (*fit.Result, error) {
	cr := run.Captures[side]
	if cr == nil {
		return nil, fmt.Errorf("the reproduction has no %s capture", side)
	}
	opt.Flow = ""
	if run.Download != nil {
		opt.Flow = run.Download.Local.String()
	} else if run.Server.IsValid() {
		opt.Flow = run.Server.String()
	}
	return fit.File(cr.Path, opt)
}

// compare measures the reproduction against the original: the rate
// within 10 %, the median RTT within 5 %, the retransmission rate within
// the original's 95 % interval, the window within 10 %, the rate over
// time (each tenth of the transfer), and the same diagnosis.
func compare(orig, rep *fit.Result) []Similarity {
	if orig.RequestResponse != nil {
		return compareRR(orig, rep)
	}
	o, r := orig.Transfer, rep.Transfer
	// reproduced over original; 0 where the original is 0 and the
	// reproduction is not (JSON has no infinity).
	ratio := func(a, b float64) float64 {
		if a == 0 {
			if b == 0 {
				return 1
			}
			return 0
		}
		return b / a
	}
	var out []Similarity
	num := func(measure string, a, b, tol float64) {
		f := ratio(a, b)
		out = append(out, Similarity{Measure: measure, Original: a, Reproduced: b, Figure: f,
			Within: math.Abs(f-1) <= tol, Tolerance: fmt.Sprintf("within %.0f %%", tol*100)})
	}
	num("rate_bps", o.RateBps, r.RateBps, 0.10)
	num("rtt_p50_ms", o.RTTP50Ms, r.RTTP50Ms, 0.05)
	lo, hi := binom.Wilson(o.ResentPkts, o.DataPkts, binom.Z95)
	tol := units.Sprintf("in the original's 95 %% interval %.3g-%.3g %%", lo*100, hi*100)
	if e := o.LossEpisodes; e > 0 && o.ResentPkts > e {
		// Segments lost together (a slow start's overshoot, a full
		// queue's tail) are one draw, not many: the interval is the
		// episodes', each of the original's mean size (a design effect of
		// that size). Random losses are each an episode, and keep the
		// segments' interval.
		m := float64(o.ResentPkts) / float64(e)
		lo, hi = binom.Wilson(e, max(e, int(math.Round(float64(o.DataPkts)/m))), binom.Z95)
		tol = units.Sprintf("in the original's 95 %% interval %.3g-%.3g %% (%d loss episodes of %.3g re-sent packets each: those lost together are no independent draws)", lo*100, hi*100, e, m)
	}
	orr, rr := resentShare(orig), resentShare(rep)
	out = append(out, Similarity{Measure: "retransmission_rate", Original: orr, Reproduced: rr, Figure: ratio(orr, rr),
		Within: rr >= lo && rr <= hi, Tolerance: tol})
	if o.Limit == analyzer.LimitReceiveWindow {
		num("window_max_bytes", float64(o.WindowMax), float64(r.WindowMax), 0.10)
	} else {
		out = append(out, Similarity{Measure: "window_max_bytes", Original: float64(o.WindowMax), Reproduced: float64(r.WindowMax),
			Figure: ratio(float64(o.WindowMax), float64(r.WindowMax)), Within: true, Tolerance: "not compared: the window did not limit the original"})
	}
	if len(o.RateDecilesBps) == 10 && len(r.RateDecilesBps) == 10 {
		agree := progressAgreement(o.RateDecilesBps, r.RateDecilesBps)
		gap := progressTolerance(o.RateDecilesBps)
		out = append(out, Similarity{Measure: "rate_over_time", Figure: agree, Within: 1-agree <= gap,
			Tolerance: units.Sprintf("the time-sequence graphs, each scaled to its transfer, within %.3g %% of the data at every tenth of the time (the original's own tenths allow that)", gap*100)})
	}
	same := 0.0
	if o.Limit == r.Limit {
		same = 1
	}
	out = append(out, Similarity{Measure: "diagnosis", OriginalText: o.Limit, ReproducedText: r.Limit, Figure: same,
		Within: same == 1, Tolerance: "the same limit"})
	return out
}

// progressAgreement compares two transfers' progress: the share of its
// data each had delivered by the end of each tenth of its time (a
// time-sequence graph scaled to the transfer), as 1 less the largest gap
// between them. Not the tenths' rates one by one: a tenth holds a whole
// number of round trips' data (seed 000's 4096-byte send buffer at 100
// ms: 3 or 4 a tenth, 25 % apart however alike the runs), and a random
// loss's windows vary from tenth to tenth by as much (seed 004, 1 %
// at 2 ms: tenths 37-73 Mbit/s around 49); the progress adds them up, and
// a stall, a slower ramp or a rate that changed still part it (two
// tenths of a stall: 0.9, half the rate over the second half: 0.83).
func progressAgreement(o, r []float64) float64 {
	var so, sr float64
	for i := range o {
		so += o[i]
		sr += r[i]
	}
	if so <= 0 || sr <= 0 {
		if so == sr {
			return 1
		}
		return 0
	}
	var co, cr, gap float64
	for i := range o {
		co += o[i] / so
		cr += r[i] / sr
		gap = max(gap, math.Abs(co-cr))
	}
	return 1 - gap
}

// progressTolerance is the gap between two runs' progress that the
// original's own variation from tenth to tenth allows: 0.6 of its
// tenths' coefficient of variation past the first (the ramp), robust (the
// median absolute deviation, that a stall does not widen what it is
// compared by), which is a Brownian bridge's 95 % for tenths that vary
// independently; 7.5 % at the least, 15 % at the most (a tenth of a few
// round trips varies by a round trip's data, which the progress does
// not add up).
func progressTolerance(o []float64) float64 {
	if len(o) < 3 {
		return 0.075
	}
	steady := slices.Sorted(slices.Values(o[1:]))
	med := steady[len(steady)/2]
	dev := make([]float64, len(steady))
	for i, x := range steady {
		dev[i] = math.Abs(x - med)
	}
	slices.Sort(dev)
	if med <= 0 {
		return 0.075
	}
	cv := 1.4826 * dev[len(dev)/2] / med
	return min(max(0.6*cv, 0.075), 0.15)
}

// compareRR measures a request/response reproduction: the requests and
// connections, the client's latency (median within 10 %, 99th percentile
// within 25 %: a few slow answers move it) and the diagnosis.
func compareRR(orig, rep *fit.Result) []Similarity {
	o, r := orig.RequestResponse, rep.RequestResponse
	if r == nil {
		return []Similarity{{Measure: "request_response", OriginalText: "request-response", ReproducedText: rep.Transfer.Direction,
			Tolerance: "the same kind of transfer"}}
	}
	var out []Similarity
	num := func(measure string, a, b, tol float64) {
		f := 0.0
		if a > 0 {
			f = b / a
		}
		out = append(out, Similarity{Measure: measure, Original: a, Reproduced: b, Figure: f,
			Within: a > 0 && math.Abs(f-1) <= tol, Tolerance: fmt.Sprintf("within %.0f %%", tol*100)})
	}
	num("requests", float64(o.Requests), float64(r.Requests), 0)
	num("latency_p50_ms", o.LatencyP50Ms, r.LatencyP50Ms, 0.10)
	num("latency_p99_ms", o.LatencyP99Ms, r.LatencyP99Ms, 0.25)
	same := 0.0
	if orig.Transfer.Limit == rep.Transfer.Limit {
		same = 1
	}
	out = append(out, Similarity{Measure: "diagnosis", OriginalText: orig.Transfer.Limit, ReproducedText: rep.Transfer.Limit,
		Figure: same, Within: same == 1, Tolerance: "the same limit"})
	return out
}

// parseTries reads --try values: KEY=VALUE goes to the end the key acts
// on (the receive buffer to the client, the send buffer and the
// congestion control to the server, anything else to both), or
// client:KEY=VALUE / server:KEY=VALUE.
func parseTries(tries []string) ([]map[string]map[string]string, error) {
	var out []map[string]map[string]string
	for _, t := range tries {
		side, kv, explicit := strings.Cut(t, ":")
		if !explicit || (side != "client" && side != "server") {
			side, kv = "", t
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, "net.") {
			return nil, fmt.Errorf("--try %q: want [client:|server:]net.KEY=VALUE", t)
		}
		ch := map[string]map[string]string{}
		sides := []string{side}
		if side == "" {
			switch k {
			case "net.ipv4.tcp_rmem", "net.core.rmem_max":
				sides = []string{"client"}
			case "net.ipv4.tcp_wmem", "net.core.wmem_max", "net.ipv4.tcp_congestion_control":
				sides = []string{"server"}
			default:
				sides = []string{"client", "server"}
			}
		}
		for _, s := range sides {
			ch[s] = map[string]string{k: v}
		}
		out = append(out, ch)
	}
	return out, nil
}

// predictTry is the tuner's model of a try on the reproduced path: a
// window's worth of data per round trip, the window a buffer gives on this
// kernel, under the bottleneck's rate and the Mathis bound of its random
// loss, when the path has them.
func predictTry(rep *fit.Result, run *Result, ch map[string]map[string]string) (float64, string) {
	var data *fit.Direction
	for i := range rep.Directions {
		if rep.Directions[i].Data {
			data = &rep.Directions[i]
		}
	}
	if data == nil {
		return 0, "no data direction"
	}
	rtt := data.Params["rtt_ms"]
	if !rtt.Known() {
		return 0, "no round trip: no prediction"
	}
	rttD := time.Duration(rtt.Value * float64(time.Millisecond))
	ratio := LearnedRatio(run)
	if ratio <= 0 {
		ratio = tuner.DefaultScalingRatio
	}
	var bound float64
	var why []string
	if v, ok := ch["client"]["net.ipv4.tcp_rmem"]; ok {
		t, err := tuner.ParseTriple(v)
		if err != nil {
			return 0, "tcp_rmem: " + err.Error()
		}
		w := units.Size(float64(t.Max) * ratio)
		bound = float64(predict.WindowRate(w, rttD))
		why = append(why, fmt.Sprintf("window %s (%.2f of %s) per %.1f ms", w.Human(), ratio, units.Size(t.Max).Human(), rtt.Value))
	}
	if v, ok := ch["server"]["net.ipv4.tcp_wmem"]; ok {
		t, err := tuner.ParseTriple(v)
		if err != nil {
			return 0, "tcp_wmem: " + err.Error()
		}
		mss := units.Size(1448)
		if m := data.Params["mss_bytes"]; m.Known() {
			mss = units.Size(m.Value)
		}
		r := float64(predict.WindowRate(tuner.SendWindow(units.Size(t.Max), mss), rttD))
		if bound == 0 || r < bound {
			bound = r
		}
		why = append(why, fmt.Sprintf("send buffer %s per %.1f ms", units.Size(t.Max).Human(), rtt.Value))
	}
	if bound == 0 {
		return 0, "the model predicts buffer changes only"
	}
	if r := data.Params["rate_bps"]; r.Known() && r.Value < bound {
		bound = r.Value / (1 + 52.0/1448) // the bottleneck's IP rate as payload
		why = append(why, "capped by the bottleneck "+units.Rate(r.Value).Human())
	}
	if l := data.Params["loss_percent"]; l.Known() && l.Value > 0 {
		mss := units.Size(1448)
		if m := data.Params["mss_bytes"]; m.Known() {
			mss = units.Size(m.Value)
		}
		if m := float64(predict.Mathis(mss, rttD, l.Value/100)); m < bound {
			bound = m
			why = append(why, units.Sprintf("capped by the Mathis bound at %.3g %% loss", l.Value))
		}
	}
	return bound, strings.Join(why, "; ")
}

// writeLike writes like.json and like.html into res.Out.
func writeLike(res *LikeResult) error {
	res.JSON = filepath.Join(res.Out, "like.json")
	res.Report = filepath.Join(res.Out, "like.html")
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return writeFiles(res.JSON, b, res.Report, false, func(w io.Writer) error { return WriteLikeReport(w, res) })
}

// WriteLikeReport writes the original capture and the reproduction's side
// by side (every graph of each), headed by the fit and the similarity.
func WriteLikeReport(w io.Writer, res *LikeResult) error {
	page := report.Page{Title: "wanlab experiment --like " + filepath.Base(res.Capture),
		Intro: fmt.Sprintf("The original capture fitted, the lab it describes run, the %s capture of the reproduction beside it. Reproduced: %v (in %d of %d runs; beside the original, the median by rate of those that agree).", res.Side, res.Reproduced, res.ReproducedRuns, len(res.Runs))}
	orig, err := analyzer.AnalyzeFile(res.Capture, analyzer.Options{})
	if err != nil {
		return err
	}
	var oc []*analyzer.Connection
	for _, c := range orig.Connections {
		if c.Index == res.Fit.Connection.Index {
			oc = append(oc, c)
		}
	}
	sim := report.Table{Title: "similarity", Header: []string{"measure", "original", "reproduction", "figure", "within", "tolerance"}}
	for _, s := range res.Similarity {
		a, b := units.Sprintf("%.4g", s.Original), units.Sprintf("%.4g", s.Reproduced)
		if s.OriginalText != "" || s.ReproducedText != "" {
			a, b = s.OriginalText, s.ReproducedText
		}
		sim.Rows = append(sim.Rows, []string{s.Measure, a, b, fmt.Sprintf("%.3f", s.Figure), fmt.Sprint(s.Within), s.Tolerance})
	}
	fitTable := report.Table{Title: "fit", Header: []string{"direction", "spec"}}
	for _, d := range res.Fit.Directions {
		fitTable.Rows = append(fitTable.Rows, []string{d.From + " -> " + d.To, d.Spec})
	}
	for _, dir := range []string{ToClient, ToServer} {
		if res.Run != nil {
			fitTable.Rows = append(fitTable.Rows, []string{"the lab ran " + dir, cmp.Or(res.Run.Specs[dir], "(none)")})
		}
	}
	for _, side := range []struct {
		n  string
		kv map[string]string
	}{{"client", res.Fit.Sysctls.Client}, {"server", res.Fit.Sysctls.Server}} {
		for k, v := range side.kv {
			fitTable.Rows = append(fitTable.Rows, []string{side.n + " sysctl", k + "=" + v})
		}
	}
	for _, n := range res.Fit.ReaderWarnings {
		fitTable.Rows = append(fitTable.Rows, []string{"capture read", n})
	}
	// The original beside the reproduction is part of the answer: it
	// stands under the verdict's cards, the fit and the runs fold below.
	page.VerdictTables = []report.Table{verdictTable(res.Verdict), sim}
	if len(res.NotShown) > 0 {
		ns := report.Table{Title: "not shown by the capture: what the lab assumed", Header: []string{"not shown", "assumed", "why"}}
		for _, n := range res.NotShown {
			ns.Rows = append(ns.Rows, []string{n.What, n.Assumed, n.Why})
		}
		page.VerdictTables = append(page.VerdictTables, ns)
	}
	tables := []report.Table{fitTable}
	if len(res.Runs) > 1 {
		runs := report.Table{Title: fmt.Sprintf("runs (reproduced in %d of %d; beside the original: %s)", res.ReproducedRuns, len(res.Runs), filepath.Base(res.Run.Out)),
			Header: []string{"run", "rate", "re-sent", "reproduced", "off"}}
		for _, r := range res.Runs {
			var off []string
			for _, s := range r.Similarity {
				if !s.Within {
					off = append(off, s.Measure)
				}
			}
			runs.Rows = append(runs.Rows, []string{filepath.Base(r.Out), units.Rate(r.RateBps).Human(), units.Sprintf("%.3g %%", r.Resent*100),
				fmt.Sprint(r.Reproduced), strings.Join(off, ", ")})
		}
		tables = append(tables, runs)
	}
	for i, t := range res.Tries {
		tables = append(tables, report.KV(fmt.Sprintf("try %d", i+1), "change", fmt.Sprint(t.Change),
			"before", units.Rate(t.BeforeBps).Human(), "after", units.Rate(t.AfterBps).Human(),
			"predicted", units.Rate(t.PredictedBps).Human(), "model", t.Prediction))
	}
	page.Sections = append(page.Sections, report.Section{Title: "original: " + filepath.Base(res.Capture), Result: orig, Connections: oc, Tables: tables})
	if cr := res.Run.Captures[res.Side]; cr != nil {
		page.Sections = append(page.Sections, report.Section{Title: "reproduction: " + res.Side + " capture", Result: cr.Analysis, Connections: cr.Connections})
	}
	return report.Write(w, page)
}

// verdictTable is Pantheon's verdict as a table.
func verdictTable(v Verdict) report.Table {
	val := likeNum(v.Measure, v.Original)
	rep := likeNum(v.Measure, v.Reproduced)
	return report.Table{Title: "verdict (" + v.Tolerance + "): " + map[bool]string{true: "reproduced", false: "NOT reproduced"}[v.Within],
		Header: []string{"measure", "original", "reproduction", "error", "within"},
		Rows: [][]string{
			{v.Measure, val, rep, units.Sprintf("%.3g %%", v.Error*100), fmt.Sprint(v.RateWithin)},
			{"rtt_p50_ms", likeNum("rtt_p50_ms", v.RTTOriginalMs), likeNum("rtt_p50_ms", v.RTTReproducedMs), units.Sprintf("%.3g %%", v.RTTError*100), fmt.Sprint(v.RTTWithin)},
		}}
}

// WriteLikeSummary prints the fit, the comparison and the tries.
func WriteLikeSummary(w io.Writer, res *LikeResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "like %s: connection %d, %s, captured at the %s\n", hostfile.Name(res.Capture), res.Fit.Connection.Index, res.Fit.Transfer.Direction, res.Fit.CapturedAt)
	for _, d := range res.Fit.Directions {
		dir := ToServer
		if d.Data {
			dir = ToClient
		}
		s := d.Spec
		if s == "" {
			s = "(none)"
		}
		// Where the capture left a part unshown, the lab ran more than
		// the fit's spec (not_shown says what and why).
		if res.Run != nil && res.Run.Specs[dir] != canonicalSpec(d.Spec) {
			s += " (the lab ran: " + cmp.Or(res.Run.Specs[dir], "(none)") + ")"
		}
		fmt.Fprintf(&b, "  %s: %s\n", dir, s)
	}
	if res.Calibration != "" {
		fmt.Fprintf(&b, "  %s\n", res.Calibration)
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(&b, "  warning: %s\n", w)
	}
	if res.Fit.ReadStopped != "" {
		fmt.Fprintf(&b, "  warning: the capture was read in part (%s): the fit is of the frames before that\n", res.Fit.ReadStopped)
	}
	fmt.Fprintf(&b, "reproduction (%s capture beside the original): %s\n", res.Side, map[bool]string{true: "reproduced", false: "NOT reproduced"}[res.Reproduced])
	if len(res.Runs) == 1 && !res.Reproduced {
		b.WriteString("  (one run: a transfer's slow start and losses vary from run to run; --runs 3 shows the lab's spread)\n")
	}
	if len(res.Runs) > 1 {
		fmt.Fprintf(&b, "  reproduced in %d of %d runs; beside the original, the median by rate of those that agree (%s):", res.ReproducedRuns, len(res.Runs), filepath.Base(res.Run.Out))
		for _, r := range res.Runs {
			b.WriteString(units.Sprintf(" %s %s %.3g %%%s", filepath.Base(r.Out), units.Rate(r.RateBps).Human(), r.Resent*100, map[bool]string{true: "", false: " (off)"}[r.Reproduced]))
		}
		b.WriteString("\n")
	}
	for _, s := range res.Similarity {
		mark := "ok"
		if !s.Within {
			mark = "off"
		}
		switch {
		case s.OriginalText != "" || s.ReproducedText != "":
			fmt.Fprintf(&b, "  %-20s %-18s %-18s %s (%s)\n", s.Measure, s.OriginalText, s.ReproducedText, mark, s.Tolerance)
		case s.Measure == "rate_over_time":
			fmt.Fprintf(&b, "  %-20s %-18s %-18s %s: %.2f (%s)\n", s.Measure, "", "", mark, s.Figure, s.Tolerance)
		default:
			fmt.Fprintf(&b, "  %-20s %-18s %-18s %s: %.3f (%s)\n", s.Measure, likeNum(s.Measure, s.Original), likeNum(s.Measure, s.Reproduced), mark, s.Figure, s.Tolerance)
		}
	}
	v := res.Verdict
	fmt.Fprintf(&b, "verdict (%s): %s\n  %-20s %-18s %-18s error %s\n  %-20s %-18s %-18s error %s\n", v.Tolerance,
		map[bool]string{true: "reproduced", false: "NOT reproduced"}[v.Within],
		v.Measure, likeNum(v.Measure, v.Original), likeNum(v.Measure, v.Reproduced), units.Sprintf("%.3g %%", v.Error*100),
		"rtt_p50_ms", likeNum("rtt_p50_ms", v.RTTOriginalMs), likeNum("rtt_p50_ms", v.RTTReproducedMs), units.Sprintf("%.3g %%", v.RTTError*100))
	for _, n := range res.NotShown {
		fmt.Fprintf(&b, "  not shown: %s: assumed %s (%s)\n", n.What, n.Assumed, n.Why)
	}
	for i, t := range res.Tries {
		fmt.Fprintf(&b, "try %d %v: %s -> %s (predicted %s: %s)\n", i+1, t.Change, units.Rate(t.BeforeBps).Human(), units.Rate(t.AfterBps).Human(),
			units.Rate(t.PredictedBps).Human(), t.Prediction)
	}
	fmt.Fprintf(&b, "report: %s\njson:   %s\n", res.Report, res.JSON)
	_, err := io.WriteString(w, b.String())
	return err
}

// canonicalSpec is a spec's text as the lab prints it (Result.Specs).
func canonicalSpec(text string) string {
	s, err := spec.Parse(text)
	if err != nil {
		return text
	}
	return s.String()
}

func likeNum(measure string, v float64) string {
	switch {
	case strings.HasSuffix(measure, "_bps"):
		return units.Rate(v).Human()
	case strings.HasSuffix(measure, "_bytes"):
		return units.Size(v).Human()
	case strings.HasSuffix(measure, "_ms"):
		return units.Sprintf("%.3g ms", v)
	case strings.HasSuffix(measure, "_rate"):
		return units.Sprintf("%.3g %%", v*100)
	}
	return units.Sprintf("%.4g", v)
}
