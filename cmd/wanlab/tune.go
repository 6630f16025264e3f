package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wanlab/wanlab/analyzer/pcapfile"
	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/tuner"
	"github.com/wanlab/wanlab/tuner/capture"
	"github.com/wanlab/wanlab/units"
)

func init() {
	netnsFlag := &cli.StringFlag{Name: "netns", Usage: "work inside the named network namespace `NS` (ip netns) instead of the host"}
	jsonFlag := &cli.BoolFlag{Name: "json", Usage: "print JSON instead of text"}
	rttFlag := &cli.StringFlag{Name: "rtt", Usage: "round-trip time of the path, e.g. `35ms` (a bare number is milliseconds)"}
	rateFlag := &cli.StringFlag{Name: "rate", Usage: "target throughput as tc writes rates, e.g. `100MBps` (bytes) or 800mbit (bits)"}
	streamsFlag := &cli.IntFlag{Name: "streams", Value: 1, Usage: "parallel TCP connections sharing the target rate"}
	dryRunFlag := &cli.BoolFlag{Name: "dry-run", Usage: "print what would change and write nothing"}
	ratioFlag := &cli.StringFlag{Name: "window-ratio", Usage: "the receive window's share of the buffer on your path, `R` in (0, 1]: what the kernel learned " +
		"from the segments' payload/truesize (TCP_INFO rcv_ssthresh / SO_RCVBUF after a transfer; wanlab experiment prints it). Default: the kernel's initial rule"}

	register(&cli.Command{
		Name:  "tune",
		Usage: "show, plan, apply and revert the sysctls that bound TCP throughput",
		Description: "The receive window a TCP connection can offer, and the data a sender can keep in\n" +
			"flight, are bounded by socket buffer sysctls (net.ipv4.tcp_rmem/tcp_wmem, net.core.rmem_max/\n" +
			"wmem_max...). At most one window is delivered per round trip, so a buffer limit is a\n" +
			"throughput ceiling that falls as the RTT grows. `tune show --rtt` prints each ceiling,\n" +
			"`tune plan` the settings that reach a target rate with the reason for each, `tune apply`\n" +
			"writes them (after validating all of them and saving the previous values) and `tune revert`\n" +
			"restores exactly what was there. With --netns everything happens inside that network\n" +
			"namespace (tcp_rmem/tcp_wmem are per namespace; net.core.* limits are host-wide).",
		Subcommands: []*cli.Command{
			{
				Name:  "show",
				Usage: "print the settings and, with --rtt, the throughput ceiling each buffer limit implies",
				UsageText: "wanlab tune show [--netns NS] [--rtt RTT] [--json]\n\n" +
					"examples:\n" +
					"   wanlab tune show\n" +
					"   wanlab tune show --rtt 35ms\n" +
					"   wanlab tune show --netns client --rtt 100ms --json",
				Description: "Prints net.ipv4.tcp_rmem, tcp_wmem, tcp_mem, net.core.rmem_max, wmem_max, rmem_default,\n" +
					"wmem_default, tcp_moderate_rcvbuf, tcp_window_scaling, tcp_adv_win_scale, the congestion\n" +
					"control and the available ones, net.core.default_qdisc, tcp_notsent_lowat,\n" +
					"tcp_slow_start_after_idle, tcp_mtu_probing and netdev_max_backlog, with what each means.\n" +
					"With --rtt it adds, for one connection, the largest receive window and the most data\n" +
					"in flight each buffer limit allows and the rate that gives at that RTT, using the\n" +
					"running kernel's buffer-to-window rule (tcp_adv_win_scale before Linux 6.6, the\n" +
					"learned payload/truesize ratio, about 50 %, since).",
				Flags:  []cli.Flag{netnsFlag, rttFlag, ratioFlag, jsonFlag},
				Action: runTuneShow,
			},
			{
				Name:  "plan",
				Usage: "compute the bandwidth-delay product and the settings that reach a target rate",
				UsageText: "wanlab tune plan --rtt RTT --rate RATE [--streams N] [--netns NS] [--json]\n" +
					"wanlab tune plan --from-capture FILE [--rate RATE] [--rtt RTT] [--streams N] [--json]\n\n" +
					"examples:\n" +
					"   wanlab tune plan --rtt 35ms --rate 100MBps\n" +
					"   wanlab tune plan --rtt 200ms --rate 1gbit --streams 4 --json\n" +
					"   wanlab tune plan --from-capture slow-download.pcap",
				Description: "Compares the current settings (of this host or --netns) with what a target needs:\n" +
					"each stream must keep rate/streams × RTT bytes in flight, which needs a receive buffer\n" +
					"of that window divided by the kernel's window share on the receiver and a send buffer\n" +
					"of the window plus one skb on the sender. Each proposed change names the side it\n" +
					"belongs to (receiver, sender) and why; keys that are already sufficient are listed too.\n" +
					"--from-capture analyzes a capture (as `wanlab analyze` does) and takes the RTT, the\n" +
					"windows and the diagnosis of its largest transfer from it; without --rate it targets\n" +
					"the rate the diagnosis predicts once the limit is lifted.",
				Flags: []cli.Flag{rttFlag, rateFlag, streamsFlag, ratioFlag, netnsFlag, jsonFlag,
					&cli.StringFlag{Name: "from-capture", Usage: "plan from the largest transfer in the pcap/pcapng `FILE`"}},
				Action: runTunePlan,
			},
			{
				Name:  "apply",
				Usage: "write settings (from a plan or --set), saving the previous values first",
				UsageText: "wanlab tune apply (--rtt RTT --rate RATE [--streams N] | --set KEY=VALUE ...) [--netns NS] [--dry-run] [--json]\n\n" +
					"examples:\n" +
					"   wanlab tune apply --rtt 35ms --rate 100MBps --dry-run\n" +
					"   wanlab tune apply --set net.ipv4.tcp_rmem=\"4096 131072 16777216\"\n" +
					"   wanlab tune apply --netns client --set net.ipv4.tcp_wmem=\"4096 4096 4096\"",
				Description: "Validates every value before writing anything (known keys only; min <= default <= max;\n" +
					"the kernel's own ranges; congestion control among the available ones; host-wide\n" +
					"net.core.* and tcp_mem refused with --netns, where Linux does not let a namespace\n" +
					"change them). Then records the values found in a backup file (/var/lib/wanlab for\n" +
					"the host, /run/wanlab for a namespace) before the first write, and writes the set in\n" +
					"order; if one write fails, the keys already written get their old values back.\n" +
					"Applying again keeps the oldest original in the backup. Needs root.",
				Flags: []cli.Flag{rttFlag, rateFlag, streamsFlag, ratioFlag, netnsFlag, dryRunFlag, jsonFlag,
					&cli.StringSliceFlag{Name: "set", Usage: "write `KEY=VALUE` (repeatable), e.g. net.ipv4.tcp_rmem=\"4096 131072 16777216\""}},
				Action: runTuneApply,
			},
			{
				Name:  "revert",
				Usage: "restore the values saved by the first apply, byte for byte",
				UsageText: "wanlab tune revert [--netns NS] [--dry-run] [--json]\n\n" +
					"examples:\n" +
					"   wanlab tune revert\n" +
					"   wanlab tune revert --netns client",
				Description: "Writes back every value in the backup file, checks that each reads back exactly as\n" +
					"it was, and removes the backup. If a write fails the backup stays, so revert can be\n" +
					"run again. Needs root.",
				Flags:  []cli.Flag{netnsFlag, dryRunFlag, jsonFlag},
				Action: runTuneRevert,
			},
		},
	})
}

