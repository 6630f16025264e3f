package fit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/wanlab/wanlab/units"
)

// WriteJSON writes the fit as JSON (docs/fit.md).
func WriteJSON(w io.Writer, r *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// paramOrder is the order the text shows parameters in.
var paramOrder = []string{"rtt_ms", "rate_bps", "burst_bytes", "buffer_bytes", "delay_limit_packets", "congestion_losses", "loss_percent",
	"gemodel_p_percent", "gemodel_r_percent", "reorder_percent", "reorder_depth_packets", "jitter_ms",
	"receive_window_bytes", "receive_buffer_bytes", "send_window_bytes", "mss_bytes", "window_scale"}

// WriteText writes the fit for a person: the specs and sysctls first, then
// each parameter with its interval and evidence, then what is unknown.
func WriteText(w io.Writer, r *Result) error {
	bw := bufio.NewWriter(w)
	c := r.Connection
	fmt.Fprintf(bw, "fit of %s: connection %d, %s <-> %s, %s %s in %.0f ms, captured at the %s\n",
		r.File, c.Index, c.Client, c.Server, r.Transfer.Direction, units.Size(r.Transfer.Bytes).Human(), c.DurationMs, r.CapturedAt)
	if r.Transfer.Limit != "" {
		fmt.Fprintf(bw, "  measured %s, %s limited\n", units.Rate(r.Transfer.RateBps).Human(), r.Transfer.Limit)
	}
	fmt.Fprintln(bw, "spec:")
	for _, d := range r.Directions {
		s := d.Spec
		if s == "" {
			s = "(none)"
		}
		fmt.Fprintf(bw, "  %s -> %s: %s\n", d.From, d.To, s)
	}
	for _, side := range []struct {
		name string
		m    map[string]string
	}{{"client", r.Sysctls.Client}, {"server", r.Sysctls.Server}} {
		for _, k := range slices.Sorted(maps.Keys(side.m)) {
			fmt.Fprintf(bw, "sysctl %s: %s=%q\n", side.name, k, side.m[k])
		}
	}
	for _, d := range r.Directions {
		if !d.Data {
			continue
		}
		fmt.Fprintf(bw, "%s -> %s (the data):", d.From, d.To)
		if d.Bottleneck != "" {
			fmt.Fprintf(bw, " bottleneck a %s;", d.Bottleneck)
		}
		fmt.Fprintf(bw, " loss %s", d.LossModel)
		if d.CongestionControl != "" {
			fmt.Fprintf(bw, "; sender %s", d.CongestionControl)
		}
		fmt.Fprintln(bw)
		for _, name := range paramOrder {
			p, ok := d.Params[name]
			if !ok || !p.Known() {
				continue
			}
			fmt.Fprintf(bw, "  %-22s %s  [%s, %s]  %s\n", name, num(name, p.Value), num(name, p.Low), num(name, p.High), p.Evidence)
		}
	}
	writeSelfCheck(bw, r.SelfCheck)
	if len(r.Notes) > 0 {
		fmt.Fprintln(bw, "not inferred:")
		for _, n := range r.Notes {
			fmt.Fprintf(bw, "  - %s\n", n)
		}
	}
	if len(r.Others) > 0 {
		var s []string
		for _, o := range r.Others {
			s = append(s, fmt.Sprintf("%d (%s <-> %s, %s)", o.Index, o.Client, o.Server, units.Size(o.Bytes).Human()))
		}
		more := ""
		if r.OthersUnlisted > 0 {
			more = fmt.Sprintf("; and %d more (the %d with the most data are listed)", r.OthersUnlisted, MaxOthersListed)
		}
		fmt.Fprintf(bw, "other connections: %s%s\n", strings.Join(s, "; "), more)
	}
	return bw.Flush()
}

func num(name string, v float64) string {
	switch {
	case strings.HasSuffix(name, "_bps"):
		return units.Rate(v).Human()
	case strings.HasSuffix(name, "_bytes"):
		return units.Size(max(v, 0)).Human()
	case strings.HasSuffix(name, "_ms"):
		return units.Sprintf("%.3g ms", v)
	case strings.HasSuffix(name, "_percent"):
		return units.Sprintf("%.3g %%", v)
	}
	return units.Sprintf("%.4g", v)
}

// writeSelfCheck writes the self-check in three lines, and what it could
// not explain.
func writeSelfCheck(w io.Writer, sc *SelfCheck) {
	if sc == nil {
		return
	}
	if sc.Unchecked != "" {
		fmt.Fprintf(w, "self-check: none (%s)\n", sc.Unchecked)
		return
	}
	fmt.Fprintf(w, "self-check: %d segments replayed through the specs (%s)\n", sc.Segments, sc.Sends)
	explained := "no losses captured"
	if sc.LossExplainedShare != nil {
		explained = units.Sprintf("%d of %d losses explained", sc.LossesExplained, sc.LossesCaptured)
	}
	fmt.Fprintln(w, units.Sprintf("  %s time error median %.3g ms, p95 %.3g ms, base %.3g ms (%d segments); %s; rate curves %.3g %% apart",
		sc.Compared, sc.ErrorP50Ms, sc.ErrorP95Ms, sc.BaseErrorMs, sc.Timed, explained, sc.RateGap*100))
	for _, u := range sc.Unexplained {
		withheld := "nothing it bears on was claimed"
		if len(u.Withheld) > 0 {
			withheld = "withheld: " + strings.Join(u.Withheld, ", ")
		}
		fmt.Fprintln(w, units.Sprintf("  not explained: %s %.3g (tolerance %.3g); %s", u.Measure, u.Value, u.Tolerance, withheld))
	}
}
