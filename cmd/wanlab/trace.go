package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/tc/trace"
	"github.com/wanlab/wanlab/tc/trace/traceplot"
	"github.com/wanlab/wanlab/units"
)

func init() {
	out := &cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "write the trace to `FILE` (default: standard output)"}
	force := &cli.BoolFlag{Name: "force", Usage: "replace an existing -o FILE (a new file renamed over it, never written through)"}
	dur := &cli.StringFlag{Name: "duration", Value: "10s", Usage: "length of the trace (its period) in whole milliseconds, e.g. 10s"}
	register(&cli.Command{
		Name:  "trace",
		Usage: "generate, summarise and plot link capacity traces (mahimahi mm-link format)",
		UsageText: "wanlab trace constant --rate RATE [--duration D] [-o FILE]\n" +
			"wanlab trace steps --step DURATION:RATE... [-o FILE]\n" +
			"wanlab trace onoff --rate RATE --on D --off D [--duration D] [-o FILE]\n" +
			"wanlab trace cellular [--min RATE] [--max RATE] [--levels N] [--hold D] [--outage P] [--outage-len D] [--duration D] [--seed N] [-o FILE]\n" +
			"wanlab trace stats [--json] FILE\n" +
			"wanlab trace plot [--bin D] -o PNG FILE\n\n" +
			"examples:\n" +
			"   wanlab trace constant --rate 12mbit --duration 10s -o const.trace\n" +
			"   wanlab trace steps --step 5s:24mbit --step 5s:3mbit -o steps.trace\n" +
			"   wanlab trace cellular --seed 7 --duration 60s -o lte.down\n" +
			"   wanlab trace stats lte.down\n" +
			"   wanlab trace plot -o lte.png lte.down\n" +
			"   sudo wanlab proxy --iface A --iface B --impair 'B=delay 20ms | trace lte.down' --impair 'A=delay 20ms | trace lte.up'",
		Description: "A trace lists delivery opportunities, one integer millisecond per line, each carrying\n" +
			"1500 bytes (mahimahi's mm-link format; a millisecond repeated gives several). The\n" +
			"generators write synthetic traces: constant spreads round(rate x duration / 1500 B)\n" +
			"opportunities evenly so the last falls on the duration; steps chains constant stretches;\n" +
			"onoff alternates the rate and nothing, starting on; cellular is a Markov-modulated\n" +
			"link: --levels rates spaced geometrically from --min to --max, an exponential holding\n" +
			"time of mean --hold in each, then one level up or down with equal probability\n" +
			"(reflecting at the ends) or, with probability --outage, an outage of exponential mean\n" +
			"--outage-len; within a level opportunities arrive as a Poisson process. The same --seed\n" +
			"gives the same trace. A trace whose end is idle gets one opportunity at the end, as the\n" +
			"last line is the period. stats prints the period, mean, min/max capacity per second and\n" +
			"the share of idle milliseconds; plot draws the capacity per --bin as a PNG.",
		Subcommands: []*cli.Command{
			{
				Name:      "constant",
				Usage:     "a constant-rate trace",
				UsageText: "wanlab trace constant --rate 12mbit --duration 10s [-o FILE]",
				Flags:     []cli.Flag{&cli.StringFlag{Name: "rate", Required: true, Usage: "link `RATE` (tc syntax: 12mbit)"}, dur, out, force},
				Action: func(cc *cli.Context) error {
					r, d, err := rateAndDuration(cc)
					if err != nil {
						return err
					}
					return emitTrace(cc, func() (*trace.Trace, error) { return trace.Constant(r, d) })
				},
			},
			{
				Name:      "steps",
				Usage:     "a trace of constant-rate stretches",
				UsageText: "wanlab trace steps --step 5s:24mbit --step 5s:3mbit [-o FILE]",
				Flags:     []cli.Flag{&cli.StringSliceFlag{Name: "step", Required: true, Usage: "`DURATION:RATE`, repeatable, in order (a rate of 0 is an outage)"}, out, force},
				Action: func(cc *cli.Context) error {
					var segs []trace.Segment
					for _, s := range cc.StringSlice("step") {
						dt, rt, ok := strings.Cut(s, ":")
						if !ok {
							return usageError(fmt.Errorf("trace steps: --step %q: want DURATION:RATE", s))
						}
						d, err := units.ParseTime(dt, time.Second)
						if err != nil {
							return usageError(fmt.Errorf("trace steps: --step %q: %w", s, err))
						}
						r := units.Rate(0)
						if rt != "0" {
							if r, err = units.ParseRate(rt); err != nil {
								return usageError(fmt.Errorf("trace steps: --step %q: %w", s, err))
							}
						}
						segs = append(segs, trace.Segment{Rate: r, Duration: d})
					}
					return emitTrace(cc, func() (*trace.Trace, error) { return trace.Steps(segs) })
				},
			},
			{
				Name:      "onoff",
				Usage:     "a trace alternating a rate and nothing",
				UsageText: "wanlab trace onoff --rate 12mbit --on 2s --off 500ms --duration 10s [-o FILE]",
				Flags: []cli.Flag{&cli.StringFlag{Name: "rate", Required: true, Usage: "`RATE` while on"},
					&cli.StringFlag{Name: "on", Required: true, Usage: "on `DURATION`"},
					&cli.StringFlag{Name: "off", Required: true, Usage: "off `DURATION`"}, dur, out, force},
				Action: func(cc *cli.Context) error {
					r, d, err := rateAndDuration(cc)
					if err != nil {
						return err
					}
					on, err1 := units.ParseTime(cc.String("on"), time.Second)
					off, err2 := units.ParseTime(cc.String("off"), time.Second)
					if err := errors.Join(err1, err2); err != nil {
						return usageError(fmt.Errorf("trace onoff: %w", err))
					}
					return emitTrace(cc, func() (*trace.Trace, error) { return trace.OnOff(r, on, off, d) })
				},
			},
			{
				Name:      "cellular",
				Usage:     "a cellular-like Markov-modulated trace",
				UsageText: "wanlab trace cellular [--min 1mbit] [--max 24mbit] [--levels 8] [--hold 500ms] [--outage 2%] [--outage-len 300ms] [--duration 30s] [--seed 1] [-o FILE]",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "min", Value: trace.DefaultMarkov.Min.String(), Usage: "lowest level's `RATE`"},
					&cli.StringFlag{Name: "max", Value: trace.DefaultMarkov.Max.String(), Usage: "highest level's `RATE`"},
					&cli.IntFlag{Name: "levels", Value: trace.DefaultMarkov.Levels, Usage: "number of rate levels"},
					&cli.StringFlag{Name: "hold", Value: units.FormatDuration(trace.DefaultMarkov.Hold), Usage: "mean holding `TIME` in a level"},
					&cli.StringFlag{Name: "outage", Value: "2%", Usage: "`PERCENT` chance of an outage at each transition"},
					&cli.StringFlag{Name: "outage-len", Value: units.FormatDuration(trace.DefaultMarkov.OutageLen), Usage: "mean outage `TIME`"},
					&cli.StringFlag{Name: "duration", Value: "30s", Usage: "length of the trace"},
					&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "random seed"},
					out, force,
				},
				Action: func(cc *cli.Context) error {
					m := trace.Markov{Levels: cc.Int("levels"), Seed: cc.Uint64("seed")}
					var errs []error
					var err error
					if m.Min, err = units.ParseRate(cc.String("min")); err != nil {
						errs = append(errs, fmt.Errorf("--min: %w", err))
					}
					if m.Max, err = units.ParseRate(cc.String("max")); err != nil {
						errs = append(errs, fmt.Errorf("--max: %w", err))
					}
					if m.Hold, err = units.ParseTime(cc.String("hold"), time.Second); err != nil {
						errs = append(errs, fmt.Errorf("--hold: %w", err))
					}
					if m.OutageLen, err = units.ParseTime(cc.String("outage-len"), time.Second); err != nil {
						errs = append(errs, fmt.Errorf("--outage-len: %w", err))
					}
					if m.Duration, err = units.ParseTime(cc.String("duration"), time.Second); err != nil {
						errs = append(errs, fmt.Errorf("--duration: %w", err))
					}
					p, err := units.ParsePercent(cc.String("outage"))
					if err != nil {
						errs = append(errs, fmt.Errorf("--outage: %w", err))
					}
					m.Outage = p.Prob()
					if len(errs) > 0 {
						return usageError(fmt.Errorf("trace cellular: %w", errs[0]))
					}
					return emitTrace(cc, func() (*trace.Trace, error) { return trace.Cellular(m) })
				},
			},
			{
				Name:      "stats",
				Usage:     "summarise a trace: period, mean, min/max capacity per second, idle share",
				UsageText: "wanlab trace stats [--json] FILE",
				Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print one JSON object (period_ms, opportunities, bytes, mean_bps, min_bps, max_bps, per_second_bps, idle_share)"}},
				Args:      true,
				Action:    runTraceStats,
			},
			{
				Name:      "plot",
				Usage:     "draw a trace's capacity over time as a PNG",
				UsageText: "wanlab trace plot [--bin 100ms] -o lte.png lte.down",
				Flags: []cli.Flag{&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, Usage: "PNG `FILE` to write"},
					&cli.DurationFlag{Name: "bin", Value: 100 * time.Millisecond, Usage: "capacity is summed over windows of this width"}, force},
				Args:   true,
				Action: runTracePlot,
			},
		},
	})
}

