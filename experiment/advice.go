package experiment

import (
	"fmt"
	"strings"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/tuner"
	tcapture "github.com/wanlab/wanlab/tuner/capture"
	"github.com/wanlab/wanlab/units"
)

// Tuning is the tuner's plan for the experiment's hosts, made from the
// server capture's evidence and the sysctls in force in each namespace.
type Tuning struct {
	Evidence *tuner.Evidence `json:"evidence"`
	// Client and Server hold the changes for that host (receiver-side keys
	// on the client, sender-side keys on the server).
	Client []tuner.Change `json:"client,omitempty"`
	Server []tuner.Change `json:"server,omitempty"`
	// Current and After are one stream's rate now and with the changes.
	Current units.Rate `json:"current_bps"`
	After   units.Rate `json:"after_bps"`
	Notes   []string   `json:"notes,omitempty"`
	// Rerun is the experiment's command line with the changes applied.
	Rerun string `json:"rerun,omitempty"`
}

// planTuning asks the tuner what to change, while the lab still exists
// (snapshot reads each host's sysctls: inside its namespace, or in its
// VM). A capture without a transfer or a diagnosis without a predicted
// rate gives no plan.
func planTuning(snapshot func(role string) (*tuner.Snapshot, error), res *Result, server *analyzer.Result) (*Tuning, error) {
	snaps := map[string]*tuner.Snapshot{}
	for _, role := range []string{lab.RoleClient, lab.RoleServer} {
		snap, err := snapshot(role)
		if err != nil {
			return nil, err
		}
		snaps[role] = snap
	}
	// One prediction per change: the diagnoses are made again with the
	// window share the tuner's model gives the receiver's kernel, so the
	// analyzer's advice, its prediction (which the plan starts from) and
	// the plan's agree on what a buffer buys.
	m := learnedModel(snaps[lab.RoleClient], res)
	rediagnose(res, analyzer.WindowRatio{Ratio: m.Ratio(), Source: "the tuner's model of the client's kernel: " + m.Describe()})
	ev, err := tcapture.FromResult(server, res.Captures[SideServer].Path)
	if err != nil || ev.RTT <= 0 || ev.Predicted == 0 {
		return nil, nil
	}
	in := tuner.PlanInput{RTT: ev.RTT, Rate: ev.Predicted, Streams: 1, MSS: ev.MSS, Evidence: ev,
		RateSource: "what the server capture's diagnosis predicts once its limit is lifted"}
	t := &Tuning{Evidence: ev}
	for _, h := range []struct {
		role string
		keep string
		dst  *[]tuner.Change
	}{{lab.RoleClient, "receiver", &t.Client}, {lab.RoleServer, "sender", &t.Server}} {
		snap := snaps[h.role]
		p, err := tuner.MakePlan(snap, learnedModel(snap, res), in)
		if err != nil {
			return nil, fmt.Errorf("tuner plan: %w", err)
		}
		for _, c := range p.Changes {
			if c.Side == h.keep || c.Side == "both" && h.keep == "receiver" {
				*h.dst = append(*h.dst, c)
			}
		}
		if h.keep == "receiver" {
			t.Current, t.After, t.Notes = p.Current, p.After, p.Notes
		}
	}
	t.Rerun = rerun(res.Config, t)
	unifyPredictions(res, t)
	return t, nil
}

// unifyPredictions gives every diagnosis on the page that names the limit
// the plan lifts the plan's figure: the two captures of one transfer see
// slightly different RTTs (the handshake's at the client, data to ACK at
// the server), and the same change must not read as two rates.
func unifyPredictions(res *Result, t *Tuning) {
	sc := res.Captures[SideServer]
	if t.After <= 0 || sc == nil || sc.Diagnosis == nil || sc.Diagnosis.PredictedBps <= 0 {
		return
	}
	// The plan sizes buffers: it lifts a window or send-buffer limit.
	limit := sc.Diagnosis.Limit
	if limit != analyzer.LimitReceiveWindow && limit != analyzer.LimitSendBuffer {
		return
	}
	line := fmt.Sprintf("predicted: one stream would go to %s with the tuner's changes (its plan, from the server capture's RTT and the client kernel's window share)", mbps(t.After))
	for _, cr := range res.Captures {
		if cr == nil || cr.Analysis == nil {
			continue
		}
		for _, c := range cr.Analysis.Connections {
			for _, d := range c.Directions {
				dg := d.Diagnosis
				if dg == nil || dg.Limit != limit || dg.PredictedBps <= 0 {
					continue
				}
				dg.PredictedBps = float64(t.After)
				if dg.RateBps > 0 {
					dg.PredictedGain = dg.PredictedBps / dg.RateBps
				}
				for i, a := range dg.Advice {
					if strings.HasPrefix(a, "predicted:") {
						dg.Advice[i] = line
					}
				}
			}
		}
	}
}

// rediagnose makes the diagnoses of the experiment's captures again with
// window ratio wr, in place (the captures' results and reports point to
// them).
func rediagnose(res *Result, wr analyzer.WindowRatio) {
	for _, cr := range res.Captures {
		if cr == nil || cr.Analysis == nil {
			continue
		}
		for _, c := range cr.Analysis.Connections {
			c.Rediagnose(wr)
		}
	}
}

