package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wanlab/wanlab/tc/spec"

	"github.com/urfave/cli/v2"

	"github.com/wanlab/wanlab/proxy/control"
	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/units"
)

// proxyControlDir is where `proxy set` and `proxy stats` look for the one
// running proxy's socket when --control is not given (tests point it
// elsewhere).
var proxyControlDir = control.DefaultDir

func controlFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name: "control",
			// Set by wanlab shell for its command.
			EnvVars: []string{"WANLAB_CONTROL"},
			Usage: "control address of the running proxy: `unix:/path` or a loopback host:port " +
				"(default: $WANLAB_CONTROL, else the one socket in " + control.DefaultDir + ", unix:" + control.DefaultDir + "/A-B.sock)",
		},
		&cli.StringFlag{
			Name: "token-file",
			Usage: "the proxy's bearer token for a TCP --control (default: the token of the proxy in " +
				control.DefaultDir + " that listens there, " + control.DefaultDir + "/A-B.token)",
		},
	}
}

// controlClient dials --control, or the one proxy socket in proxyControlDir.
// Over TCP the address is looked up among the .control files the proxies in
// proxyControlDir wrote (a name such as localhost only matches the literal
// address a proxy wrote there), the client checks that the listener there
// is that proxy's before it sends the token (--token-file, or the token
// file beside the .control), and refuses a proxy that is no longer running.
func controlClient(cc *cli.Context) (*control.Client, error) {
	addr := cc.String("control")
	if addr == "" {
		var err error
		if addr, err = control.FindAddr(proxyControlDir); err != nil {
			return nil, err
		}
	}
	tokFile := cc.String("token-file")
	var c *control.Client
	switch {
	case control.IsTCP(addr):
		found, err := control.FindTCP(proxyControlDir, addr)
		switch {
		case err == nil:
			c = control.DialEndpoint(found.Endpoint)
			if tokFile == "" {
				tokFile = found.TokenFile
			}
		case errors.Is(err, control.ErrStale) || tokFile == "":
			return nil, err
		default:
			// An address with a token file and no .control here: the
			// listener must be root's or this user's.
			c = control.Dial(addr)
		}
	default:
		c = control.Dial(addr)
	}
	if tokFile == "" {
		return c, nil
	}
	tok, err := control.ReadToken(tokFile)
	if err != nil {
		return nil, err
	}
	return c.WithToken(tok), nil
}

// specFileArg replaces "@FILE" by the file's contents and every "trace
// FILE" stage's FILE by the trace's opportunities inline
// (spec.ResolveTraceFiles), read by the user who typed it, so that only
// spec text ever reaches a proxy (which reads no files for its callers).
func specFileArg(text string) (string, error) {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "@") {
		b, err := readInput(t[1:])
		if err != nil {
			return "", err
		}
		text = string(b)
	}
	return resolveTraces(text, "")
}

// proxySetCommand is `wanlab proxy set`, listed by the proxy command.
func proxySetCommand() *cli.Command {
	return &cli.Command{
		Name:      "set",
		Usage:     "replace a running proxy's impairment spec, without restarting it",
		ArgsUsage: "[IFACE=]SPEC",
		UsageText: "wanlab proxy set [--control ADDR] [IFACE=]SPEC\n\n" +
			"examples:\n" +
			"   wanlab proxy set 'eth1=delay 50ms loss 1% | tbf rate 100mbit burst 64kb limit 1mb'\n" +
			"   wanlab proxy set 'delay 20ms'          # both directions\n" +
			"   wanlab proxy set eth1=                 # no impairment leaving through eth1\n" +
			"   wanlab proxy set eth1=@tree.txt        # a whole class tree (htb), swapped atomically\n" +
			"   wanlab proxy set 'eth1=class 1:2 parent 1:1 htb rate 30mbit ceil 100mbit; leaf 1:3 delay 20ms'\n" +
			"                                          # change classes of the running tree\n" +
			"   wanlab proxy set --control unix:/run/wanlab/eth0-eth1.sock 'eth0=loss 5%'",
		Description: "IFACE names the egress interface, as with tc: the spec applies to packets\n" +
			"leaving through it. Without IFACE= the spec applies to both directions. The\n" +
			"new spec takes over atomically; packets already queued keep the timing of the\n" +
			"spec they entered under. A bad spec is rejected with the parser's message\n" +
			"(exit status 2) and the running spec is kept. On success the command prints\n" +
			"the canonical spec now in force for the directions it changed, as IFACE=SPEC.",
		Flags:  controlFlags(),
		Args:   true,
		Action: runProxySet,
	}
}

// splitIfaceSpec splits "[IFACE=]SPEC" (spec.SplitDirectional).
func splitIfaceSpec(arg string) (iface, text string, err error) {
	iface, text, err = spec.SplitDirectional(arg)
	return iface, strings.TrimSpace(text), err
}