func rateAndDuration(cc *cli.Context) (units.Rate, time.Duration, error) {
	name := "trace " + cc.Command.Name
	r, err := units.ParseRate(cc.String("rate"))
	if err != nil {
		return 0, 0, usageError(fmt.Errorf("%s: --rate: %w", name, err))
	}
	d, err := units.ParseTime(cc.String("duration"), time.Second)
	if err != nil {
		return 0, 0, usageError(fmt.Errorf("%s: --duration: %w", name, err))
	}
	return r, d, nil
}

// emitTrace generates a trace and writes it to --out or stdout.
func emitTrace(cc *cli.Context, gen func() (*trace.Trace, error)) error {
	name := "trace " + cc.Command.Name
	if cc.NArg() != 0 {
		return usageError(fmt.Errorf("%s: unexpected argument %q", name, cc.Args().First()))
	}
	t, err := gen()
	if err != nil {
		return usageError(fmt.Errorf("%s: %w", name, err))
	}
	path := cc.String("out")
	if path == "" || path == "-" {
		return t.Write(cc.App.Writer)
	}
	f, err := hostfile.CreateOutput(path, 0o644, cc.Bool("force"))
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := t.Write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %s: %w", name, path, err)
	}
	return f.Close()
}

// readTraceArg reads the one FILE argument.
func readTraceArg(cc *cli.Context) (*trace.Trace, string, error) {
	name := "trace " + cc.Command.Name
	if cc.NArg() != 1 {
		return nil, "", usageError(fmt.Errorf("%s: want one trace FILE", name))
	}
	path := cc.Args().First()
	f, err := hostfile.OpenInput(path, hostfile.MaxTrace)
	if errors.Is(err, os.ErrNotExist) { // a FILE the user named: bad input, exit 2
		return nil, "", usageError(fmt.Errorf("%s: %w", name, err))
	}
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	defer f.Close()
	t, err := trace.Read(bufio.NewReader(io.LimitReader(f, int64(hostfile.MaxTrace))), path)
	if err != nil {
		return nil, "", usageError(fmt.Errorf("%s: %w", name, err))
	}
	return t, path, nil
}

