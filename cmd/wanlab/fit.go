package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/wanlab/wanlab/fit"
	"github.com/wanlab/wanlab/internal/heapbound"
)

func init() {
	register(&cli.Command{
		Name:      "fit",
		Usage:     "infer from a capture the path and endpoints that produced it, as a spec and sysctls",
		ArgsUsage: "CAPTURE",
		UsageText: "wanlab fit [--flow SELECTOR] [--json] [--window-ratio R] CAPTURE\n\n" +
			"examples:\n" +
			"   wanlab fit download.pcap\n" +
			"   wanlab fit --flow 10.0.0.1:80 --json server.pcapng > fit.json\n" +
			"   sudo wanlab experiment --like download.pcap      # reproduce it in a lab",
		Description: "Fits one connection (the one that carried the most data, or --flow's) and\n" +
			"infers, per direction, the base round trip and where the capture was taken, the\n" +
			"bottleneck's rate (ACK clocking while a queue held), whether it is a token bucket\n" +
			"(its burst) or a fixed link, its buffer (largest queueing delay x rate, known when\n" +
			"it overflowed), the loss process (random or bursty, apart from the queue's tail\n" +
			"drops, with a Gilbert-Elliott fit), reordering and jitter, and the endpoints' receive\n" +
			"window and buffer, send buffer, MSS, window scale, SACK, timestamps and congestion\n" +
			"control. Each parameter has an interval and its evidence; what the capture does not\n" +
			"show is listed as not inferred, with the reason. It prints the spec in tc syntax for\n" +
			"each direction and the client's and server's sysctls: what `experiment --like`\n" +
			"applies. --json: docs/fit.md.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "flow", Usage: "the connection to fit: `N, ADDR, ADDR:PORT or :PORT` (default: the one with the most data)"},
			&cli.BoolFlag{Name: "json", Usage: "print the fit as JSON"},
			&cli.Float64Flag{Name: "window-ratio", Usage: "share of the receive buffer the receiver's kernel offers as window (default 0.5, Linux's)"},
			maxOpenFlag(),
			&cli.IntFlag{Name: "max-packets", Value: fit.DefaultMaxPackets,
				Usage: fmt.Sprintf("fit at most the first `N` packets of the connection (about %d bytes each)", fit.PacketBytes)},
		},
		Args:   true,
		Action: runFit,
	})
}

func runFit(cc *cli.Context) error {
	if cc.NArg() != 1 {
		return usageError(errors.New("fit: want exactly one CAPTURE"))
	}
	ratio := cc.Float64("window-ratio")
	if ratio < 0 || ratio > 1 {
		return usageError(fmt.Errorf("fit: --window-ratio %g: want a share between 0 and 1", ratio))
	}
	maxOpen, err := maxOpenConnections(cc)
	if err != nil {
		return usageError(fmt.Errorf("fit: %w", err))
	}
	maxPackets := cc.Int("max-packets")
	if maxPackets < 1 || maxPackets > maxPacketsLimit {
		return usageError(fmt.Errorf("fit: --max-packets %d: want 1 to %d", maxPackets, maxPacketsLimit))
	}
	opt := fit.Options{Flow: cc.String("flow"), WindowRatio: ratio, MaxOpen: maxOpen, MaxPackets: maxPackets}
	if !cc.Bool("json") {
		opt.Progress = func(line string) { fmt.Fprintf(cc.App.ErrWriter, "fit: %s\n", line) }
	}
	path := cc.Args().First()
	if err := captureInput(path); err != nil || path == "-" {
		if err == nil {
			err = errors.New("a capture file, not standard input (the fit reads it twice)")
		}
		return usageError(fmt.Errorf("fit: %w", err))
	}
	// A fit's live data is its connection's packets and the open
	// connections' state: the heap is kept near it (heapbound), not at
	// twice it.
	defer heapbound.Start(analyzeHeapFloor)()
	r, err := fit.File(path, opt)
	if err != nil {
		return usageError(fmt.Errorf("fit: %w", err))
	}
	if r.ReadStopped != "" {
		// Said on stderr too, with --json: a fit of part of a file is
		// never silent.
		fmt.Fprintf(cc.App.ErrWriter, "fit: warning: the capture was read in part (%s): the fit is of the frames before that\n", r.ReadStopped)
	}
	if cc.Bool("json") {
		return fit.WriteJSON(cc.App.Writer, r)
	}
	return fit.WriteText(cc.App.Writer, r)
}
