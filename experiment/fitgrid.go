package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/fit"
	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/predict"
	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/units"
)

// FitPoint is one path of the fit's validation grid: a lab run with a
// known spec (through the proxy, or the kernel's qdiscs), whose captures
// `wanlab fit` must explain.
type FitPoint struct {
	Name   string        `json:"name"`
	RTT    time.Duration `json:"rtt_ns"`
	Rate   units.Rate    `json:"rate_bps"`     // 0: no bottleneck
	Buffer units.Size    `json:"buffer_bytes"` // tbf limit
	Loss   string        `json:"loss"`         // netem loss argument ("1%", "gemodel 1% 25%"), "" none
	Bursty bool          `json:"bursty"`
	// Reorder is netem's reorder argument ("8.24% 25%": the probability
	// of sending a packet ahead of the delay line and its correlation,
	// which realize about 1 %), "" none.
	Reorder string `json:"reorder,omitempty"`
	// Jitter is netem's jitter on the data's way (uniform in +-Jitter
	// around half the round trip), 0 none.
	Jitter time.Duration `json:"jitter_ns,omitempty"`
	Rmem   units.Size    `json:"rmem_bytes"` // the client's tcp_rmem max, 0: default
	// Line is netem's limit on the data's delay line (packets) where the
	// point is a flight outgrowing it, with no bottleneck; 0: not set
	// (netem's 1000, or out of the way where the spec says so).
	Line int    `json:"line_limit,omitempty"`
	CC   string `json:"cc"`
	// NoTimestamps turns TCP timestamps off at both ends
	// (net.ipv4.tcp_timestamps=0), as many stacks and middleboxes do.
	NoTimestamps bool `json:"no_timestamps,omitempty"`
	// seed is the point's lab seed: its place in the grid (1 first), so
	// that a point run alone runs as it did in the grid; 0: its place in
	// the list run.
	seed int64
}

// Spec is the point's to-client spec (half the round trip; the other
// half is on the way to the server).
func (p FitPoint) Spec() string {
	s := "delay " + units.FormatDuration(p.RTT/2)
	if p.Jitter > 0 {
		s += " " + units.FormatDuration(p.Jitter)
	}
	if p.Loss != "" {
		s += " loss " + p.Loss
	}
	if p.Reorder != "" {
		s += " reorder " + p.Reorder
	}
	switch {
	case p.Line > 0:
		s += fmt.Sprintf(" limit %d", p.Line)
	case p.Jitter > 0 || p.Reorder != "" || p.Rate > 0:
		// netem's limit out of the way: a jitter or a reorder runs the
		// delay line over 1,000 packets (a path with no bottleneck runs
		// at the proxy's pace), and netem's own limit counts its
		// child's queue too (room enough that the tbf's limit is the
		// buffer).
		s += " limit 100000"
	}
	if p.Rate > 0 {
		burst := max(units.Size(p.Rate.BytesPerSecond()*0.002), 32*units.KiB)
		s += fmt.Sprintf(" | tbf rate %s burst %s limit %s", p.Rate, burst, p.Buffer)
	}
	return s
}

// lineLimit is netem's limit on the point's data direction (packets).
func (p FitPoint) lineLimit() int {
	f := strings.Fields(p.Spec())
	for i := 0; i+1 < len(f) && f[i] != "|"; i++ {
		if f[i] == "limit" {
			if n, err := strconv.Atoi(f[i+1]); err == nil {
				return n
			}
		}
	}
	return 1000 // netem's default
}

// size is enough data for 40 round trips at the point's rate (the window's
// rate without a bottleneck), between 2 and 64 MiB.
func (p FitPoint) size() units.Size {
	rate := float64(p.Rate)
	switch {
	case p.Loss != "":
		// A loss-bound CUBIC runs near the Mathis bound: 15 s of it, 1-8
		// MiB (thousands of segments).
		pl, err := units.ParsePercent(strings.Fields(strings.TrimPrefix(p.Loss, "gemodel "))[0])
		if err != nil || pl <= 0 {
			return 8 << 20
		}
		bps := predict.Mathis(1448, p.RTT, pl.Prob()).BytesPerSecond()
		return units.Size(min(max(bps*15, 1<<20), 8<<20))
	case p.Reorder != "":
		// Enough for thousands of segments sent ahead at 1 %.
		return 16 << 20
	case p.Jitter > 0:
		// A jitter's reordering makes spurious re-sends and a slow
		// CUBIC: thousands of ticks of the sender's clock all the same.
		return 8 << 20
	case rate == 0:
		rate = 200e6
	}
	secs := max(3, 40*p.RTT.Seconds())
	return units.Size(min(max(rate/8*secs, 2<<20), 64<<20))
}

