package experiment

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"

	"github.com/wanlab/wanlab/analyzer/report"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/tuner/sockopt"
)

// WriteReport writes the self-contained HTML report: the analyzer's report
// page with the client and the server capture side by side (every graph,
// zoomable in time, and each connection's diagnosis), each headed by
// tables of what the experiment set and measured on that host: the specs,
// the sysctls and socket options, TCP_INFO, the impairment's counters and
// the tuner's advice.
func WriteReport(w io.Writer, r *Result) error {
	page := report.Page{Title: "wanlab experiment " + r.Config.Name, Intro: reportIntro(r)}
	for _, side := range []string{SideClient, SideServer} {
		cr := r.Captures[side]
		if cr == nil {
			continue
		}
		sec := report.Section{
			Title:       side + " capture (" + strconv.FormatUint(cr.Stats.Packets, 10) + " packets)",
			Result:      cr.Analysis,
			Connections: cr.Connections,
		}
		if cr.Analysis == nil {
			// Without the analyzer's result (say, a result read back
			// from JSON) its warnings are still worth showing.
			sec.Warnings = slices.Clone(cr.Warnings)
		}
		if cr.Stats.KernelDrops > 0 {
			sec.Warnings = append(sec.Warnings, fmt.Sprintf("the kernel dropped %d of %d packets before the capture saw them (ring full): gaps in the graphs are the capture's, not the network's",
				cr.Stats.KernelDrops, cr.Stats.KernelPackets))
		}
		sec.Tables = hostTables(r, side)
		page.Sections = append(page.Sections, sec)
	}
	return report.Write(w, page)
}

// reportIntro is the one paragraph under the title: what ran and what came
// out.
func reportIntro(r *Result) string {
	s := fmt.Sprintf("Lab %s, %s, %s. ", r.LabID, r.Mode, r.Started.UTC().Format("2006-01-02 15:04:05 UTC"))
	if about := PresetAbout(r.Config.Name); about != "" {
		s += "Preset: " + about + ". "
	}
	if d := r.Download; d != nil {
		s += fmt.Sprintf("Downloaded %s in %s: average %s.", d.Bytes.Human(), secs(d.Elapsed), mbps(d.Average))
	}
	if rr := r.RR; rr != nil {
		s += fmt.Sprintf("%d requests, %d errors, %.0f requests/s; latency p50 %s, p99 %s.",
			rr.Requests, rr.Errors, rr.PerSec, ms(rr.Latency.P50), ms(rr.Latency.P99))
	}
	return s
}

// hostTables are the tables heading one side's section.
func hostTables(r *Result, side string) []report.Table {
	cfg := r.Config
	var tables []report.Table
	if side == SideClient {
		setting := report.Table{Title: "setting", Rows: [][]string{{"mode", r.Mode}}}
		if h, ok := r.Hosts[lab.RoleRouter]; ok {
			setting.Rows = append(setting.Rows, []string{"router", h.String()})
		}
		for _, dir := range []string{ToClient, ToServer} {
			s := r.Specs[dir]
			if s == "" {
				s = "(none)"
			}
			setting.Rows = append(setting.Rows, []string{dir, s})
		}
		if cfg.Requests > 0 {
			setting.Rows = append(setting.Rows, []string{"requests", fmt.Sprintf("%d over %d connections, %d-byte responses", cfg.Requests, cfg.Concurrency, cfg.RRBody)})
		} else {
			setting.Rows = append(setting.Rows, []string{"download", cfg.Size.Human()})
		}
		tables = append(tables, setting)
		tables = append(tables, resultTable(r))
	}
	host := report.Table{Title: side + " host"}
	sysctls, opt := cfg.ClientSysctls, cfg.Client
	addr := r.Client.String()
	if side == SideServer {
		sysctls, opt, addr = cfg.ServerSysctls, cfg.Server, r.Server.String()
	}
	host.Rows = append(host.Rows, []string{"address", addr})
	if h, ok := r.Hosts[side]; ok {
		host.Rows = append(host.Rows, []string{"kernel", h.String()})
	}
	for _, k := range slices.Sorted(maps.Keys(sysctls)) {
		host.Rows = append(host.Rows, []string{k, sysctls[k]})
	}
	if s := optString(opt); s != "" {
		host.Rows = append(host.Rows, []string{"socket options", s})
	}
	tables = append(tables, host)
	if d := r.Download; d != nil {
		info, eff := &d.Client, &d.ClientEffective
		if side == SideServer {
			info, eff = d.Server, d.ServerEffective
		}
		if info != nil {
			tables = append(tables, tcpInfoTable(side, info, eff))
		}
	}
	if side == SideServer {
		if t := impairTable(r); t != nil {
			tables = append(tables, *t)
		}
		if len(r.Advice) > 0 {
			adv := report.Table{Title: "advice (tuner and analyzer)"}
			for i, a := range r.Advice {
				adv.Rows = append(adv.Rows, []string{strconv.Itoa(i + 1), a})
			}
			tables = append(tables, adv)
		}
	}
	return tables
}