// tuneNetns checks --netns and returns a function that runs code there.
func tuneNetns(cc *cli.Context) (string, func(func() error) error, error) {
	ns := cc.String("netns")
	if ns == "" {
		return "", func(fn func() error) error { return fn() }, nil
	}
	if !nsrun.Exists(ns) {
		return "", nil, usageError(fmt.Errorf("--netns %s: no such network namespace (see ip netns list)", ns))
	}
	return ns, func(fn func() error) error { return nsrun.DoNamed(ns, fn) }, nil
}

func tuneSnapshot(ns string, enter func(func() error) error) (*tuner.Snapshot, error) {
	var s *tuner.Snapshot
	err := enter(func() error {
		var err error
		s, err = tuner.ReadSnapshot(tuner.Host, ns)
		return err
	})
	return s, err
}

func parseRTT(cc *cli.Context) (time.Duration, error) {
	if !cc.IsSet("rtt") {
		return 0, nil
	}
	d, err := units.ParseTime(cc.String("rtt"), time.Millisecond)
	if err != nil {
		return 0, usageError(fmt.Errorf("--rtt: %w", err))
	}
	if d <= 0 {
		return 0, usageError(fmt.Errorf("--rtt %s: must be positive", cc.String("rtt")))
	}
	return d, nil
}