// FitGrid is the validation grid: round trips 10-200 ms, rates 10 Mbit/s
// to 1 Gbit/s, buffers a quarter to four bandwidth-delay products, random
// and bursty loss, reordering, and receive-window limited paths; the
// quick grid is a corner of it.
func FitGrid(quick bool) []FitPoint {
	var g []FitPoint
	rtts := []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 200 * time.Millisecond}
	rates := []units.Rate{10 * units.Mbit, 100 * units.Mbit, 1000 * units.Mbit}
	bdps := []float64{0.25, 1, 4}
	if quick {
		rtts, rates, bdps = []time.Duration{20 * time.Millisecond}, []units.Rate{20 * units.Mbit}, []float64{1}
	}
	for _, rtt := range rtts {
		for _, rate := range rates {
			for _, b := range bdps {
				buf := max(units.Size(b*rate.BytesPerSecond()*rtt.Seconds()), 16*units.KiB)
				buf = (buf + 1023) / 1024 * 1024
				g = append(g, FitPoint{Name: units.Sprintf("tbf %s %s %.2gbdp", units.FormatDuration(rtt), rate, b), RTT: rtt, Rate: rate, Buffer: buf, CC: "cubic"})
			}
		}
		for _, loss := range []string{"0.5%", "2%"} {
			if quick && loss == "2%" {
				continue
			}
			g = append(g, FitPoint{Name: "loss " + loss + " " + units.FormatDuration(rtt), RTT: rtt, Loss: loss, CC: "cubic"})
		}
		g = append(g, FitPoint{Name: "bursty " + units.FormatDuration(rtt), RTT: rtt, Loss: "gemodel 1% 25%", Bursty: true, CC: "cubic"})
		// netem's correlation lowers the share it is given: 8.24 % with
		// 25 % correlation sends 1 % ahead (wanlab simulate says so).
		g = append(g, FitPoint{Name: "reorder 8.24% 25% " + units.FormatDuration(rtt), RTT: rtt, Reorder: "8.24% 25%", CC: "cubic"})
		g = append(g, FitPoint{Name: "rwnd " + units.FormatDuration(rtt), RTT: rtt, Rmem: 1 * units.MiB, CC: "cubic"})
		if !quick && rtt >= 50*time.Millisecond {
			// netem's default limit, which CUBIC's flight outgrows at
			// 50 ms and more: drops with no queue.
			g = append(g, FitPoint{Name: "line 1000 " + units.FormatDuration(rtt), RTT: rtt, Line: 1000, CC: "cubic"})
		}
		if !quick {
			// Above the fit's floor (1 ms, 5 % of the round trip).
			j := max(2*time.Millisecond, rtt/10)
			g = append(g, FitPoint{Name: "jitter " + units.FormatDuration(j) + " " + units.FormatDuration(rtt), RTT: rtt, Jitter: j, CC: "cubic"})
		}
	}
	if !quick {
		g = append(g, combinedPoints()...)
	}
	for i := range g {
		g[i].seed = int64(i + 1)
	}
	return g
}

// FitGridPoints are the points of the full grid whose names are in
// names (as the table writes them: "tbf 50ms 10mbit 0.25bdp"), in the
// grid's order; an unknown name is an error naming the grid's points.
func FitGridPoints(names ...string) ([]FitPoint, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[strings.Join(strings.Fields(n), " ")] = true
	}
	var out []FitPoint
	var all []string
	for _, p := range FitGrid(false) {
		all = append(all, p.Name)
		if want[p.Name] {
			out = append(out, p)
			delete(want, p.Name)
		}
	}
	for n := range want {
		return nil, fmt.Errorf("no fit grid point %q (the grid: %s)", n, strings.Join(all, ", "))
	}
	return out, nil
}