func runProxySet(cc *cli.Context) error {
	if cc.NArg() == 0 {
		return usageError(errors.New("proxy set: want [IFACE=]SPEC (an empty SPEC removes the impairment)"))
	}
	// Accept the spec quoted or not: `proxy set eth1=delay 50ms` works too.
	iface, spec, err := splitIfaceSpec(strings.Join(cc.Args().Slice(), " "))
	if err != nil {
		return usageError(fmt.Errorf("proxy set: %w", err))
	}
	if spec, err = specFileArg(spec); err != nil {
		return usageError(fmt.Errorf("proxy set: %w", err))
	}
	c, err := controlClient(cc)
	if err != nil {
		return fmt.Errorf("proxy set: %w", err)
	}
	specs, warnings, err := c.SetSpecsWarnings(iface, spec)
	if err != nil {
		if control.BadSpec(err) {
			return usageError(fmt.Errorf("proxy set: %w", err))
		}
		return fmt.Errorf("proxy set: %w", err)
	}
	changed := []string{iface}
	if iface == "" {
		changed = changed[:0]
		for k := range specs {
			changed = append(changed, k)
		}
		sort.Strings(changed)
	}
	w := cc.App.Writer
	for _, name := range changed {
		if _, err := fmt.Fprintf(w, "%s=%s\n", name, specs[name]); err != nil {
			return err
		}
	}
	// Warnings go to stderr: stdout stays IFACE=SPEC lines for scripts.
	for _, line := range warnings {
		name, _, _ := strings.Cut(line, ": ")
		if slices.Contains(changed, name) {
			fmt.Fprintf(cc.App.ErrWriter, "warning: %s\n", line)
		}
	}
	return nil
}

// proxyStatsCommand is `wanlab proxy stats`, listed by the proxy command.
func proxyStatsCommand() *cli.Command {
	return &cli.Command{
		Name:  "stats",
		Usage: "show a running proxy's counters per direction",
		UsageText: "wanlab proxy stats [--control ADDR] [--json | --latency]\n\n" +
			"examples:\n" +
			"   wanlab proxy stats\n" +
			"   wanlab proxy stats --latency           # where the proxy's own microseconds go\n" +
			"   wanlab proxy stats --json | jq '.directions[] | {iface, drops: .engine.totals.drops}'\n" +
			"   watch -n1 wanlab proxy stats --control 127.0.0.1:9901",
		Description: "For each direction (named by its egress interface): the spec in force, packets\n" +
			"and bytes into and out of the impairment engine, drops by reason (loss, queue,\n" +
			"oversize), ECN marks, duplicates, corruptions, reorders, what is queued now,\n" +
			"the time packets spent in the engine (sojourn; percentiles are bucket bounds),\n" +
			"the same per stage, and the TUN device's malformed-packet and error counters.\n" +
			"--latency prints instead the latency the proxy itself adds beyond the spec, per\n" +
			"direction: from the departure the engine computed to the TUN write returning,\n" +
			"and its parts (read to engine, due to dequeued, dequeued to written), as p50,\n" +
			"p90, p99 (bucket upper bounds), max and mean.\n" +
			"--json prints the API's Stats object (GET /v1/stats): {\"directions\": [{\"iface\",\n" +
			"\"spec\", \"engine\": {\"totals\", \"classes\": [{\"stages\"}], \"swaps\"}, \"device\", \"schedule\",\n" +
			"\"latency\"}], \"tap\"}; \"latency\" holds \"bounds_ns\" and the histograms \"added\",\n" +
			"\"read_to_enqueue\", \"due_to_dequeue\" and \"dequeue_to_written\", each {\"packets\",\n" +
			"\"sum_ns\", \"max_ns\", \"p50_ns\", \"p90_ns\", \"p99_ns\", \"counts\"};\n" +
			"\"schedule\" (with proxy --schedule) holds the step in force and the next one: {\"file\",\n" +
			"\"step\", \"line\", \"spec\", \"since_ms\", \"next_step\", \"next_ms\", \"next_spec\", \"elapsed_ms\",\n" +
			"\"loop_ms\", \"cycle\", \"stopped\", \"applied\", \"error\"}.",
		Flags: append(controlFlags(),
			&cli.BoolFlag{Name: "json", Usage: "print the counters as JSON"},
			&cli.BoolFlag{Name: "latency", Usage: "print the latency the proxy itself adds, per direction, instead of the counters"},
		),
		Action: runProxyStats,
	}
}