// learnedModel is the tuner's window model of a namespace, with the
// payload/truesize ratio the client's socket learned on this path when the
// download was receive-window limited (the kernel's own accounting says
// so): only then has rcv_ssthresh reached window_clamp, so that
// rcv_ssthresh / rcvbuf is the ratio. Otherwise the kernel's default rule.
func learnedModel(snap *tuner.Snapshot, res *Result) tuner.WindowModel {
	m := tuner.ModelFor(snap)
	// Before 6.6 the window is the tcp_adv_win_scale share of the buffer,
	// so rcv_ssthresh / rcvbuf measures that share (0.50 on the default
	// 1, a rounding below it), not the payload/truesize ratio the model's
	// grow-window stall is computed from: the kernel's rule stays.
	if !snap.Kernel.AtLeast(6, 6) {
		return m
	}
	if r := LearnedRatio(res); r > 0 {
		m.PayloadRatio = r
	}
	return m
}

// LearnedRatio is the share of the client's receive buffer its socket
// offered as window at the end of a receive-window-limited download
// (TCP_INFO rcv_ssthresh over the effective SO_RCVBUF), 0 when the
// download was not limited by the receive window or the ratio is out of
// the kernel's range.
func LearnedRatio(res *Result) float64 {
	d := res.Download
	if d == nil || d.Server == nil || d.Server.RwndLimitedFraction() < 0.5 {
		return 0
	}
	r := d.Client.WindowRatio(d.ClientEffective.RcvBuf)
	if r < 0.2 || r > 1 {
		return 0
	}
	return r
}

// rerun is the command that repeats the experiment with the plan's
// per-namespace changes; host-wide keys cannot be set in a lab namespace
// (a VM, a whole host, takes them too).
func rerun(cfg Config, t *Tuning) string {
	var args []string
	for _, side := range []struct {
		flag    string
		changes []tuner.Change
	}{{"--client-sysctl", t.Client}, {"--server-sysctl", t.Server}} {
		for _, c := range side.changes {
			if !c.HostOnly || cfg.VMs {
				args = append(args, fmt.Sprintf("%s '%s=%s'", side.flag, c.Key, c.To))
			}
		}
	}
	if len(args) == 0 {
		return ""
	}
	// Later sysctl flags override earlier ones, so the original command
	// line plus the changes repeats the experiment with them.
	base := "wanlab experiment"
	if _, ok := presets[cfg.Name]; ok {
		base += " --preset " + cfg.Name
	}
	if len(cfg.Args) > 0 {
		// Keep everything but the output directory, which the re-run
		// must not overwrite.
		var quoted []string
		for i := 0; i < len(cfg.Args); i++ {
			a := cfg.Args[i]
			switch {
			case a == "--out" || a == "-out":
				i++
				continue
			case strings.HasPrefix(a, "--out=") || strings.HasPrefix(a, "-out="):
				continue
			}
			quoted = append(quoted, shellQuote(a))
		}
		base = "wanlab " + strings.Join(quoted, " ")
	}
	return base + " " + strings.Join(args, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_=./:,%+@", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// advice gathers the tuner's plan and the analyzer's advice, without
// repeating a line. The analyzer's advice comes from one capture: the
// server's when it has any (it sees the sender), else the client's; the two
// captures of one transfer give the same advice with slightly different
// figures, and printing both reads as two different predictions.
func advice(r *Result) []string {
	seen := map[string]bool{}
	var out []string
	add := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	if t := r.Tuning; t != nil {
		for _, side := range []struct {
			name    string
			changes []tuner.Change
		}{{"client", t.Client}, {"server", t.Server}} {
			for _, c := range side.changes {
				note := ""
				if c.HostOnly && !r.Config.VMs {
					note = " (host-wide: not settable inside the lab's namespace)"
				}
				add(fmt.Sprintf("tuner: on the %s set %s from %q to %q%s: %s", side.name, c.Key, c.From, c.To, note, c.Reason))
			}
		}
		if t.Rerun != "" {
			add(fmt.Sprintf("tuner: one stream would go from %s to %s; try it: %s",
				mbps(t.Current), mbps(t.After), t.Rerun))
		}
	}
	// One change gets one prediction: when the tuner has planned the
	// change it predicts the rate after it (from the sysctls in force,
	// with the model the analyzer uses), and the diagnosis's own
	// "predicted:" line would be a second figure for the same change.
	tunerPredicts := r.Tuning != nil && r.Tuning.After > 0
	// Nor does a sysctl the tuner changes get a second line from the
	// diagnosis: the tuner's says what to set it to from the sysctls in
	// force and the window share this kernel offers, the diagnosis's from
	// the capture alone (with the default share), so the two would give
	// one change with two different numbers.
	var planned []string
	if t := r.Tuning; t != nil {
		for _, c := range append(append([]tuner.Change{}, t.Client...), t.Server...) {
			planned = append(planned, c.Key)
		}
	}
	names := func(a string) bool {
		for _, k := range planned {
			if strings.Contains(a, k) {
				return true
			}
		}
		return false
	}
	for _, side := range []string{SideServer, SideClient} {
		cr := r.Captures[side]
		if cr == nil || cr.Diagnosis == nil {
			continue
		}
		for _, a := range cr.Diagnosis.Advice {
			if tunerPredicts && strings.HasPrefix(a, "predicted:") || names(a) {
				continue
			}
			add(a)
		}
		if len(cr.Diagnosis.Advice) > 0 {
			break
		}
	}
	return out
}
