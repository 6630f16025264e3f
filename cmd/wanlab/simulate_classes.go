package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wanlab/wanlab/tc/htb"
	"github.com/wanlab/wanlab/tc/spec"
)

// classSimFlags are simulate's traffic-class flags.
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

func runSimulateClasses(cc *cli.Context) error {
	fl, _ := cc.Generic("flow").(*flowList)
	if fl != nil {
		// The flag's value lives as long as the command: empty it for
		// the next run of the app (tests run it many times).
		defer func() { fl.texts = nil }()
	}
	stopProfile, err := startCPUProfile(cc.String("cpuprofile"))
	if err != nil {
		return fmt.Errorf("simulate: --cpuprofile: %w", err)
	}
	defer stopProfile()
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
	cfg := htb.SimConfig{Classes: cs, Duration: cc.Duration("duration"), Warmup: cc.Duration("warmup"), Seed: cc.Uint64("seed")}
	if cfg.QueueMemory, err = queueMemory(cc); err != nil {
		return usageError(fmt.Errorf("simulate: %w", err))
	}
	if fl == nil || len(fl.texts) == 0 {
		return usageError(errors.New("simulate: --classes needs at least one --flow dst=ADDR,rate=RATE"))
	}
	for _, text := range fl.texts {
		f, err := htb.ParseFlow(text)
		if err != nil {
			return usageError(fmt.Errorf("simulate: --flow: %w", err))
		}
		cfg.Flows = append(cfg.Flows, f)
	}
	if cfg.Duration <= 0 || cfg.Duration > time.Hour {
		return usageError(fmt.Errorf("simulate: --duration %s: must be more than 0 and at most 1h", cfg.Duration))
	}
	res, err := htb.Simulate(cfg)
	if err != nil {
		return usageError(fmt.Errorf("simulate: %w", err))
	}
	if cc.Bool("json") {
		enc := json.NewEncoder(cc.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return res.WriteText(cc.App.Writer)
}

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