func runProxyStats(cc *cli.Context) error {
	if cc.NArg() != 0 {
		return usageError(fmt.Errorf("proxy stats: unexpected argument %q", cc.Args().First()))
	}
	c, err := controlClient(cc)
	if err != nil {
		return fmt.Errorf("proxy stats: %w", err)
	}
	if cc.Bool("json") {
		raw, err := c.StatsJSON()
		if err != nil {
			return fmt.Errorf("proxy stats: %w", err)
		}
		if len(raw) == 0 || raw[len(raw)-1] != '\n' {
			raw = append(raw, '\n')
		}
		_, err = cc.App.Writer.Write(raw)
		return err
	}
	st, err := c.Stats()
	if err != nil {
		return fmt.Errorf("proxy stats: %w", err)
	}
	if cc.Bool("latency") {
		return writeProxyLatency(cc.App.Writer, st)
	}
	return writeProxyStats(cc.App.Writer, st)
}

// writeDirectionHeader starts direction i's part of proxy stats: a blank
// line between directions, then where it leaves and its spec.
func writeDirectionHeader(w io.Writer, i int, d control.Direction) {
	if i > 0 {
		fmt.Fprintln(w)
	}
	text := spec.Abbrev(d.Spec)
	if text == "" {
		text = "(no impairment)"
	}
	fmt.Fprintf(w, "leaving through %s: %s\n", d.Iface, text)
}