// FitGridOptions say how the grid's points run.
type FitGridOptions struct {
	// Kernel runs each point with the reference kernel's qdiscs (netem,
	// tbf) inside guest VMs (the engine chosen as experiment's --vms
	// does) instead of through the userspace proxy. The truth is then
	// the spec's long-run shares of loss and reordering: the guests'
	// qdiscs report no counters back.
	Kernel bool
}

// Truth sources of a row's loss and reordering.
const (
	TruthCounters = "proxy counters"
	TruthSpec     = "spec"
)

// FitRow is one capture of one grid point, fitted, against the truth.
type FitRow struct {
	Point FitPoint `json:"point"`
	Side  string   `json:"side"`
	Err   string   `json:"error,omitempty"`
	// The errors of what the fit claimed (relative, or for the loss in
	// standard deviations of the binomial), and whether each is within
	// its tolerance; Unknown lists what it did not claim.
	RTTErr    float64 `json:"rtt_error"`
	RateErr   float64 `json:"rate_error"`
	BufferErr float64 `json:"buffer_error"`
	LossSD    float64 `json:"loss_error_sd"`
	RTTOK     bool    `json:"rtt_ok"`
	RateOK    bool    `json:"rate_ok"`
	BufferOK  bool    `json:"buffer_ok"`
	LossOK    bool    `json:"loss_ok"`
	// LossClaimed says the fit claimed a loss rate (with the segments it
	// is over); withheld (a few long runs: overflows or a bursty channel)
	// it is neither right nor wrong.
	LossClaimed bool `json:"loss_claimed"`
	BurstOK     bool `json:"burstiness_ok"`
	LimitOK     bool `json:"limit_ok"`
	// LimitClaimed says the fit named a limit or claimed a bottleneck's
	// rate; a fit that named neither (its evidence at odds: a queue that
	// held and overflowed, with no rate measured) is neither right nor
	// wrong.
	LimitClaimed bool `json:"limit_claimed"`
	// BottleneckReached says the point's token bucket limited the
	// transfer: its queue overflowed (the proxy's counters) or the
	// transfer ran at 80 % of its rate or more. Where it did not, the
	// right limit is no rate claimed.
	BottleneckReached bool `json:"bottleneck_reached"`
	// WindowHeld says the bucket overflowed but the transfer ran under
	// 80 % of its rate, or its queue was empty for half its packets or
	// more (the proxy's sojourn histogram): after the overflow (slow
	// start's, mostly) the sender's window held it below the path's
	// bandwidth-delay product (CUBIC's 0.7 of a window that a quarter
	// BDP of buffer left under it, or a send buffer smaller than the
	// BDP). Right there is the
	// rate, or a congestion-window limit claiming none, or a send-buffer
	// one whose flight filled most of the sender's buffer.
	WindowHeld bool     `json:"window_held"`
	Unknown    []string `json:"unknown"`
	Spec       string   `json:"fitted_spec"`
	TrueLoss   float64  `json:"true_loss"`
	LossModel  string   `json:"loss_model"`
	Bottleneck string   `json:"bottleneck"`
	// TrueReorder is the share of the data's packets sent ahead;
	// Reorder the fit's share (when ReorderClaimed: near the receiver),
	// ReorderSD its error in standard deviations, ReorderOK within 2.
	TrueReorder    float64 `json:"true_reorder"`
	Reorder        float64 `json:"reorder"`
	ReorderSD      float64 `json:"reorder_error_sd"`
	ReorderOK      bool    `json:"reorder_ok"`
	ReorderClaimed bool    `json:"reorder_claimed"`
	// Jitter is the fit's jitter in ms where it claims one (JitterClaimed),
	// JitterOK within 25 % of the point's (0 where it has none).
	Jitter        float64 `json:"jitter_ms"`
	JitterClaimed bool    `json:"jitter_claimed"`
	JitterOK      bool    `json:"jitter_ok"`
	// LineLimit is the fit's delay_limit_packets where it claims one
	// (LineClaimed), LineOK within 10 % of the data's netem limit, and
	// only where the proxy's queues dropped.
	LineLimit   float64 `json:"line_limit"`
	LineClaimed bool    `json:"line_claimed"`
	LineOK      bool    `json:"line_ok"`
	// TruthFrom says where the truth of loss and reordering came from:
	// TruthCounters (what the proxy's loss model dropped and its netem
	// sent ahead) or TruthSpec (the spec's long-run shares, with the
	// process's own variance in the standard deviations).
	TruthFrom string `json:"truth_from"`
	// Half is the grid's half the point belongs to (HalfTuning,
	// HalfHeldOut).
	Half string `json:"half"`
	// InInterval says, for each of rtt, rate, buffer and loss that the
	// fit claimed with an interval, whether the interval holds the
	// truth.
	InInterval map[string]bool `json:"in_interval,omitempty"`
}

