package experiment

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/tuner/sockopt"
	"github.com/wanlab/wanlab/units"
)

// mbps prints a rate as the seeds quote them: bytes per second, then bits.
func mbps(r units.Rate) string {
	v := r.BytesPerSecond() / 1e6
	prec := 2
	switch {
	case v >= 100:
		prec = 0
	case v >= 10:
		prec = 1
	}
	return fmt.Sprintf("%.*f MB/s (%s)", prec, v, r.Human())
}

// secs prints a duration in seconds with three significant digits.
func secs(d time.Duration) string {
	return units.Sprintf("%.3g s", d.Seconds())
}

// ms prints a duration in milliseconds with three significant digits.
func ms(d time.Duration) string {
	return units.Sprintf("%.3g ms", float64(d)/float64(time.Millisecond))
}

// WriteSummary prints the experiment's result for a terminal: the setting,
// a curl-like line, the sockets' TCP_INFO, the diagnosis of each capture,
// the advice and the files written.
func WriteSummary(w io.Writer, r *Result) error {
	var b strings.Builder
	cfg := r.Config
	fmt.Fprintf(&b, "experiment %s (lab %s, %s)\n", cfg.Name, r.LabID, r.Mode)
	if about := PresetAbout(cfg.Name); about != "" {
		fmt.Fprintf(&b, "  %s\n", about)
	}
	for _, dir := range []string{ToClient, ToServer} {
		s := r.Specs[dir]
		if s == "" {
			s = "(none)"
		}
		fmt.Fprintf(&b, "  %-10s %s\n", dir, spec.Abbrev(s))
		if sched := cfg.Schedule[dir]; sched != "" {
			fmt.Fprintf(&b, "  %-10s schedule: %s\n", "", strings.Join(strings.Split(strings.TrimSpace(spec.Abbrev(sched)), "\n"), "; "))
		}
	}
	for _, role := range []string{"client", "router", "server"} {
		if h, ok := r.Hosts[role]; ok && r.Config.VMs {
			fmt.Fprintf(&b, "  %-10s kernel %s\n", role, h)
		}
	}
	for _, h := range []struct {
		name string
		kv   map[string]string
	}{{"client", cfg.ClientSysctls}, {"server", cfg.ServerSysctls}} {
		for _, k := range slices.Sorted(maps.Keys(h.kv)) {
			fmt.Fprintf(&b, "  %-10s sysctl %s=%q\n", h.name, k, h.kv[k])
		}
	}
	for _, o := range []struct {
		name string
		opt  sockopt.Options
	}{{"client", cfg.Client}, {"server", cfg.Server}} {
		if s := optString(o.opt); s != "" {
			fmt.Fprintf(&b, "  %-10s socket %s\n", o.name, s)
		}
	}
	if cfg.Requests > 0 {
		nagle := "on: the second write of each response waits for the client's ACK"
		if cfg.NoNagle {
			nagle = "off (TCP_NODELAY)"
		}
		fmt.Fprintf(&b, "  %-10s Nagle %s\n", "server", nagle)
	}
	b.WriteString("\n")

	if d := r.Download; d != nil {
		fmt.Fprintf(&b, "downloaded %s in %s: average %s (connect %s, first byte %s)\n",
			d.Bytes.Human(), secs(d.Elapsed), mbps(d.Average),
			ms(d.Connect), ms(d.FirstByte))
		b.WriteString("\n")
		tw := tabwriter.NewWriter(&b, 2, 8, 2, ' ', 0)
		fmt.Fprintf(tw, "TCP_INFO\tclient\tserver\n")
		srv := sockopt.TCPInfo{}
		if d.Server != nil {
			srv = *d.Server
		}
		c := d.Client
		row := func(name, cv, sv string) { fmt.Fprintf(tw, "  %s\t%s\t%s\n", name, cv, sv) }
		row("rtt / min rtt", ms(c.RTT)+" / "+ms(c.MinRTT), ms(srv.RTT)+" / "+ms(srv.MinRTT))
		row("cwnd", fmt.Sprintf("%d × %d B", c.SndCwnd, c.SndMSS), fmt.Sprintf("%d × %d B = %s", srv.SndCwnd, srv.SndMSS, srv.CwndBytes().Human()))
		row("peer window (snd_wnd)", c.SndWnd.Human(), srv.SndWnd.Human())
		row("own window (rcv_wnd)", c.RcvWnd.Human(), srv.RcvWnd.Human())
		row("socket buffers rcv/snd", d.ClientEffective.RcvBuf.Human()+" / "+d.ClientEffective.SndBuf.Human(), effBufs(d.ServerEffective))
		if lr := LearnedRatio(r); lr > 0 {
			row("window / rcv buffer", fmt.Sprintf("%.2f (learned; tune --window-ratio)", lr), "")
		}
		row("delivery rate", c.DeliveryRate.Human(), srv.DeliveryRate.Human())
		row("retransmitted", fmt.Sprintf("%d segments", c.TotalRetrans), fmt.Sprintf("%d segments", srv.TotalRetrans))
		row("busy / rwnd-limited", "", fmt.Sprintf("%s / %.0f %%", secs(srv.BusyTime), 100*srv.RwndLimitedFraction()))
		row("sndbuf-limited", "", fmt.Sprintf("%.0f %%", 100*srv.SndbufLimitedFraction()))
		row("congestion control", d.ClientEffective.CC, effCC(d.ServerEffective))
		tw.Flush()
	}
	if c := r.ClientCmd; c != nil {
		fmt.Fprintf(&b, "client command %q: exit %d after %s (output %s)\n", c.Command, c.ExitCode, secs(c.Elapsed), c.Output)
	}
	if rr := r.RR; rr != nil {
		l := rr.Latency
		fmt.Fprintf(&b, "%d requests over %d connections in %s: %.0f requests/s, %d errors\n",
			rr.Requests, cfg.Concurrency, secs(rr.Elapsed), rr.PerSec, rr.Errors)
		fmt.Fprintf(&b, "  latency p50 %s  p90 %s  p99 %s  max %s  (mean %s)\n", ms(l.P50), ms(l.P90), ms(l.P99), ms(l.Max), ms(l.Mean))
		if rr.FirstError != "" {
			fmt.Fprintf(&b, "  first error: %s\n", rr.FirstError)
		}
	}
	b.WriteString("\n")

	for _, side := range []string{SideServer, SideClient} {
		cr := r.Captures[side]
		if cr == nil {
			continue
		}
		fmt.Fprintf(&b, "%s capture: %d packets (%d dropped by the kernel), %d connection(s)", side, cr.Stats.Packets, cr.Stats.KernelDrops, len(cr.Connections))
		if len(cr.Limits) > 1 || len(cr.Connections) > 1 {
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(cr.Limits)) {
				parts = append(parts, fmt.Sprintf("%s %d", k, cr.Limits[k]))
			}
			fmt.Fprintf(&b, " [%s]", strings.Join(parts, ", "))
		}
		b.WriteString("\n")
		if d := cr.Diagnosis; d != nil {
			fmt.Fprintf(&b, "  %s: %s limited at %s\n", d.Direction, d.Limit, mbps(units.Rate(d.RateBps)))
			for _, e := range d.Evidence {
				fmt.Fprintf(&b, "    - %s\n", e)
			}
		}
	}
	if len(r.Advice) > 0 {
		b.WriteString("\nadvice:\n")
		for _, a := range r.Advice {
			fmt.Fprintf(&b, "  - %s\n", a)
		}
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "report: %s\n", r.Report)
	fmt.Fprintf(&b, "json:   %s\n", r.JSON)
	for _, side := range []string{SideClient, SideServer} {
		if cr := r.Captures[side]; cr != nil {
			fmt.Fprintf(&b, "%s capture: %s\n", side, cr.Path)
		}
	}
	if r.Impairment != nil && r.Impairment.Tap != "" {
		fmt.Fprintf(&b, "proxy tap: %s\n", r.Impairment.Tap)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func optString(o sockopt.Options) string {
	var p []string
	if o.RcvBuf > 0 {
		p = append(p, "SO_RCVBUF="+o.RcvBuf.String())
	}
	if o.SndBuf > 0 {
		p = append(p, "SO_SNDBUF="+o.SndBuf.String())
	}
	if o.CC != "" {
		p = append(p, "TCP_CONGESTION="+o.CC)
	}
	if o.QuickAck {
		p = append(p, "TCP_QUICKACK")
	}
	if o.NoDelay {
		p = append(p, "TCP_NODELAY")
	}
	if o.NotSentLowat > 0 {
		p = append(p, "TCP_NOTSENT_LOWAT="+o.NotSentLowat.String())
	}
	return strings.Join(p, " ")
}

func effBufs(e *sockopt.Effective) string {
	if e == nil {
		return ""
	}
	return e.RcvBuf.Human() + " / " + e.SndBuf.Human()
}

func effCC(e *sockopt.Effective) string {
	if e == nil {
		return ""
	}
	return e.CC
}