// writeProxyLatency prints, per direction, the distribution of the
// latency the proxy adds beyond the spec and of its parts.
func writeProxyLatency(out io.Writer, st control.Stats) error {
	bw := bufio.NewWriter(out)
	for i, d := range st.Directions {
		writeDirectionHeader(bw, i, d)
		l := d.Latency
		if l == nil {
			fmt.Fprintln(bw, "  (this proxy does not report its latency)")
			continue
		}
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "%-24s\tpackets\tp50\tp90\tp99\tmax\tmean\t\n", "proxy's own latency")
		for _, r := range []struct {
			label string
			h     control.LatencyHistogram
		}{
			{"added (due to written)", l.Added},
			{"read to engine", l.ReadToEnqueue},
			{"due to dequeued", l.DueToDequeue},
			{"dequeued to written", l.DequeueToWritten},
		} {
			h := r.h
			fmt.Fprintf(tw, "%-24s\t%d\t", r.label, h.Packets)
			if h.Packets == 0 {
				fmt.Fprint(tw, "-\t-\t-\t-\t-\t\n")
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", shortDuration(h.P50), shortDuration(h.P90), shortDuration(h.P99),
				shortDuration(h.Max), shortDuration(h.Sum/time.Duration(h.Packets)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprint(bw, "\npercentiles are bucket upper bounds (1us to 100ms, 10 buckets a decade); max and mean are exact.\n"+
		"added = written - departure per packet = (due to dequeued) + (dequeued to written): what the proxy adds\n"+
		"beyond the spec; read to engine runs inside the spec's delay (with none, due to dequeued holds it).\n")
	return bw.Flush()
}

// shortDuration rounds d to 3 significant digits ("12.3us", "1.25ms"),
// with "us" as the counters' table writes it (one byte a column cell,
// which tabwriter counts).
func shortDuration(d time.Duration) string {
	r := time.Duration(1)
	for r*1000 <= d {
		r *= 10
	}
	return strings.Replace(d.Round(r).String(), "µs", "us", 1)
}

// writeProxyStats prints a table per direction: one row per counter, one
// column for the direction's totals and one per stage (per class when the
// engine has several), so the table stays narrow whatever the spec.
func writeProxyStats(out io.Writer, st control.Stats) error {
	bw := bufio.NewWriter(out)
	for i, d := range st.Directions {
		writeDirectionHeader(bw, i, d)
		if d.Schedule != nil {
			fmt.Fprintf(bw, "  schedule %s: %s\n", d.Schedule.File, d.Schedule.Describe(spec.Abbrev))
		}
		names := []string{"total"}
		cols := []engine.Counters{d.Engine.Totals}
		for _, cl := range d.Engine.Classes {
			prefix := ""
			if len(d.Engine.Classes) > 1 {
				prefix = cl.Name + "/"
				names = append(names, cl.Name)
				cols = append(cols, cl.Totals)
			}
			for _, s := range cl.Stages {
				names = append(names, prefix+s.Kind)
				cols = append(cols, s.Counters)
			}
		}
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
		row := func(label string, cell func(c engine.Counters) string) {
			fmt.Fprintf(tw, "%-15s\t", label)
			for _, c := range cols {
				fmt.Fprintf(tw, "%s\t", cell(c))
			}
			fmt.Fprintln(tw)
		}
		num := func(f func(c engine.Counters) uint64) func(engine.Counters) string {
			return func(c engine.Counters) string { return fmt.Sprint(f(c)) }
		}
		size := func(f func(c engine.Counters) uint64) func(engine.Counters) string {
			return func(c engine.Counters) string { return units.Size(f(c)).Human() }
		}
		fmt.Fprintf(tw, "%-15s\t%s\t\n", "", strings.Join(names, "\t"))
		row("packets in", num(func(c engine.Counters) uint64 { return c.PacketsIn }))
		row("bytes in", size(func(c engine.Counters) uint64 { return c.BytesIn }))
		row("packets out", num(func(c engine.Counters) uint64 { return c.PacketsOut }))
		row("bytes out", size(func(c engine.Counters) uint64 { return c.BytesOut }))
		row("dropped: loss", num(func(c engine.Counters) uint64 { return c.Drops.Loss }))
		row("dropped: queue", num(func(c engine.Counters) uint64 { return c.Drops.Queue }))
		row("dropped: size", num(func(c engine.Counters) uint64 { return c.Drops.Oversize }))
		if slices.ContainsFunc(cols, func(c engine.Counters) bool { return c.Drops.AQM > 0 }) {
			// Only with a queue discipline that dropped by its law.
			row("dropped: aqm", num(func(c engine.Counters) uint64 { return c.Drops.AQM }))
		}
		row("ecn marked", num(func(c engine.Counters) uint64 { return c.ECNMarked }))
		row("duplicated", num(func(c engine.Counters) uint64 { return c.Duplicated }))
		row("corrupted", num(func(c engine.Counters) uint64 { return c.Corrupted }))
		row("reordered", num(func(c engine.Counters) uint64 { return c.Reordered }))
		row("queued packets", num(func(c engine.Counters) uint64 { return c.QueuePackets }))
		row("queued bytes", size(func(c engine.Counters) uint64 { return c.QueueBytes }))
		row("sojourn p50", func(c engine.Counters) string { return quantile(c.Sojourn, 0.5) })
		row("sojourn p99", func(c engine.Counters) string { return quantile(c.Sojourn, 0.99) })
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, cl := range d.Engine.Classes {
			for _, s := range cl.Stages {
				if x := s.XStats.String(); x != "" {
					prefix := ""
					if len(d.Engine.Classes) > 1 {
						prefix = cl.Name + "/"
					}
					fmt.Fprintf(bw, "  %s%s xstats: %s\n", prefix, s.Kind, x)
				}
			}
		}
		for _, c := range d.Engine.Scheduler {
			if x := c.XStats.String(); x != "" {
				fmt.Fprintf(bw, "  htb leaf %s xstats: %s\n", c.ID, x)
			}
		}
		if err := writeHTBStats(bw, d.Engine.Scheduler); err != nil {
			return err
		}
		fmt.Fprintf(bw, "  device: %d malformed, %d read errors, %d write errors; %d spec replacements\n",
			d.Device.Malformed, d.Device.ReadErrors, d.Device.WriteErrors, d.Engine.Swaps)
		fmt.Fprintf(bw, "  written: %d packets, %d of them 1 ms or more after their departure time\n",
			d.Device.Written, d.Device.Late1ms)
	}
	if st.LowLatency != "" {
		fmt.Fprintf(bw, "\nlow latency: %s\n", st.LowLatency)
	}
	if t := st.Tap; t != nil {
		fmt.Fprintf(bw, "\npcap tap: %d records, %s written, %d lost (writer behind), %d lost (size limit)\n",
			t.Records, units.Size(t.Bytes).Human(), t.RingFull, t.OverLimit)
	}
	return bw.Flush()
}

// quantile returns "≤ BOUND" for the histogram bucket holding quantile q:
// the engine keeps fixed buckets, so that bound is all one can say.
func quantile(h engine.Histogram, q float64) string {
	var total uint64
	for _, n := range h.Counts {
		total += n
	}
	if total == 0 {
		return "-"
	}
	rank := uint64(q*float64(total-1)) + 1
	var cum uint64
	for i, n := range h.Counts {
		cum += n
		if cum >= rank {
			if i == len(engine.SojournBoundsNs) {
				return "> " + units.FormatDuration(time.Duration(engine.SojournBoundsNs[i-1]))
			}
			return "≤ " + units.FormatDuration(time.Duration(engine.SojournBoundsNs[i]))
		}
	}
	return "-"
}

// writeHTBStats prints a direction's htb tree counters (the engine
// snapshot's Scheduler), one row per class: what it sent, borrowed and
// lent, and what waits in it.
func writeHTBStats(w io.Writer, stats []engine.TreeClass) error {
	if len(stats) == 0 {
		return nil
	}
	fmt.Fprintln(w, "  htb tree:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "    class\tparent\tsent\tborrowed\tlent\tqueued\tdropped\tmode\t")
	for _, s := range stats {
		parent := s.Parent
		if parent == "" {
			parent = "root"
		}
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t\n", s.ID, parent, units.Size(s.Bytes).Human(),
			units.Size(s.BorrowedBytes).Human(), units.Size(s.LentBytes).Human(), s.QueuePackets, s.DroppedQueue, s.Mode)
	}
	return tw.Flush()
}