func runTraceStats(cc *cli.Context) error {
	t, path, err := readTraceArg(cc)
	if err != nil {
		return err
	}
	st := trace.Summarize(t)
	return jsonOrText(cc, st, func(w io.Writer) error { return writeTraceStats(w, path, st) })
}

func writeTraceStats(w io.Writer, path string, st trace.Stats) error {
	_, err := fmt.Fprintf(w, "%s: %d opportunities over %s (%s per period)\n"+
		"  mean %s, per second min %s max %s, idle %.1f%% of milliseconds\n",
		path, st.Opportunities, time.Duration(st.PeriodMs)*time.Millisecond, units.Size(st.Bytes).Human(),
		units.Rate(st.MeanBps).Human(), units.Rate(st.MinBps).Human(), units.Rate(st.MaxBps).Human(), st.IdleShare*100)
	return err
}

func runTracePlot(cc *cli.Context) error {
	t, path, err := readTraceArg(cc)
	if err != nil {
		return err
	}
	out := cc.String("out")
	f, err := hostfile.CreateOutput(out, 0o644, cc.Bool("force"))
	if err != nil {
		return fmt.Errorf("trace plot: %w", err)
	}
	if err := traceplot.PNG(f, t, filepath.Base(path), cc.Duration("bin")); err != nil {
		f.Close()
		return fmt.Errorf("trace plot: %w", err)
	}
	return f.Close()
}