// RunFitGrid runs each point, fits both captures and compares.
func RunFitGrid(ctx context.Context, points []FitPoint, out string, log io.Writer, opt FitGridOptions) ([]FitRow, error) {
	var rows []FitRow
	for i, p := range points {
		fmt.Fprintf(log, "fit grid %d/%d: %s: %s\n", i+1, len(points), p.Name, p.Spec())
		seed := p.seed
		if seed == 0 {
			seed = int64(i + 1)
		}
		cfg := Config{Name: p.Name, Impair: map[string]string{ToClient: p.Spec(), ToServer: "delay " + units.FormatDuration(p.RTT/2)},
			Size: p.size(), Proxy: !opt.Kernel, Kernel: opt.Kernel, VMs: opt.Kernel, Seed: seed,
			Out: filepath.Join(out, fmt.Sprintf("%02d", i+1)), Log: io.Discard}
		cfg.Client.CC, cfg.Server.CC = p.CC, p.CC
		cfg.ClientSysctls, cfg.ServerSysctls = p.sysctls(), p.sysctls()
		if p.Rmem > 0 {
			cfg.ClientSysctls["net.ipv4.tcp_rmem"] = fmt.Sprintf("4096 131072 %d", int64(p.Rmem))
		}
		res, err := Run(ctx, cfg)
		if err != nil {
			if ctx.Err() != nil {
				return rows, err
			}
			rows = append(rows, FitRow{Point: p, Err: err.Error()})
			continue
		}
		for _, side := range []string{SideServer, SideClient} {
			rows = append(rows, fitRow(p, side, res))
		}
	}
	return rows, nil
}

// RefitFitGrid fits the captures of kept grid runs again with this code,
// against the same truth: each dir is a `bench fit --out` directory, its
// rows.json naming the points in their order and NN/result.json each
// point's run (its captures beside it, wherever the directory moved).
// A point whose run cannot be read is a row with its error.
func RefitFitGrid(dirs []string) ([]FitRow, error) {
	var rows []FitRow
	for _, dir := range dirs {
		name := filepath.Join(dir, "rows.json")
		b, err := hostfile.ReadInput(name, hostfile.MaxInput)
		if err != nil {
			return nil, err
		}
		var kept []FitRow
		if err := json.Unmarshal(b, &kept); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		var points []FitPoint
		seen := map[string]bool{}
		for _, r := range kept {
			if !seen[r.Point.Name] {
				seen[r.Point.Name] = true
				points = append(points, r.Point)
			}
		}
		for i, p := range points {
			run := filepath.Join(dir, fmt.Sprintf("%02d", i+1))
			res, err := readRun(filepath.Join(run, "result.json"))
			if err != nil {
				rows = append(rows, FitRow{Point: p, Err: err.Error()})
				continue
			}
			for _, c := range res.Captures {
				if c != nil {
					c.Path = filepath.Join(run, filepath.Base(c.Path))
				}
			}
			for _, side := range []string{SideServer, SideClient} {
				if res.Captures[side] == nil {
					rows = append(rows, FitRow{Point: p, Side: side, Err: fmt.Sprintf("%s: no %s capture", run, side)})
					continue
				}
				rows = append(rows, fitRow(p, side, res))
			}
		}
	}
	return rows, nil
}

// readRun reads a run's result.json.
func readRun(name string) (*Result, error) {
	b, err := hostfile.ReadInput(name, hostfile.MaxInput)
	if err != nil {
		return nil, err
	}
	var res Result
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &res, nil
}