// tuneModel is the running kernel's window model, with the payload ratio
// of --window-ratio when given.
func tuneModel(cc *cli.Context, s *tuner.Snapshot) (tuner.WindowModel, error) {
	m := tuner.ModelFor(s)
	if !cc.IsSet("window-ratio") {
		return m, nil
	}
	text := cc.String("window-ratio")
	r, err := strconv.ParseFloat(strings.TrimSuffix(text, "%"), 64)
	if err == nil && strings.HasSuffix(text, "%") {
		r /= 100
	}
	if err != nil || !(r > 0 && r <= 1) {
		return m, usageError(fmt.Errorf("--window-ratio %q: want a share in (0, 1], e.g. 0.66 or 66%%", text))
	}
	m.PayloadRatio = r
	return m, nil
}

func parseRate(cc *cli.Context) (units.Rate, error) {
	if !cc.IsSet("rate") {
		return 0, nil
	}
	r, err := units.ParseRate(cc.String("rate"))
	if err != nil {
		return 0, usageError(fmt.Errorf("--rate: %w", err))
	}
	if r == 0 {
		return 0, usageError(fmt.Errorf("--rate %s: must be positive", cc.String("rate")))
	}
	return r, nil
}

// writeJSON prints v as every --json prints: indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// jsonOrText prints v with writeJSON under --json, else as text writes it.
func jsonOrText(cc *cli.Context, v any, text func(io.Writer) error) error {
	if cc.Bool("json") {
		return writeJSON(cc.App.Writer, v)
	}
	return text(cc.App.Writer)
}

func runTuneShow(cc *cli.Context) error {
	ns, enter, err := tuneNetns(cc)
	if err != nil {
		return err
	}
	rtt, err := parseRTT(cc)
	if err != nil {
		return err
	}
	s, err := tuneSnapshot(ns, enter)
	if err != nil {
		return fmt.Errorf("tune show: %w", err)
	}
	m, err := tuneModel(cc, s)
	if err != nil {
		return err
	}
	r := tuner.NewReport(s, m, rtt)
	return jsonOrText(cc, r, r.WriteText)
}

// tunePlan builds the plan the flags ask for.
func tunePlan(cc *cli.Context, ns string, enter func(func() error) error) (tuner.Plan, error) {
	rtt, err := parseRTT(cc)
	if err != nil {
		return tuner.Plan{}, err
	}
	rate, err := parseRate(cc)
	if err != nil {
		return tuner.Plan{}, err
	}
	in := tuner.PlanInput{RTT: rtt, Rate: rate, Streams: cc.Int("streams")}
	if path := cc.String("from-capture"); path != "" {
		ev, err := capture.Evidence(path)
		if err != nil {
			if errors.Is(err, pcapfile.ErrFormat) || errors.Is(err, os.ErrNotExist) || errors.Is(err, capture.ErrNoTransfer) {
				return tuner.Plan{}, usageError(fmt.Errorf("--from-capture: %w", err))
			}
			return tuner.Plan{}, fmt.Errorf("--from-capture: %w", err)
		}
		in.Evidence = ev
		if in.RTT == 0 {
			in.RTT = ev.RTT
		}
		if in.Rate == 0 && ev.Predicted > 0 {
			in.Rate = ev.Predicted
			in.RateSource = "what the capture's diagnosis predicts once its limit is lifted; --rate sets another"
		}
		if in.RTT == 0 {
			return tuner.Plan{}, usageError(fmt.Errorf("--from-capture %s: no RTT measured in the capture; give --rtt", path))
		}
		if in.Rate == 0 {
			return tuner.Plan{}, usageError(fmt.Errorf("--from-capture %s: the diagnosis (%s) predicts no target rate; give --rate", path, ev.Limit))
		}
		in.MSS = ev.MSS
	} else if in.RTT == 0 || in.Rate == 0 {
		return tuner.Plan{}, usageError(errors.New("give --rtt and --rate (or --from-capture FILE)"))
	}
	s, err := tuneSnapshot(ns, enter)
	if err != nil {
		return tuner.Plan{}, err
	}
	m, err := tuneModel(cc, s)
	if err != nil {
		return tuner.Plan{}, err
	}
	p, err := tuner.MakePlan(s, m, in)
	if err != nil {
		return tuner.Plan{}, usageError(err)
	}
	return p, nil
}

