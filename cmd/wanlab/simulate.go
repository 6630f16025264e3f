package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/htb"
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
	if fl, _ := cc.Generic("flow").(*flowList); fl != nil {
		// The flag's value lives as long as the command: empty it for the
		// next run of the app (tests run it many times).
		defer func() { fl.texts = nil }()
	}
	if cc.NArg() != 0 {
		return usageError(fmt.Errorf("simulate: unexpected argument %q (quote the spec and pass it with --spec)", cc.Args().First()))
	}
	cfg := engine.SimConfig{
		Packets: cc.Int("packets"),
		PPS:     cc.Float64("pps"),
		Size:    cc.Int("size"),
		Seed:    cc.Uint64("seed"),
	}
	if err := simulateImpairment(cc, &cfg); err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(cc.String("cpuprofile"))
	if err != nil {
		return fmt.Errorf("simulate: --cpuprofile: %w", err)
	}
	defer stopProfile()
	if cfg.QueueMemory, err = queueMemory(cc); err != nil {
		return usageError(fmt.Errorf("simulate: %w", err))
	}
	// A class tree runs --flow traffic; a plain pipeline the evenly
	// spaced packets of --packets, --pps and --size.
	if _, plain := cfg.Impairment.Pipeline(); plain {
		err = packetTraffic(cfg)
	} else {
		err = classTraffic(cc, &cfg)
	}
	if err != nil {
		return usageError(fmt.Errorf("simulate: %w", err))
	}
	res, err := engine.Simulate(cfg)
	if err != nil {
		return usageError(fmt.Errorf("simulate: %w", err))
	}
	return jsonOrText(cc, res, res.WriteText)
}

// simulateImpairment reads what runs: --classes, or --spec (a pipeline,
// which --schedule may step, or a class set).
func simulateImpairment(cc *cli.Context, cfg *engine.SimConfig) error {
	if cc.IsSet("classes") {
		if cc.IsSet("spec") {
			return usageError(errors.New("simulate: --spec and --classes exclude each other (give a leaf its spec with 'leaf ID SPEC')"))
		}
		text, err := specFileArg(cc.String("classes"))
		if err != nil {
			return usageError(fmt.Errorf("simulate: --classes: %w", err))
		}
		cs, err := spec.ParseClassesAuto([]byte(text))
		if err != nil {
			return usageError(fmt.Errorf("simulate: --classes: %w", err))
		}
		cfg.Impairment = spec.Impairment{Classes: cs}
		return nil
	}
	if !cc.IsSet("spec") && !cc.IsSet("schedule") {
		return usageError(errors.New("simulate: --spec is required (e.g. --spec 'delay 100ms loss 1%')"))
	}
	if path := cc.String("schedule"); path != "" {
		var err error
		if cfg.Schedule, err = readSchedule(path); err != nil {
			return usageError(fmt.Errorf("simulate: --schedule: %w", err))
		}
	}
	text, err := specFileArg(cc.String("spec"))
	if err != nil {
		return usageError(fmt.Errorf("simulate: --spec: %w", err))
	}
	im, err := spec.ParseImpairment(text)
	if err != nil {
		return usageError(fmt.Errorf("simulate: --spec: %w", err))
	}
	if _, plain := im.Pipeline(); !plain && cfg.Schedule != nil {
		// A class set runs --flow traffic, as with --classes.
		return usageError(errors.New("simulate: --schedule steps a pipeline, not a class set"))
	}
	cfg.Impairment = im
	return nil
}

// packetTraffic checks --packets, --pps and --size, a pipeline's traffic.
func packetTraffic(cfg engine.SimConfig) error {
	switch {
	case cfg.Packets <= 0:
		return fmt.Errorf("--packets %d: must be at least 1", cfg.Packets)
	case cfg.PPS <= 0:
		return fmt.Errorf("--pps %g: must be more than 0", cfg.PPS)
	case cfg.Size < 28 || cfg.Size > 65535:
		return fmt.Errorf("--size %d: must be 28-65535 bytes (an IPv4/UDP packet)", cfg.Size)
	}
	return nil
}

// classTraffic sets cfg's --flow traffic, which a class set runs, and its
// duration and warmup.
func classTraffic(cc *cli.Context, cfg *engine.SimConfig) error {
	cfg.TreeOptions = htb.EngineOptions
	cfg.Duration, cfg.Warmup = cc.Duration("duration"), cc.Duration("warmup")
	fl, _ := cc.Generic("flow").(*flowList)
	if fl == nil || len(fl.texts) == 0 {
		return errors.New("--classes needs at least one --flow dst=ADDR,rate=RATE")
	}
	for _, text := range fl.texts {
		f, err := engine.ParseFlow(text)
		if err != nil {
			return fmt.Errorf("--flow: %w", err)
		}
		cfg.Flows = append(cfg.Flows, f)
	}
	if cfg.Duration <= 0 || cfg.Duration > time.Hour {
		return fmt.Errorf("--duration %s: must be more than 0 and at most 1h", cfg.Duration)
	}
	return nil
}

var classSimFlags = []cli.Flag{
	&cli.StringFlag{Name: "classes", Usage: "traffic classes `TEXT` (htb/class/filter/leaf statements separated by ';', tc class/filter commands, or YAML) or @FILE; runs --flow traffic through them instead of --spec"},
	&cli.GenericFlag{Name: "flow", Value: &flowList{}, Usage: "with --classes: a synthetic `FLOW` dst=ADDR,rate=RATE[,src=ADDR][,proto=udp|tcp][,sport=N][,dport=N][,dscp=N][,size=B][,start=T][,stop=T] (repeat the flag for more)"},
	&cli.DurationFlag{Name: "duration", Value: 10 * time.Second, Usage: "with --classes: virtual time to run"},
	&cli.DurationFlag{Name: "warmup", Usage: "with --classes: time left out of the rates (default a tenth of --duration)"},
	&cli.StringFlag{Name: "cpuprofile", Usage: "write a Go CPU profile of the run to `FILE` (go tool pprof)", Hidden: true},
}

// classesHelp is appended to simulate's description.
const classesHelp = "\n\nWith --classes, --flow traffic (constant-rate packets, several flows with\n" +
	"their own destinations and rates) goes through a classifier, each class's leaf\n" +
	"pipeline and an htb tree, and each class's offered and realized rate, borrowed\n" +
	"and lent bytes, drops by reason, mean delay and deepest queue are printed\n" +
	"(--json: {classes, flows, duration_ms, warmup_ms, seed, result: [{id, parent,\n" +
	"leaf, rate_bps, ceil_bps, offered_bps, realized_bps, borrowed_bytes,\n" +
	"lent_bytes, drops{loss,queue,oversize}, delay_mean_ms, queue_max_packets}]})."

// flowList collects repeated --flow values; each is parsed whole (a
// StringSliceFlag would split it at its commas).
type flowList struct{ texts []string }

func (l *flowList) Set(s string) error {
	l.texts = append(l.texts, s)
	return nil
}

func (l *flowList) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(l.texts, " ")
}