func fitRow(p FitPoint, side string, res *Result) FitRow {
	row := FitRow{Point: p, Side: side, Half: p.Half(), InInterval: map[string]bool{}}
	opt := fit.Options{}
	if r := LearnedRatio(res); r > 0 {
		opt.WindowRatio = r
	}
	f, err := fit.File(res.Captures[side].Path, opt)
	if err != nil {
		row.Err = err.Error()
		return row
	}
	var d fit.Direction
	for _, x := range f.Directions {
		if x.Data {
			d = x
		}
	}
	row.Spec, row.LossModel, row.Bottleneck = d.Spec, d.LossModel, d.Bottleneck
	pr := d.Params
	rel := func(v, want float64) float64 { return v/want - 1 }
	if q := pr["rtt_ms"]; q.Known() {
		// A jitter's lowest round trip is the delays' sum less it.
		row.RTTErr = rel(q.Value, (p.RTT-p.Jitter).Seconds()*1000)
		row.RTTOK = math.Abs(row.RTTErr) <= 0.05
	} else {
		row.Unknown = append(row.Unknown, "rtt")
	}
	if q := pr["rate_bps"]; q.Known() {
		if p.Rate > 0 {
			row.RateErr = rel(q.Value, float64(p.Rate))
			row.RateOK = math.Abs(row.RateErr) <= 0.05
		}
	} else {
		row.Unknown = append(row.Unknown, "rate")
		row.RateOK = p.Rate == 0
	}
	if q := pr["buffer_bytes"]; q.Known() && p.Rate > 0 {
		row.BufferErr = rel(q.Value, float64(p.Buffer))
		row.BufferOK = math.Abs(row.BufferErr) <= 0.25
	} else {
		row.Unknown = append(row.Unknown, "buffer")
		row.BufferOK = true // not claimed
	}
	// The truth: what the proxy did (its counters), or without them (the
	// kernel's qdiscs) the spec's long-run shares, whose realization
	// varies more than a binomial where the process is correlated: the
	// variance grows by (1 + rho) / (1 - rho) for a lag-1 correlation rho
	// (a Gilbert channel's 1 - p - r; netem's correlation argument).
	lossVar, reorderVar := 1.0, 1.0
	if st := proxyTruth(res); st != nil {
		row.TruthFrom, row.TrueLoss, row.TrueReorder = TruthCounters, st.loss, st.reorder
	} else {
		row.TruthFrom = TruthSpec
		row.TrueLoss, lossVar = specLoss(p.Loss)
		row.TrueReorder, reorderVar = specReorder(p.Reorder)
	}
	// The bottleneck was reached when its queue overflowed or the
	// transfer ran at 80 % of its rate or more; without the proxy's
	// counters, by the rate alone.
	if p.Rate > 0 {
		st := proxyTruth(res)
		fast := res.Download != nil && float64(res.Download.Transfer) >= 0.8*float64(p.Rate)
		row.BottleneckReached = (st != nil && st.tailDrops > 0) || fast
		// The bucket overflowed but its queue was empty for most of its
		// packets: the window held the flight under what keeps the link
		// busy however near the rate the transfer ran (behind 1 Gbit/s at
		// 10 ms with a BDP's buffer, at 0.86 of the rate with 35 % of
		// the packets queued, where five of seven other runs queued
		// 80-95 %).
		idle := st != nil && st.tailDrops > 0 && st.bucketQueued >= 0 && st.bucketQueued < 0.5
		row.WindowHeld = row.BottleneckReached && res.Download != nil && (!fast || idle)
	}
	if q := pr["loss_percent"]; q.Samples > 0 {
		row.LossClaimed = true
		sd := math.Sqrt(max(row.TrueLoss, 1e-4)*(1-row.TrueLoss)*lossVar/float64(q.Samples)) * 100
		row.LossSD = (q.Value - row.TrueLoss*100) / sd
		row.LossOK = math.Abs(row.LossSD) <= 2 // the 95 % interval's width
	}
	if q, ok := pr["delay_limit_packets"]; ok && q.Known() {
		row.LineClaimed, row.LineLimit = true, q.Value
		st := proxyTruth(res)
		row.LineOK = math.Abs(q.Value/float64(p.lineLimit())-1) <= 0.1 && (st == nil || st.tailDrops > 0)
	}
	if q := pr["jitter_ms"]; q.Known() {
		row.JitterClaimed, row.Jitter = true, q.Value
		want := float64(p.Jitter) / float64(time.Millisecond)
		row.JitterOK = (want == 0 && q.Value == 0) || (want > 0 && math.Abs(q.Value/want-1) <= 0.25)
	}
	// The proxy counts the segments its netem sent ahead, not the order
	// a jitter shuffles: no truth of reordering at a jitter's points.
	if q := pr["reorder_percent"]; q.Known() && q.Samples > 0 && p.Jitter == 0 {
		row.ReorderClaimed = true
		row.Reorder = q.Value / 100
		sd := math.Sqrt(max(row.TrueReorder, 1e-4)*(1-row.TrueReorder)*reorderVar/float64(q.Samples)) * 100
		row.ReorderSD = (q.Value - row.TrueReorder*100) / sd
		row.ReorderOK = math.Abs(row.ReorderSD) <= 2
	}
	wantModel := "none"
	switch {
	case p.Bursty:
		wantModel = "bursty"
	case p.Loss != "":
		wantModel = "random"
	}
	row.BurstOK = d.LossModel == wantModel
	switch {
	case p.Rmem > 0:
		// With a loss too, whichever held the transfer longer: the
		// window, or the loss.
		row.LimitOK = f.Sysctls.Client["net.ipv4.tcp_rmem"] != "" && f.Transfer.Limit == analyzer.LimitReceiveWindow ||
			p.Loss != "" && f.Transfer.Limit == analyzer.LimitLoss
	case p.Rate > 0 && !row.BottleneckReached:
		// The token bucket was not what held the transfer back (the
		// sender's buffer, slow start, the proxy's own forwarding at 1
		// Gbit/s): the fit is right to claim no rate, or its rate
		// where a queue held it for a while.
		row.LimitOK = !pr["rate_bps"].Known() || row.RateOK
	case p.Rate > 0 && row.WindowHeld:
		// The sender's window held it: the congestion window, or the
		// send buffer where the flight filled most of it (behind 1 Gbit/s
		// at 50 ms the default 4 MiB buffer holds half the BDP: flights
		// flat at 3.1-3.4 MB).
		sndbuf := 0.0
		if res.Download != nil && res.Download.ServerEffective != nil {
			sndbuf = float64(res.Download.ServerEffective.SndBuf)
		}
		heldBySndbuf := f.Transfer.Limit == analyzer.LimitSendBuffer && pr["send_window_bytes"].Known() &&
			sndbuf > 0 && pr["send_window_bytes"].Value >= 0.6*sndbuf
		row.LimitOK = (pr["rate_bps"].Known() && row.RateOK) ||
			(!pr["rate_bps"].Known() && (f.Transfer.Limit == analyzer.LimitCongestion || heldBySndbuf))
	case p.Rate > 0:
		row.LimitOK = pr["rate_bps"].Known()
	default:
		row.LimitOK = !pr["rate_bps"].Known()
	}
	if f.Transfer.Limit == analyzer.LimitBandwidth && !pr["rate_bps"].Known() {
		// A bandwidth limit names a bottleneck: its rate with it.
		row.LimitOK = false
	}
	row.LimitClaimed = f.Transfer.Limit != "" || pr["rate_bps"].Known()
	inside := func(name, param string, truth float64) {
		if q := pr[param]; q.Known() && q.High > q.Low {
			row.InInterval[name] = q.Low <= truth && truth <= q.High
		}
	}
	inside("rtt", "rtt_ms", (p.RTT-p.Jitter).Seconds()*1000)
	if p.Rate > 0 {
		inside("rate", "rate_bps", float64(p.Rate))
		inside("buffer", "buffer_bytes", float64(p.Buffer))
	}
	if row.LossClaimed {
		inside("loss", "loss_percent", row.TrueLoss*100)
	}
	return row
}

