package tuner

import (
	"errors"
	"fmt"
	"io"
	"math/bits"
	"strings"
	"time"

	"github.com/wanlab/wanlab/predict"
	"github.com/wanlab/wanlab/units"
)

// Evidence is what a capture says about a transfer, in the planner's own
// terms so that the planner does not depend on the analyzer. Zero fields
// are unknown.
type Evidence struct {
	Source     string        `json:"source"`
	RTT        time.Duration `json:"rtt_ns,omitempty"`
	Throughput units.Rate    `json:"throughput_bps,omitempty"`
	// MaxWindow is the largest receive window the receiver advertised;
	// MaxInFlight the most data the sender had unacknowledged.
	MaxWindow   units.Size `json:"max_window_bytes,omitempty"`
	MaxInFlight units.Size `json:"max_in_flight_bytes,omitempty"`
	MSS         units.Size `json:"mss_bytes,omitempty"`
	// Limit is the diagnosis: one of the Limit* constants.
	Limit string `json:"limit,omitempty"`
	// Predicted is the rate the capture's diagnosis expects once its
	// limit is lifted (0: none).
	Predicted units.Rate `json:"predicted_bps,omitempty"`
	Detail    string     `json:"detail,omitempty"`
	Loss      float64    `json:"loss_fraction,omitempty"`
}

// Diagnoses the planner acts on.
const (
	LimitReceiveWindow = "receive-window"
	LimitSendBuffer    = "send-buffer"
	LimitCongestion    = "congestion"
	LimitApplication   = "application"
	LimitBandwidth     = "bandwidth"
)

// PlanInput is what the user wants: a rate over a path of a given RTT,
// shared by Streams parallel connections.
type PlanInput struct {
	RTT  time.Duration `json:"rtt_ns"`
	Rate units.Rate    `json:"rate_bps"`
	// RateSource says where Rate came from when the user did not give it.
	RateSource string     `json:"rate_source,omitempty"`
	Streams    int        `json:"streams"`
	MSS        units.Size `json:"mss_bytes,omitempty"`
	Evidence   *Evidence  `json:"evidence,omitempty"`
}

// Change is one setting the plan proposes, with the reason.
type Change struct {
	Key    string `json:"key"`
	From   string `json:"from"`
	To     string `json:"to"`
	Side   string `json:"side"` // receiver, sender, both
	Reason string `json:"reason"`
	// HostOnly marks keys a network namespace cannot change.
	HostOnly bool `json:"host_only,omitempty"`
}

// Plan is the arithmetic and the settings that reach the target.
type Plan struct {
	Netns           string     `json:"netns,omitempty"`
	Input           PlanInput  `json:"input"`
	Model           string     `json:"window_model"`
	Ratio           float64    `json:"window_ratio"`
	BDP             units.Size `json:"bdp_bytes"`
	PerStreamRate   units.Rate `json:"per_stream_rate_bps"`
	PerStreamWindow units.Size `json:"per_stream_window_bytes"`
	// Current is what one stream reaches now (the lowest ceiling), After
	// what it reaches with the changes.
	Current units.Rate `json:"current_per_stream_rate_bps"`
	After   units.Rate `json:"after_per_stream_rate_bps"`
	Changes []Change   `json:"changes"`
	Keep    []string   `json:"keep"`
	Notes   []string   `json:"notes"`
}

// Assignments returns the plan's changes as apply input; hostOnly false
// drops the keys a namespace cannot change.
func (p Plan) Assignments(includeHostOnly bool) []Assignment {
	var out []Assignment
	for _, c := range p.Changes {
		if c.HostOnly && !includeHostOnly {
			continue
		}
		out = append(out, Assignment{Key: c.Key, Value: c.To})
	}
	return out
}

// nextPow2 rounds up to a power of two, the way buffer limits are usually
// written (16 MiB rather than 14 MB).
func nextPow2(v units.Size) units.Size {
	if v <= 1 {
		return 1
	}
	return units.Size(1) << bits.Len64(uint64(v-1))
}

// Validate checks the input.
func (in PlanInput) Validate() error {
	var errs []error
	if in.RTT <= 0 {
		errs = append(errs, errors.New("--rtt: must be positive"))
	}
	if in.Rate == 0 {
		errs = append(errs, errors.New("--rate: must be positive"))
	}
	if in.Streams < 1 {
		errs = append(errs, fmt.Errorf("--streams %d: must be at least 1", in.Streams))
	}
	return errors.Join(errs...)
}