func resultTable(r *Result) report.Table {
	t := report.Table{Title: "result"}
	if d := r.Download; d != nil {
		t.Rows = append(t.Rows,
			[]string{"downloaded", d.Bytes.Human() + " in " + secs(d.Elapsed)},
			[]string{"average", mbps(d.Average)},
			[]string{"after the first byte", mbps(d.Transfer)},
			[]string{"connect / first byte", ms(d.Connect) + " / " + ms(d.FirstByte)})
	}
	if rr := r.RR; rr != nil {
		l := rr.Latency
		t.Rows = append(t.Rows,
			[]string{"requests", fmt.Sprintf("%d (%d errors) in %s: %.0f/s", rr.Requests, rr.Errors, secs(rr.Elapsed), rr.PerSec)},
			[]string{"latency p50 / p90 / p99", ms(l.P50) + " / " + ms(l.P90) + " / " + ms(l.P99)},
			[]string{"latency min / mean / max", ms(l.Min) + " / " + ms(l.Mean) + " / " + ms(l.Max)})
		if rr.FirstError != "" {
			t.Rows = append(t.Rows, []string{"first error", rr.FirstError})
		}
	}
	return t
}

func tcpInfoTable(side string, i *sockopt.TCPInfo, e *sockopt.Effective) report.Table {
	t := report.Table{Title: side + " socket (TCP_INFO at the end)", Rows: [][]string{
		{"state", i.State + ", " + i.CAState},
		{"rtt / min rtt", ms(i.RTT) + " / " + ms(i.MinRTT)},
		{"cwnd", fmt.Sprintf("%d × %d B = %s", i.SndCwnd, i.SndMSS, i.CwndBytes().Human())},
		{"peer's window (snd_wnd)", i.SndWnd.Human()},
		{"own window (rcv_wnd)", i.RcvWnd.Human()},
		{"delivery rate", i.DeliveryRate.Human()},
		{"retransmitted", fmt.Sprintf("%d segments, %s", i.TotalRetrans, i.BytesRetrans.Human())},
		{"busy / rwnd-limited / sndbuf-limited", fmt.Sprintf("%s / %.0f %% / %.0f %%", secs(i.BusyTime), 100*i.RwndLimitedFraction(), 100*i.SndbufLimitedFraction())},
	}}
	if e != nil {
		t.Rows = append(t.Rows,
			[]string{"buffers rcv / snd", e.RcvBuf.Human() + " / " + e.SndBuf.Human()},
			[]string{"congestion control", e.CC})
	}
	return t
}

// impairTable shows what the proxy did per direction, or what the kernel
// reported back.
func impairTable(r *Result) *report.Table {
	st := r.Impairment
	if st == nil {
		return nil
	}
	t := &report.Table{Title: "impairment"}
	if st.Proxy != nil {
		t.Header = []string{"egress", "spec", "packets in / out", "dropped (loss / queue / oversize)"}
		for _, d := range st.Proxy.Directions {
			c := d.Engine.Totals
			t.Rows = append(t.Rows, []string{d.Iface, d.Spec, fmt.Sprintf("%d / %d", c.PacketsIn, c.PacketsOut),
				fmt.Sprintf("%d / %d / %d", c.Drops.Loss, c.Drops.Queue, c.Drops.Oversize)})
		}
		if st.Tap != "" {
			t.Rows = append(t.Rows, []string{"proxy tap", st.Tap, "", ""})
		}
	}
	for _, dir := range slices.Sorted(maps.Keys(st.Kernel)) {
		t.Rows = append(t.Rows, []string{dir, "kernel: " + st.Kernel[dir]})
	}
	if len(t.Rows) == 0 {
		return nil
	}
	return t
}