// counterTruth is what the proxy's engine did to the data's direction (the
// one with more packets): the shares of its packets the loss model
// dropped and netem sent ahead.
type counterTruth struct {
	loss, reorder float64
	tailDrops     uint64 // the packets its queues dropped full
	// bucketQueued is the share of the packets its token bucket passed
	// that waited in the bucket's queue more than a millisecond (at 10
	// Mbit/s about a packet's time; at 1 Gbit/s 83 packets); -1: no
	// bucket.
	bucketQueued float64
}

// bucketQueued is the share of a token bucket's packets that waited more
// than a millisecond in its queue, from the stage's sojourn histogram;
// -1 where the classes hold no bucket.
func bucketQueued(classes []engine.ClassSnapshot) float64 {
	var waited, all uint64
	for _, cl := range classes {
		for _, st := range cl.Stages {
			if st.Kind != "tbf" {
				continue
			}
			for i, n := range st.Sojourn.Counts {
				all += n
				if i > 0 && engine.SojournBoundsNs[i-1] >= int64(time.Millisecond) {
					waited += n
				}
			}
		}
	}
	if all == 0 {
		return -1
	}
	return float64(waited) / float64(all)
}

func proxyTruth(res *Result) *counterTruth {
	if res.Impairment == nil || res.Impairment.Proxy == nil {
		return nil
	}
	var in, lost, ahead, full uint64
	queued := -1.0
	for _, dir := range res.Impairment.Proxy.Directions {
		if dir.Engine.Totals.PacketsIn <= in {
			continue
		}
		in, lost, ahead, full = dir.Engine.Totals.PacketsIn, dir.Engine.Totals.Drops.Loss, 0, dir.Engine.Totals.Drops.Queue
		queued = bucketQueued(dir.Engine.Classes)
		for _, cl := range dir.Engine.Classes {
			for _, st := range cl.Stages {
				ahead += st.Reordered
			}
		}
	}
	if in == 0 {
		return nil
	}
	return &counterTruth{float64(lost) / float64(in), float64(ahead) / float64(in), full, queued}
}

