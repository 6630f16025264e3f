package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/schedule"
	"github.com/wanlab/wanlab/tc/spec"
)

func init() {
	register(&cli.Command{
		Name:  "simulate",
		Usage: "run synthetic traffic through an impairment spec on a virtual clock",
		UsageText: "wanlab simulate --spec SPEC [--packets N] [--pps N] [--size BYTES] [--seed N] [--json]\n\n" +
			"examples:\n" +
			"   wanlab simulate --spec 'delay 100ms | tbf rate 50mbit burst 50kb limit 500kb'\n" +
			"   wanlab simulate --spec 'delay 50ms 10ms distribution normal loss 1%' --pps 1000\n" +
			"   wanlab simulate --spec 'loss gemodel 1% 10%' --packets 1000000 --json\n" +
			"   wanlab simulate --spec 'trace lte.down' --pps 2000 --packets 60000\n" +
			"   wanlab simulate --schedule spike.sched --pps 1000 --packets 40000\n" +
			"   wanlab simulate --classes @tree.txt --flow dst=10.0.2.1,rate=60mbit --flow dst=10.0.3.1,rate=60mbit",
		Description: "Pushes --packets IPv4/UDP packets of --size bytes (IP length, ECN-capable),\n" +
			"evenly spaced at --pps, through the same engine `wanlab proxy` uses, on a\n" +
			"virtual clock: no root, no network, and the same --seed gives the same result.\n" +
			"It prints what the spec promises beside what the packets got: loss (by reason),\n" +
			"delay mean/stddev/p50/p99, output rate, duplicates, corruption, reordering and\n" +
			"ECN marks, then each stage's own counts (which queue dropped what), so a spec\n" +
			"can be checked before it touches a network.\n\n" +
			"SPEC is tc syntax: netem and tbf stages joined by '|' (see tc-netem(8),\n" +
			"tc-tbf(8)); 'netem' may be omitted for the first stage. A queue discipline\n" +
			"(pfifo, bfifo, codel, fq_codel, pie, red; tc-codel(8) ...) may end the spec:\n" +
			"after tbf it is tbf's child qdisc ('tbf rate 10mbit burst 10kb limit 1mb |\n" +
			"fq_codel'), and its stage line shows its drops (aqm: by its control law) and\n" +
			"sojourn p50/p99 (upper bounds of the histogram's buckets).\n" +
			"--json prints one object (fields spec, packets_in, packets_out, loss_percent,\n" +
			"delay_ms{mean,stddev,p50,p99}, rate_bps, drops{loss,queue,oversize,aqm},\n" +
			"duplicated, corrupted, reordered, ecn_marked, configured{...}, stages[...], schedule[...])." +
			scheduleHelp + classesHelp,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "spec", Usage: "impairment `SPEC` in tc netem/tbf/qdisc syntax (required; '' is no impairment)"},
			&cli.IntFlag{Name: "packets", Value: engine.DefaultSimPackets, Usage: "number of packets to send"},
			&cli.Float64Flag{Name: "pps", Value: engine.DefaultSimPPS, Usage: "packets per second offered"},
			&cli.IntFlag{Name: "size", Value: engine.DefaultSimSize, Usage: "packet size in bytes (IP length, 28-65535)"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the stages' random generators"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object instead of the table"},
			&cli.StringFlag{Name: "schedule", Usage: "step the spec over time as schedule `FILE` says, on the virtual clock from the first packet (--spec holds before its first step)"},
			queueMemoryFlag(),
		}, classSimFlags...),
		Action: runSimulate,
	})
}

func runSimulate(cc *cli.Context) error {
	if cc.NArg() != 0 {
		return usageError(fmt.Errorf("simulate: unexpected argument %q (quote the spec and pass it with --spec)", cc.Args().First()))
	}
	if cc.IsSet("classes") {
		return runSimulateClasses(cc)
	}
	if !cc.IsSet("spec") && !cc.IsSet("schedule") {
		return usageError(errors.New("simulate: --spec is required (e.g. --spec 'delay 100ms loss 1%')"))
	}
	var sched *schedule.Schedule
	if path := cc.String("schedule"); path != "" {
		var err error
		if sched, err = readSchedule(path); err != nil {
			return usageError(fmt.Errorf("simulate: --schedule: %w", err))
		}
	}
	text, err := specFileArg(cc.String("spec"))
	if err != nil {
		return usageError(fmt.Errorf("simulate: --spec: %w", err))
	}
	sp, err := spec.Parse(text)
	if err != nil {
		return usageError(fmt.Errorf("simulate: --spec: %w", err))
	}
	cfg := engine.SimConfig{
		Spec:     sp,
		Schedule: sched,
		Packets:  cc.Int("packets"),
		PPS:      cc.Float64("pps"),
		Size:     cc.Int("size"),
		Seed:     cc.Uint64("seed"),
	}
	if cfg.QueueMemory, err = queueMemory(cc); err != nil {
		return usageError(fmt.Errorf("simulate: %w", err))
	}
	switch {
	case cfg.Packets <= 0:
		return usageError(fmt.Errorf("simulate: --packets %d: must be at least 1", cfg.Packets))
	case cfg.PPS <= 0:
		return usageError(fmt.Errorf("simulate: --pps %g: must be more than 0", cfg.PPS))
	case cfg.Size < 28 || cfg.Size > 65535:
		return usageError(fmt.Errorf("simulate: --size %d: must be 28-65535 bytes (an IPv4/UDP packet)", cfg.Size))
	}
	res, err := engine.Simulate(cfg)
	if err != nil {
		return usageError(fmt.Errorf("simulate: %w", err))
	}
	w := cc.App.Writer
	if cc.Bool("json") {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return res.WriteText(w)
}