func runTunePlan(cc *cli.Context) error {
	ns, enter, err := tuneNetns(cc)
	if err != nil {
		return err
	}
	p, err := tunePlan(cc, ns, enter)
	if err != nil {
		return fmt.Errorf("tune plan: %w", err)
	}
	return jsonOrText(cc, p, p.WriteText)
}

func runTuneApply(cc *cli.Context) error {
	ns, enter, err := tuneNetns(cc)
	if err != nil {
		return err
	}
	sets := cc.StringSlice("set")
	fromPlan := cc.IsSet("rtt") || cc.IsSet("rate")
	if fromPlan == (len(sets) > 0) {
		return usageError(errors.New("tune apply: give either --rtt and --rate, or --set KEY=VALUE (not both)"))
	}
	var set []tuner.Assignment
	var skipped []tuner.Change
	var plan *tuner.Plan
	if fromPlan {
		p, err := tunePlan(cc, ns, enter)
		if err != nil {
			return fmt.Errorf("tune apply: %w", err)
		}
		plan = &p
		set = p.Assignments(ns == "")
		for _, c := range p.Changes {
			if c.HostOnly && ns != "" {
				skipped = append(skipped, c)
			}
		}
	} else {
		for _, s := range sets {
			a, err := tuner.ParseAssignment(s)
			if err != nil {
				return usageError(fmt.Errorf("tune apply: %w", err))
			}
			set = append(set, a)
		}
	}
	w := cc.App.Writer
	if len(set) == 0 {
		if cc.Bool("json") {
			return writeJSON(w, struct {
				Plan    *tuner.Plan    `json:"plan"`
				Skipped []tuner.Change `json:"skipped_host_wide"`
			}{plan, skipped})
		}
		fmt.Fprintln(w, "Nothing to change: the current settings already reach the target.")
		printSkipped(w, ns, skipped)
		return nil
	}
	tu := &tuner.Tuner{FS: tuner.Host, Netns: ns, Enter: enter}
	res, err := tu.Apply(set, cc.Bool("dry-run"))
	if err != nil {
		if errors.Is(err, tuner.ErrInvalid) {
			return usageError(fmt.Errorf("tune apply: %w", err))
		}
		return fmt.Errorf("tune apply: %w", err)
	}
	if cc.Bool("json") {
		return writeJSON(w, struct {
			tuner.Result
			Plan    *tuner.Plan    `json:"plan,omitempty"`
			Skipped []tuner.Change `json:"skipped_host_wide,omitempty"`
		}{res, plan, skipped})
	}
	if err := res.WriteText(w, "apply"); err != nil {
		return err
	}
	printSkipped(w, ns, skipped)
	return nil
}

func printSkipped(w io.Writer, ns string, skipped []tuner.Change) {
	for _, c := range skipped {
		fmt.Fprintf(w, "Not applied in netns %s (host-wide; run on the host): wanlab tune apply --set %s=%q\n      %s\n", ns, c.Key, c.To, c.Reason)
	}
}

func runTuneRevert(cc *cli.Context) error {
	ns, enter, err := tuneNetns(cc)
	if err != nil {
		return err
	}
	tu := &tuner.Tuner{FS: tuner.Host, Netns: ns, Enter: enter}
	res, err := tu.Revert(cc.Bool("dry-run"))
	if err != nil {
		if errors.Is(err, tuner.ErrNoBackup) {
			return usageError(fmt.Errorf("tune revert: nothing to revert: %w", err))
		}
		return fmt.Errorf("tune revert: %w", err)
	}
	if cc.Bool("json") {
		return writeJSON(cc.App.Writer, res)
	}
	return res.WriteText(cc.App.Writer, "revert")
}