// MakePlan computes the bandwidth-delay product of the target and the
// settings that let each stream keep its share in flight, given the
// current snapshot (of the receiver and sender: tcp_rmem matters where
// data is received, tcp_wmem where it is sent).
func MakePlan(s *Snapshot, m WindowModel, in PlanInput) (Plan, error) {
	if err := in.Validate(); err != nil {
		return Plan{}, err
	}
	if in.MSS == 0 {
		in.MSS = DefaultMSS
	}
	p := Plan{Netns: s.Netns, Input: in, Model: m.Describe(), Ratio: m.Ratio(),
		Changes: []Change{}, Keep: []string{}, Notes: []string{}} // [] not null in JSON
	p.BDP = WindowFor(in.Rate, in.RTT)
	p.PerStreamRate = in.Rate / units.Rate(in.Streams)
	p.PerStreamWindow = WindowFor(p.PerStreamRate, in.RTT)
	w := p.PerStreamWindow
	hostOnly := func(key string) bool { k, _ := LookupKey(key); return !k.PerNetns }
	change := func(key, from, to, side, reason string) {
		p.Changes = append(p.Changes, Change{Key: key, From: from, To: to, Side: side, Reason: reason, HostOnly: hostOnly(key)})
	}
	rmem, wmem := s.TCPRmem, s.TCPWmem

	// Receiver: autotuning lets the buffer grow to tcp_rmem max, and the
	// window is Ratio of the buffer (see WindowModel), so the max must be
	// at least Space(w); it is rounded up to a power of two, which leaves
	// between 0 and 100 % headroom for loss recovery (out-of-order data
	// occupies the buffer too) and RTT jitter.
	rcvNeed := m.Space(w)
	if units.Size(rmem.Max) < rcvNeed {
		to := rmem
		to.Max = int64(nextPow2(rcvNeed))
		to.Default = min(to.Default, to.Max)
		change("net.ipv4.tcp_rmem", rmem.String(), to.String(), "receiver", fmt.Sprintf(
			"each stream needs a %s window (%s × %s) and the window is %.0f%% of the receive buffer, so the buffer must reach %s; tcp_rmem max %s allows a %s window, %s",
			Bytes(w), MBps(p.PerStreamRate), fmtRTT(in.RTT), 100*m.Ratio(), Bytes(rcvNeed),
			Bytes(units.Size(rmem.Max)), Bytes(m.Window(units.Size(rmem.Max))), MBps(RateFor(m.Window(units.Size(rmem.Max)), in.RTT))))
		rmem = to
	} else {
		p.Keep = append(p.Keep, fmt.Sprintf("net.ipv4.tcp_rmem max %s already allows a %s window (%s needed)",
			Bytes(units.Size(rmem.Max)), Bytes(m.Window(units.Size(rmem.Max))), Bytes(w)))
	}
	if !s.Moderate {
		change("net.ipv4.tcp_moderate_rcvbuf", "0", "1", "receiver",
			fmt.Sprintf("without receive autotuning every socket keeps tcp_rmem default (%s), whatever the max", Bytes(units.Size(rmem.Default))))
	}
	if !s.WindowScaling && w > 65535 {
		change("net.ipv4.tcp_window_scaling", "0", "1", "both",
			"without window scaling no window exceeds 65535 bytes")
	}
	// Applications that set SO_RCVBUF themselves (iperf3 -w, some servers)
	// get 2 × min(request, rmem_max) and no autotuning.
	if rmNeed := (rcvNeed + 1) / 2; units.Size(s.RmemMax) < rmNeed {
		change("net.core.rmem_max", fmt.Sprint(s.RmemMax), fmt.Sprint(int64(nextPow2(rmNeed))), "receiver",
			fmt.Sprintf("applications that set SO_RCVBUF (iperf3 -w, some servers) are capped at rmem_max, which the kernel doubles, and lose autotuning: %s lets them reach the %s buffer", nextPow2(rmNeed).Human(), Bytes(rcvNeed)))
	}

	// Sender: the send buffer holds sent-but-unacked data plus what the
	// application has queued; a full window in flight and one skb being
	// filled (SizeGoal) keeps the pipe full while the application refills.
	sndNeed := w + SizeGoal(in.MSS)
	if SendWindow(units.Size(wmem.Max), in.MSS) < sndNeed {
		to := wmem
		to.Max = int64(nextPow2(sndNeed))
		to.Default = min(to.Default, to.Max)
		change("net.ipv4.tcp_wmem", wmem.String(), to.String(), "sender", fmt.Sprintf(
			"the send buffer holds the data in flight plus the skb being filled, so it must reach %s; tcp_wmem max %s keeps at most %s in flight, %s",
			Bytes(sndNeed), Bytes(units.Size(wmem.Max)), Bytes(SendWindow(units.Size(wmem.Max), in.MSS)),
			MBps(RateFor(SendWindow(units.Size(wmem.Max), in.MSS), in.RTT))))
		wmem = to
	} else {
		p.Keep = append(p.Keep, fmt.Sprintf("net.ipv4.tcp_wmem max %s already holds a %s window plus the skb being filled", Bytes(units.Size(wmem.Max)), Bytes(w)))
	}
	if wmNeed := (sndNeed + 1) / 2; units.Size(s.WmemMax) < wmNeed {
		change("net.core.wmem_max", fmt.Sprint(s.WmemMax), fmt.Sprint(int64(nextPow2(wmNeed))), "sender",
			fmt.Sprintf("applications that set SO_SNDBUF are capped at wmem_max, which the kernel doubles, and lose autotuning: %s lets them reach the %s buffer", nextPow2(wmNeed).Human(), Bytes(sndNeed)))
	}

	// All TCP sockets share tcp_mem (pages); past its pressure threshold
	// the kernel stops growing buffers.
	if s.TCPMem != nil {
		const page = 4096
		need := int64(in.Streams) * (rmem.Max + wmem.Max) / page
		if s.TCPMem.Default < need {
			to := Triple{Min: max(s.TCPMem.Min, need/2), Default: need, Max: max(s.TCPMem.Max, need*3/2)}
			change("net.ipv4.tcp_mem", s.TCPMem.String(), to.String(), "both", fmt.Sprintf(
				"%d stream(s) with full buffers use %d pages; above tcp_mem pressure (%d pages) the kernel shrinks buffers for every socket",
				in.Streams, need, s.TCPMem.Default))
		} else {
			p.Keep = append(p.Keep, fmt.Sprintf("net.ipv4.tcp_mem pressure %d pages covers %d stream(s) with full buffers (%d pages)", s.TCPMem.Default, in.Streams, need))
		}
	}

	// Advice that changes no buffer.
	if s.Value("net.ipv4.tcp_slow_start_after_idle") == "1" {
		p.Notes = append(p.Notes, fmt.Sprintf(
			"net.ipv4.tcp_slow_start_after_idle is 1: a connection idle for one RTO restarts from the initial window and needs about %d round trips (%s) to reach %s again; set it to 0 for bursty transfers over this path",
			slowStartRounds(w, in.MSS), fmtRTT(time.Duration(slowStartRounds(w, in.MSS))*in.RTT), Bytes(w)))
	}
	if ev := in.Evidence; ev != nil {
		p.Notes = append(p.Notes, evidenceNotes(ev, s, m, in)...)
	}

	cur := minCeiling(s, m, in.RTT)
	after := *s
	after.TCPRmem, after.TCPWmem, after.Moderate, after.WindowScaling = rmem, wmem, true, s.WindowScaling || w > 65535
	p.Current = cur
	p.After = minCeiling(&after, m, in.RTT)
	return p, nil
}