// specLoss is the long-run loss of netem's loss argument ("1%", "gemodel
// p r": the Gilbert channel's p / (p + r)), and how much its count's
// variance exceeds a binomial's.
func specLoss(arg string) (share, varFactor float64) {
	f := strings.Fields(arg)
	if len(f) == 0 {
		return 0, 1
	}
	if f[0] == "gemodel" && len(f) >= 3 {
		p, err1 := units.ParsePercent(f[1])
		r, err2 := units.ParsePercent(f[2])
		if err1 != nil || err2 != nil || p.Prob()+r.Prob() <= 0 {
			return 0, 1
		}
		rho := 1 - p.Prob() - r.Prob()
		return p.Prob() / (p.Prob() + r.Prob()), (1 + rho) / (1 - rho)
	}
	p, err := units.ParsePercent(f[0])
	if err != nil {
		return 0, 1
	}
	return p.Prob(), 1
}

// specReorder is the long-run share netem's reorder argument ("1% 25%")
// sends ahead (tc's gap defaults to 1: every packet is tried), and its
// count's variance over a binomial's.
func specReorder(arg string) (share, varFactor float64) {
	f := strings.Fields(arg)
	if len(f) == 0 {
		return 0, 1
	}
	p, err := units.ParsePercent(f[0])
	if err != nil {
		return 0, 1
	}
	corr := 0.0
	if len(f) > 1 {
		if c, err := units.ParsePercent(f[1]); err == nil {
			corr = c.Prob()
		}
	}
	return engine.ReorderedShare(p.Prob(), corr, 1), (1 + corr) / (1 - corr)
}

