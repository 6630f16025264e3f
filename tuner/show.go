package tuner

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wanlab/wanlab/units"
)

// Ceiling is the throughput one buffer limit allows a single connection
// at a given RTT.
type Ceiling struct {
	Limit  string     `json:"limit"`
	Side   string     `json:"side"` // "receiver" or "sender"
	Keys   []string   `json:"keys"`
	Buffer units.Size `json:"buffer_bytes"`
	Window units.Size `json:"window_bytes"`
	Rate   units.Rate `json:"rate_bps"`
	Why    string     `json:"why"`
}

// Report is what `wanlab tune show` prints.
type Report struct {
	*Snapshot
	Model    string        `json:"window_model"`
	Ratio    float64       `json:"window_ratio"`
	RTT      time.Duration `json:"rtt_ns,omitempty"`
	Ceilings []Ceiling     `json:"ceilings,omitempty"`
}

// Ceilings computes, for each buffer limit in s, the window it allows one
// connection and the rate that window sustains at rtt.
func Ceilings(s *Snapshot, m WindowModel, rtt time.Duration) []Ceiling {
	var out []Ceiling
	add := func(c Ceiling) {
		if !s.WindowScaling && c.Side == "receiver" && c.Window > 65535 {
			c.Window = 65535
			c.Why += "; tcp_window_scaling is 0, so no window exceeds 65535 bytes"
		}
		c.Rate = RateFor(c.Window, rtt)
		out = append(out, c)
	}
	pct := fmt.Sprintf("%.0f%%", 100*m.Ratio())
	if s.Moderate {
		sp := units.Size(s.TCPRmem.Max)
		add(Ceiling{Limit: "receiver, autotuned sockets", Side: "receiver",
			Keys: []string{"net.ipv4.tcp_rmem"}, Buffer: sp, Window: m.Window(sp),
			Why: fmt.Sprintf("autotuning grows the receive buffer up to tcp_rmem max (%s); the window is %s of it", sp.Human(), pct)})
	} else {
		sp := units.Size(s.TCPRmem.Default)
		add(Ceiling{Limit: "receiver, autotuning off", Side: "receiver",
			Keys: []string{"net.ipv4.tcp_rmem", "net.ipv4.tcp_moderate_rcvbuf"}, Buffer: sp, Window: m.Window(sp),
			Why: fmt.Sprintf("tcp_moderate_rcvbuf is 0, so sockets keep tcp_rmem default (%s); the window is %s of it", sp.Human(), pct)})
	}
	if s.RmemMax > 0 {
		sp := units.Size(2 * s.RmemMax)
		add(Ceiling{Limit: "receiver, sockets with SO_RCVBUF", Side: "receiver",
			Keys: []string{"net.core.rmem_max"}, Buffer: sp, Window: m.LockedWindow(sp, units.Size(s.TCPRmem.Max)),
			Why: fmt.Sprintf("SO_RCVBUF is capped at rmem_max (%s) and doubled, and turns autotuning off", units.Size(s.RmemMax).Human())})
	}
	sp := units.Size(s.TCPWmem.Max)
	why := fmt.Sprintf("autotuning grows the send buffer up to tcp_wmem max (%s), which holds sent-but-unacked and unsent data; never less than one %s skb", sp.Human(), SizeGoal(DefaultMSS).Human())
	if sp < 2*SizeGoal(DefaultMSS) {
		why += oneSkbNote
	}
	add(Ceiling{Limit: "sender, autotuned sockets", Side: "sender",
		Keys: []string{"net.ipv4.tcp_wmem"}, Buffer: sp, Window: SendWindow(sp, DefaultMSS), Why: why})
	if s.WmemMax > 0 {
		sp := units.Size(2 * s.WmemMax)
		add(Ceiling{Limit: "sender, sockets with SO_SNDBUF", Side: "sender",
			Keys: []string{"net.core.wmem_max"}, Buffer: sp, Window: SendWindow(sp, DefaultMSS),
			Why: fmt.Sprintf("SO_SNDBUF is capped at wmem_max (%s) and doubled, and turns autotuning off", units.Size(s.WmemMax).Human())})
	}
	return out
}

// oneSkbNote qualifies a ceiling of one skb per round trip: the skb's
// size goal is also capped at half the largest window the receiver has
// advertised (tcp_bound_to_half_wnd in net/ipv4/tcp_output.c). A receiver
// whose window stays under twice the skb (as when only one skb per round
// trip arrives and autotuning sees no reason to grow) holds the rate at
// about half the ceiling; seen in 2 of 3 runs at 100 ms on the lab.
const oneSkbNote = "; the skb is also capped at half the largest window the receiver advertised " +
	"(tcp_bound_to_half_wnd), so while that window stays under twice the skb the rate is about half of this"

// NewReport builds the show report; rtt 0 leaves the ceilings out.
func NewReport(s *Snapshot, m WindowModel, rtt time.Duration) Report {
	r := Report{Snapshot: s, Model: m.Describe(), Ratio: m.Ratio(), RTT: rtt}
	if rtt > 0 {
		r.Ceilings = Ceilings(s, m, rtt)
	}
	return r
}

// MBps prints a rate in decimal megabytes per second, as download tools
// show it, followed by bits per second.
func MBps(r units.Rate) string {
	v := r.BytesPerSecond() / 1e6
	prec := 1
	switch {
	case v < 1:
		prec = 3
	case v < 10:
		prec = 2
	}
	return strconv.FormatFloat(v, 'f', prec, 64) + " MB/s (" + r.Human() + ")"
}

// Bytes prints a size as decimal megabytes (with the binary form).
func Bytes(s units.Size) string {
	if s < 1e6 {
		return s.Human()
	}
	return strconv.FormatFloat(float64(s)/1e6, 'f', 2, 64) + " MB (" + s.Human() + ")"
}

// WriteText prints the report for people.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	where := "host"
	if r.Netns != "" {
		where = "network namespace " + r.Netns
	}
	fmt.Fprintf(&b, "TCP throughput settings in %s (Linux %s)\n\n", where, r.Kernel.Release)
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	for _, s := range r.Settings {
		v := s.Value
		if !s.Present {
			v = "-"
		}
		note := ""
		if s.Note != "" {
			note = "(" + s.Note + ")"
		}
		fmt.Fprintln(tw, s.Key+"\t"+v+"\t"+note)
	}
	tw.Flush()
	for _, line := range strings.SplitAfter(table.String(), "\n") {
		b.WriteString(strings.TrimRight(line, " \n"))
		if strings.HasSuffix(line, "\n") {
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "\nWindow model: %s\n", r.Model)
	if r.RTT > 0 {
		fmt.Fprintf(&b, "\nCeilings for one connection at %s RTT:\n", fmtRTT(r.RTT))
		for _, c := range r.Ceilings {
			verb := "the receive window can reach about"
			if c.Side == "sender" {
				verb = "the data in flight can reach about"
			}
			fmt.Fprintf(&b, "  %s: %s %s, so at most %s at %s\n      %s\n",
				c.Limit, verb, Bytes(c.Window), MBps(c.Rate), fmtRTT(r.RTT), c.Why)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fmtRTT prints an RTT to 10 µs: "35ms", "35.01ms", "250us".
func fmtRTT(d time.Duration) string {
	d = d.Round(10 * time.Microsecond)
	if d < time.Millisecond || d%time.Millisecond == 0 {
		return units.FormatDuration(d)
	}
	return strconv.FormatFloat(float64(d)/1e6, 'f', -1, 64) + "ms"
}