// minCeiling is the lowest autotuned ceiling (receive or send).
func minCeiling(s *Snapshot, m WindowModel, rtt time.Duration) units.Rate {
	var r units.Rate
	for _, c := range Ceilings(s, m, rtt) {
		if strings.Contains(c.Limit, "SO_") {
			continue
		}
		if r == 0 || c.Rate < r {
			r = c.Rate
		}
	}
	return r
}

// slowStartRounds is how many RTTs slow start needs from the initial
// window of 10 segments (RFC 6928) to w, doubling each round.
func slowStartRounds(w, mss units.Size) int {
	n, cw := 0, 10*mss
	for cw < w && n < 64 {
		cw *= 2
		n++
	}
	return n
}

func evidenceNotes(ev *Evidence, s *Snapshot, m WindowModel, in PlanInput) []string {
	var notes []string
	src := ev.Source
	if src == "" {
		src = "the capture"
	}
	if ev.Throughput > 0 && ev.RTT > 0 && ev.Detail == "" {
		notes = append(notes, fmt.Sprintf("%s: %s at %s RTT, i.e. %s per round trip", src, MBps(ev.Throughput), fmtRTT(ev.RTT), Bytes(WindowFor(ev.Throughput, ev.RTT))))
	}
	switch ev.Limit {
	case LimitReceiveWindow:
		msg := fmt.Sprintf("%s diagnoses a receive-window limit", src)
		if ev.MaxWindow > 0 {
			msg += fmt.Sprintf(": the receiver never advertised more than %s, which at %.0f%% of the buffer means a receive buffer of about %s on the receiving host", Bytes(ev.MaxWindow), 100*m.Ratio(), Bytes(m.Space(ev.MaxWindow)))
		}
		own := m.Window(units.Size(s.TCPRmem.Max))
		if ev.MaxWindow > 0 && own > ev.MaxWindow*3/2 {
			msg += fmt.Sprintf("; this host's tcp_rmem max allows a %s window, so if it was the receiver, the application fixed SO_RCVBUF (see net.core.rmem_max) or the receiver was another host: raise tcp_rmem max there", Bytes(own))
		} else {
			msg += "; raise tcp_rmem max on the receiver (the changes marked receiver)"
		}
		notes = append(notes, msg)
	case LimitSendBuffer:
		msg := fmt.Sprintf("%s diagnoses a send-buffer limit", src)
		if ev.MaxInFlight > 0 {
			msg += fmt.Sprintf(": at most %s was ever in flight while the window allowed more", Bytes(ev.MaxInFlight))
		}
		notes = append(notes, msg+"; raise tcp_wmem max on the sender (the changes marked sender), and check the application does not set a small SO_SNDBUF")
	case LimitCongestion:
		msg := fmt.Sprintf("%s diagnoses a congestion/loss limit: bigger buffers will not help while packets are lost", src)
		if ev.Loss > 0 {
			msg += fmt.Sprintf(" (%.2f%% lost; loss-based algorithms cap a stream near MSS/RTT × 1.22/√p = %s)", 100*ev.Loss,
				MBps(predict.Mathis(in.MSS, in.RTT, ev.Loss)))
		}
		if s.CC != "bbr" && contains(s.AvailableCC, "bbr") {
			msg += "; net.ipv4.tcp_congestion_control=bbr does not treat random loss as congestion"
		}
		notes = append(notes, msg)
	case LimitApplication:
		notes = append(notes, fmt.Sprintf("%s diagnoses an application limit: the sender often had nothing to send, so no sysctl will raise the rate", src))
	case LimitBandwidth:
		notes = append(notes, fmt.Sprintf("%s diagnoses a bandwidth limit: the path itself is full; buffers beyond the BDP only add queueing delay", src))
	}
	if ev.Detail != "" {
		notes = append(notes, src+": "+ev.Detail)
	}
	return notes
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// WriteText prints the plan for people.
func (p Plan) WriteText(w io.Writer) error {
	var b strings.Builder
	in := p.Input
	fmt.Fprintf(&b, "Target: %s over %s RTT", MBps(in.Rate), fmtRTT(in.RTT))
	if in.RateSource != "" {
		fmt.Fprintf(&b, " (%s)", in.RateSource)
	}
	if in.Streams > 1 {
		fmt.Fprintf(&b, " with %d streams (%s each)", in.Streams, MBps(p.PerStreamRate))
	}
	fmt.Fprintf(&b, "\nBandwidth-delay product: %s", Bytes(p.BDP))
	if in.Streams > 1 {
		fmt.Fprintf(&b, ", %s per stream", Bytes(p.PerStreamWindow))
	}
	fmt.Fprintf(&b, "\nWindow model: %s\n", p.Model)
	fmt.Fprintf(&b, "Now one stream reaches at most %s; with the changes below %s.\n", MBps(p.Current), MBps(p.After))
	if len(p.Changes) == 0 {
		b.WriteString("\nNo change needed.\n")
	} else {
		b.WriteString("\nChanges:\n")
		for _, c := range p.Changes {
			host := ""
			if c.HostOnly {
				host = ", host-wide"
			}
			fmt.Fprintf(&b, "  %s: %s -> %s  [%s%s]\n      %s\n", c.Key, c.From, c.To, c.Side, host, c.Reason)
		}
	}
	if len(p.Keep) > 0 {
		b.WriteString("\nAlready sufficient:\n")
		for _, k := range p.Keep {
			fmt.Fprintf(&b, "  %s\n", k)
		}
	}
	if len(p.Notes) > 0 {
		b.WriteString("\nNotes:\n")
		for _, n := range p.Notes {
			fmt.Fprintf(&b, "  %s\n", n)
		}
	}
	// The commands to apply the changes, per side; host-wide keys need a
	// command on the host when the plan is for a namespace.
	for _, side := range []string{"receiver", "sender", "both"} {
		var here, host []string
		for _, c := range p.Changes {
			if c.Side != side {
				continue
			}
			arg := fmt.Sprintf(" --set %s=%q", c.Key, c.To)
			if c.HostOnly && p.Netns != "" {
				host = append(host, arg)
			} else {
				here = append(here, arg)
			}
		}
		on := "on the " + side
		if side == "both" {
			on = "on both ends"
		}
		if len(here) > 0 {
			ns := ""
			if p.Netns != "" {
				ns = " --netns " + p.Netns
			}
			fmt.Fprintf(&b, "\nApply %s: wanlab tune apply%s%s\n", on, ns, strings.Join(here, ""))
		}
		if len(host) > 0 {
			fmt.Fprintf(&b, "Apply %s's host (host-wide keys): wanlab tune apply%s\n", side, strings.Join(host, ""))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