// WriteFitGrid writes the rows as a table and the share of claimed
// parameters within tolerance, per parameter.
func WriteFitGrid(w io.Writer, rows []FitRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "point\tside\trtt\trate\tbuffer\tloss (true, sd)\treorder (true, fit, sd)\tjitter (ms, fit)\tmodel\tlimit\tunknown\tfitted spec")
	pct := func(ok bool, e float64, claimed bool) string {
		if !claimed {
			return "-"
		}
		m := "ok"
		if !ok {
			m = "OFF"
		}
		return fmt.Sprintf("%+.1f%% %s", e*100, m)
	}
	type tally struct{ ok, claimed int }
	var t [9]tally
	count := func(i int, claimed, ok bool) {
		if claimed {
			t[i].claimed++
			if ok {
				t[i].ok++
			}
		}
	}
	unreached, held := 0, 0
	for _, r := range rows {
		if r.Err != "" {
			fmt.Fprintf(tw, "%s\t%s\terror: %s\n", r.Point.Name, r.Side, r.Err)
			continue
		}
		unk := strings.Join(r.Unknown, ",")
		rateClaimed := !strings.Contains(unk, "rate") && r.Point.Rate > 0
		bufClaimed := !strings.Contains(unk, "buffer")
		loss := units.Sprintf("%.3g%% %+.1fsd", r.TrueLoss*100, r.LossSD)
		if !r.LossClaimed {
			loss = units.Sprintf("%.3g%% -", r.TrueLoss*100)
		}
		reorder := "-"
		if r.ReorderClaimed {
			reorder = units.Sprintf("%.3g%% %.3g%% %+.1fsd", r.TrueReorder*100, r.Reorder*100, r.ReorderSD)
		}
		jitter := "-"
		if r.JitterClaimed {
			jitter = units.Sprintf("%.3g %.3g %s", float64(r.Point.Jitter)/float64(time.Millisecond), r.Jitter, map[bool]string{true: "ok", false: "OFF"}[r.JitterOK])
		}
		limit := fmt.Sprint(r.LimitOK)
		if !r.LimitClaimed {
			limit = "-"
		}
		if r.Point.Rate > 0 && !r.BottleneckReached {
			limit += "*"
			unreached++
		}
		if r.WindowHeld {
			limit += "+"
			held++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Point.Name, r.Side,
			pct(r.RTTOK, r.RTTErr, !strings.Contains(unk, "rtt")), pct(r.RateOK, r.RateErr, rateClaimed),
			pct(r.BufferOK, r.BufferErr, bufClaimed), loss, reorder, jitter, r.LossModel, limit, unk, r.Spec)
		count(0, !strings.Contains(unk, "rtt"), r.RTTOK)
		count(1, rateClaimed, r.RateOK)
		count(2, bufClaimed, r.BufferOK)
		count(3, r.LossClaimed, r.LossOK)
		count(4, r.LossModel != "unknown", r.BurstOK)
		count(5, r.LimitClaimed, r.LimitOK)
		count(6, r.ReorderClaimed, r.ReorderOK)
		count(7, r.JitterClaimed, r.JitterOK)
		count(8, r.LineClaimed, r.LineOK)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i, name := range []string{"rtt within 5 %", "rate within 5 %", "buffer within 25 %", "loss within 2 sd", "burstiness class", "limit", "reorder within 2 sd", "jitter within 25 %", "line limit within 10 %"} {
		fmt.Fprintf(w, "%-21s %d of %d claimed\n", name+":", t[i].ok, t[i].claimed)
	}
	if unreached > 0 {
		fmt.Fprintf(w, "limit*: %d captures whose token bucket did not limit the transfer (no overflow, under 80 %% of its rate: the sender's buffer, slow start, the proxy's own forwarding); right there is no rate claimed, or the right one\n", unreached)
	}
	if held > 0 {
		fmt.Fprintf(w, "limit+: %d captures whose token bucket overflowed but whose transfer ran under 80 %% of its rate or whose bucket queued under half its packets over 1 ms (the sender's window held it after the overflow); right there is the right rate, or a congestion-window limit claiming none, or a send-buffer one whose flight filled 60 %% of the sender's buffer or more\n", held)
	}
	writeHalves(w, rows)
	from := map[string]bool{}
	for _, r := range rows {
		if r.TruthFrom != "" {
			from[r.TruthFrom] = true
		}
	}
	switch {
	case from[TruthCounters] && !from[TruthSpec]:
		fmt.Fprintln(w, "truth of loss and reordering: the proxy's counters (what its loss model dropped, what its netem sent ahead)")
	case from[TruthSpec] && !from[TruthCounters]:
		fmt.Fprintln(w, "truth of loss and reordering: the spec's long-run shares (the guests' qdiscs report no counters; the sd allow for a correlated process's variance)")
	}
	return nil
}

// WriteFitGridFiles writes rows.json and table.txt to dir.
func WriteFitGridFiles(dir string, rows []FitRow) error {
	b, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	return writeFiles(filepath.Join(dir, "rows.json"), b, filepath.Join(dir, "table.txt"), false, func(w io.Writer) error { return WriteFitGrid(w, rows) })
}
