package main

import (
	"bytes"
	"github.com/wanlab/wanlab/proxy/cpulatency"

	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/wanlab/wanlab/bench"
	"github.com/wanlab/wanlab/experiment"
	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/lab/vm"
	"github.com/wanlab/wanlab/tc/spec"
)

func init() {
	out := &cli.StringFlag{Name: "out", Usage: "write report.json, report.txt and report.html to `DIR` (must not exist unless --force; default: a new wanlab-bench-KIND-TIME-<64 random bits> directory, mode 0700, in the temporary directory, $TMPDIR or /tmp)"}
	force := &cli.BoolFlag{Name: "force", Usage: "write into an existing --out DIR, replacing its reports by rename (never writing through them)"}
	jsonFlag := &cli.BoolFlag{Name: "json", Usage: "print the report as JSON instead of the table"}
	quick := &cli.BoolFlag{Name: "quick", Usage: "the short variant (under a minute; what CI runs)"}
	lowLatency := &cli.StringFlag{Name: "low-latency", Value: string(cpulatency.Auto), Usage: "the proxy's CPU wake-up latency `MODE`: auto, on or off (as wanlab proxy --low-latency)"}
	realtime := &cli.BoolFlag{Name: "realtime", Usage: "run the proxy's release loops under SCHED_FIFO (as wanlab proxy --realtime)"}
	register(&cli.Command{
		Name:  "bench",
		Usage: "measure wanlab's shaping accuracy and forwarding speed against the kernel, and the seeds' tables against their models",
		UsageText: "wanlab bench accuracy [--quick] [--realtime] [--kernel [--kernel-vm auto|on|off]] [--specs FILE] [--out DIR] [--json]\n" +
			"wanlab bench forward [--quick] [--realtime] [--out DIR] [--json]\n" +
			"wanlab bench sweep [--quick] [--realtime] [--kernel] [--out DIR] [--json]\n" +
			"wanlab bench cleanup\n\n" +
			"examples:\n" +
			"   sudo wanlab bench accuracy --quick\n" +
			"   sudo wanlab bench accuracy --specs my-specs.txt --out /tmp/acc\n" +
			"   sudo wanlab bench forward --json > forward.json\n" +
			"   sudo wanlab bench sweep",
		Description: "Each bench builds its own lab (client, router and server network namespaces), drives\n" +
			"traffic in-process and removes the lab at the end, also on Ctrl-C. It prints a table\n" +
			"(configured, realized, error, the issue's target), and writes report.json (for regression\n" +
			"tracking), report.txt and report.html (plots of configured against realized, error bars,\n" +
			"self-contained) to --out. A missed target is a finding, not a failure: the exit status is 0\n" +
			"whenever the bench ran. Timing figures are only as good as the machine is idle: the report\n" +
			"records the load average.",
		Subcommands: []*cli.Command{
			{
				Name:  "accuracy",
				Usage: "configured against realized delay, loss, rate and reordering: proxy (each backend) and kernel qdiscs",
				UsageText: "wanlab bench accuracy [--quick] [--realtime] [--kernel [--kernel-vm auto|on|off]] [--specs FILE] [--out DIR] [--json]\n\n" +
					"examples:\n" +
					"   sudo wanlab bench accuracy --quick\n" +
					"   sudo wanlab bench accuracy --quick --kernel    (netem rows from the reference VM: wanlab vm prepare first)\n" +
					"   printf 'delay 20ms 2ms distribution normal\\ntbf rate 50mbit burst 50kb limit 500kb\\n' > specs.txt\n" +
					"   sudo wanlab bench accuracy --specs specs.txt",
				Description: "For every spec of the grid (delay 1/10/100 ms with and without jitter in each distribution,\n" +
					"loss 0.1/1/10 %, gemodel, tbf 1 to 1000 mbit with small and large buckets, combinations) it sends\n" +
					"timestamped UDP probes from client to server (one-way delay from the same clock; kernel receive\n" +
					"stamps) and, for rates, a TCP bulk transfer, through the proxy with the offload and the water\n" +
					"backend and through the same spec as kernel qdiscs on the router's veth. Kernel rows say\n" +
					"\"n/a: kernel has no netem\" where the kernel lacks the qdisc. --specs FILE: one spec per line.\n\n" +
					"--kernel adds the kernel path of the reference VM (wanlab vm run; prepared by wanlab vm prepare)\n" +
					"where this host's kernel has no netem (--kernel-vm auto; on: always; off: never), and the netem\n" +
					"cases only it can run here (duplicate, corrupt, reorder with gap, netem rate, slot, loss state).\n" +
					"The client's traffic toward the server is routed through the VM, which impairs it on its egress;\n" +
					"the path is named kernel-vm/ and the engine (--engine auto|kvm|uml|tcg): kernel-vm/kvm,\n" +
					"kernel-vm/uml (User-Mode Linux) or kernel-vm/tcg (emulation). Its own delay, measured with the\n" +
					"empty spec, is printed as its timing noise and subtracted from its delay rows. This wanlab binary\n" +
					"runs inside the VM (best built static, CGO_ENABLED=0).",
				Flags: []cli.Flag{quick, realtime, &cli.StringFlag{Name: "specs", Usage: "measure the specs in `FILE` (one per line, # comments) instead of the grid"},
					&cli.BoolFlag{Name: "kernel", Usage: "add the reference VM's kernel where this host's kernel lacks netem"},
					&cli.StringFlag{Name: "kernel-vm", Value: "auto", Usage: "with --kernel: run the kernel path in the VM `auto` (where the host has no netem), on or off"},
					engineFlag(), out, force, jsonFlag},
				Action: func(cc *cli.Context) error { return runBench(cc, "accuracy") },
			},
			{
				Name:  "forward",
				Usage: "forwarding speed: kernel routing vs proxy offload vs proxy water, then TCP through a spec set, with proxy CPU and RSS",
				UsageText: "wanlab bench forward [--quick] [--spec SPEC]... [--vms] [--realtime] [--low-latency auto|on|off] [--out DIR] [--json]\n\n" +
					"examples:\n   sudo wanlab bench forward\n   sudo wanlab bench forward --quick --spec 'delay 1ms' --spec 'loss 0.1%'\n   sudo wanlab bench forward --vms --quick",
				Description: "TCP bulk with 1 and 4 streams, UDP small-packet rate and UDP round-trip latency, each through\n" +
					"kernel routing, the proxy with the offload backend and with the water backend, in alternation\n" +
					"(3 rounds), as absolute figures and as ratios to kernel routing. The proxy runs as a child\n" +
					"process (this executable's `proxy` command) so its CPU time and RSS are its own.\n" +
					"Then TCP with 1 and 4 streams through each spec of a set on the data direction (client to\n" +
					"server), through the proxy and, for a spec's tbf, through the kernel's own tbf at the same rate,\n" +
					"with the proxy's CPU per Gbit/s. The set (--spec, repeatable, replaces it): the empty spec,\n" +
					"'delay 1ms', 'delay 1ms limit 10000' (netem's default limit of 1000 segments holds 1 ms at\n" +
					"12 Gbit/s: the pair tells the limit's drops from the forwarding), 'loss 0.1%', 'delay 5ms 1ms',\n" +
					"'tbf rate 5gbit burst 1mb limit 10mb' and 'delay 1ms | tbf rate 5gbit burst 1mb limit 10mb'.\n" +
					"With --vms: between two VMs on TAPs (this executable is their agent), their boot time, then\n" +
					"ping and one TCP download through kernel routing and through the proxy (offload backend) in\n" +
					"alternation, with each VM's qemu CPU and the proxy's, and which of them was the bottleneck.",
				Flags: []cli.Flag{quick, realtime, lowLatency, out, force, jsonFlag,
					&cli.StringSliceFlag{Name: "spec", Usage: "send the TCP bulk through `SPEC` on the data direction (repeatable; replaces the default set; '' is the empty spec)"},
					&cli.BoolFlag{Name: "vms", Usage: "between two VMs (`wanlab vm prepare`) on TAPs: their boot time, ping and TCP through kernel routing and the proxy, each VM's CPU"},
					engineFlag()},
				Action: func(cc *cli.Context) error { return runBench(cc, "forward") },
			},
			{
				Name:  "sweep",
				Usage: "the seeds' tables beside their models (Mathis, window/RTT, wmem/RTT, the tuner's prediction)",
				UsageText: "wanlab bench sweep [--quick] [--realtime] [--kernel] [--out DIR] [--json]\n\n" +
					"examples:\n   sudo wanlab bench sweep --quick\n   sudo wanlab bench sweep --kernel",
				Description: "Throughput against loss 0-10 % with the Mathis bound and against delay 0-100 ms with window/RTT\n" +
					"(seed 004, 5 streams); download speed with the server's tcp_wmem 4096 at RTT 0/10/100/200 ms\n" +
					"with wmem/RTT (seed 000); the client's tcp_rmem limited against tuned at 35 ms with the\n" +
					"tuner's prediction (seed 001). Through the userspace proxy, or with --kernel as kernel qdiscs\n" +
					"(rows say n/a where the kernel lacks netem).",
				Flags:  []cli.Flag{quick, realtime, &cli.BoolFlag{Name: "kernel", Usage: "impair with kernel qdiscs instead of the userspace proxy"}, out, force, jsonFlag},
				Action: func(cc *cli.Context) error { return runBench(cc, "sweep") },
			},
			{
				Name:  "fit",
				Usage: "the fit's validation grid: lab paths with known specs, both captures fitted, against the truth",
				UsageText: "wanlab bench fit [--quick | --point NAME...] [--kernel] [--out DIR] [--json]\n   wanlab bench fit --refit DIR [--refit DIR]... [--out DIR] [--json]\n\n" +
					"examples:\n   sudo wanlab bench fit --quick\n   sudo wanlab bench fit --out fitgrid\n   sudo wanlab bench fit --point 'bbr tbf 50ms 50mbit 1bdp'\n   sudo wanlab bench fit --kernel --quick\n   wanlab bench fit --refit fitgrid --refit fitgrid2",
				Description: "Runs downloads through the userspace proxy over round trips 10-200 ms, token buckets of\n" +
					"10 Mbit/s to 1 Gbit/s with buffers of a quarter to four bandwidth-delay products, random and\n" +
					"bursty loss, reordering, jitter and receive-window limited paths (CUBIC), and paths of several\n" +
					"factors at 50 ms (a jitter or a loss with a bucket, a loss with a receive window, no TCP\n" +
					"timestamps, BBR and Reno senders), fits the captures at\n" +
					"both ends with `wanlab fit` and compares: the round trip within 5 %, the rate within 5 %, the\n" +
					"buffer within 25 % (when the fit claims it), the random loss and the reordering within 2\n" +
					"standard deviations of what the proxy did (its counters), the burstiness class, the limit and\n" +
					"the jitter within 25 % (none where the point has none). The grid is split into a tuning half\n" +
					"and a held-out half, chosen once and committed; each half is reported apart, with each\n" +
					"parameter's precision (claims within tolerance), coverage (claims where the point has it) and\n" +
					"calibration (the claimed intervals that hold the truth). --quick runs a corner of the grid,\n" +
					"--point NAME (repeatable) the named points only. --kernel runs the points with the reference kernel's qdiscs inside\n" +
					"guest VMs (the engine as experiment --vms picks it); the truth of loss and reordering is then\n" +
					"the spec's long-run shares, with a correlated process's variance in the deviations.\n" +
					"--refit DIR fits the captures of a kept run (an earlier --out) again with this binary,\n" +
					"against the same truth, and prints the table of all the runs given; it builds no lab.",
				Flags: []cli.Flag{quick, &cli.BoolFlag{Name: "kernel", Usage: "run the points with the kernel's qdiscs in guest VMs instead of the userspace proxy"},
					&cli.StringFlag{Name: "out", Usage: "write rows.json, table.txt and each point's run (NN/: its captures and result.json) to `DIR` (must not exist unless --force; default: a new wanlab-bench-fit-<64 random bits> directory, mode 0700, in the temporary directory, $TMPDIR or /tmp)"},
					force, jsonFlag,
					&cli.StringSliceFlag{Name: "refit", Usage: "fit a kept run's captures (an earlier --out `DIR`) again instead of running the grid (repeatable)"},
					&cli.StringSliceFlag{Name: "point", Usage: "run only the grid's point `NAME`, as the table names it (repeatable)"}},
				Action: runBenchFit,
			},
			{
				Name:        "cleanup",
				Usage:       "remove what a killed bench left behind (its lab namespaces and state files)",
				UsageText:   "wanlab bench cleanup\n\nexample:\n   sudo wanlab bench cleanup",
				Description: "Removes the labs of bench (and experiment) processes that are no longer running and the\nbench state directories of labs that no longer exist. Live runs are left alone.",
				Action:      runBenchCleanup,
			},
		},
	})
}

func runBench(cc *cli.Context, kind string) error {
	if cc.NArg() > 0 {
		return usageError(fmt.Errorf("bench %s: unexpected argument %q (flags only; see --help)", kind, cc.Args().First()))
	}
	cfg := bench.Config{Quick: cc.Bool("quick"), Realtime: cc.Bool("realtime"), Command: benchCommandLine(cc, kind)}
	if kind == "accuracy" {
		cfg.Kernel = cc.Bool("kernel")
		switch m := bench.VMMode(cc.String("kernel-vm")); m {
		case bench.VMAuto, bench.VMOn, bench.VMOff:
			cfg.KernelVM = m
		default:
			return usageError(fmt.Errorf("bench accuracy: --kernel-vm %q: want auto, on or off", m))
		}
	}
	if kind == "accuracy" || kind == "forward" {
		e, err := vm.ParseEngine(cc.String("engine"))
		if err != nil {
			return usageError(fmt.Errorf("bench %s: --%w", kind, err))
		}
		cfg.VMEngine = e
	}
	if cc.IsSet("low-latency") {
		m, err := cpulatency.ParseMode(cc.String("low-latency"))
		if err != nil {
			return usageError(fmt.Errorf("bench %s: --low-latency: %w", kind, err))
		}
		cfg.LowLatency = m
	}
	if kind == "accuracy" && cc.String("specs") != "" {
		name := cc.String("specs")
		b, err := readInput(name)
		if err != nil {
			return usageError(fmt.Errorf("bench accuracy: --specs: %w", err))
		}
		cfg.Specs, err = bench.ReadSpecs(bytes.NewReader(b), name)
		if err != nil {
			return usageError(fmt.Errorf("bench accuracy: --specs: %w", err))
		}
	}
	if kind == "sweep" {
		cfg.Kernel = cc.Bool("kernel")
	}
	if kind == "forward" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench forward: find own executable for the proxy process: %w", err)
		}
		cfg.ProxyExec = []string{exe, "proxy"}
		cfg.VMs = cc.Bool("vms")
		if cc.IsSet("spec") {
			cfg.ForwardSpecs = []string{}
			for _, text := range cc.StringSlice("spec") {
				s, err := spec.Parse(text)
				if err != nil {
					return usageError(fmt.Errorf("bench forward: --spec %q: %w", text, err))
				}
				cfg.ForwardSpecs = append(cfg.ForwardSpecs, s.String())
			}
		}
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("bench %s: needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN to build namespaces): %w", kind, os.ErrPermission)
	}
	outDir, force := cc.String("out"), cc.Bool("force")
	if outDir == "" {
		// Never into the working directory (a checkout, say): a new
		// directory of the temporary one, named after the run and
		// hostfile.RandomBits random bits, mode 0700.
		d, err := hostfile.NewOutputDir(os.TempDir(), fmt.Sprintf("wanlab-bench-%s-%s-", kind, time.Now().UTC().Format("20060102-150405")))
		if err != nil {
			return fmt.Errorf("bench %s: report directory: %w", kind, err)
		}
		outDir = d
	} else if err := hostfile.OutputDir(outDir, force); err != nil {
		return usageError(fmt.Errorf("bench %s: --out: %w", kind, err))
	}
	ctx, stop := signal.NotifyContext(cc.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	stderr := cc.App.ErrWriter
	if stderr == nil {
		stderr = os.Stderr
	}
	cfg.Progress = benchProgress(stderr)
	run := map[string]func(context.Context, bench.Config) (*bench.Report, error){
		"accuracy": bench.Accuracy, "forward": bench.Forward, "sweep": bench.Sweep,
	}[kind]
	rep, err := run(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("bench %s: interrupted, lab removed: %w", kind, err)
		}
		return fmt.Errorf("bench %s: %w", kind, err)
	}
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{{"report.json", rep.WriteJSON}, {"report.txt", rep.WriteText}, {"report.html", rep.WriteHTML}} {
		if err := writeFile(filepath.Join(outDir, f.name), f.write, force); err != nil {
			return fmt.Errorf("bench %s: %w", kind, err)
		}
	}
	if cc.Bool("json") {
		err = rep.WriteJSON(cc.App.Writer)
	} else {
		err = rep.WriteText(cc.App.Writer)
	}
	fmt.Fprintf(stderr, "report: %s\n", filepath.Join(outDir, "report.html"))
	return err
}

func writeFile(name string, write func(io.Writer) error, force bool) error {
	f, err := hostfile.CreateOutput(name, 0o644, force)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	return f.Close()
}

// benchProgress draws a progress bar on a terminal and prints one line
// per step elsewhere (CI logs).
func benchProgress(w io.Writer) func(done, total int, step string) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return func(done, total int, step string) {
			if done < total {
				fmt.Fprintf(w, "[%d/%d] %s\n", done+1, total, step)
			}
		}
	}
	var bar *progressbar.ProgressBar
	return func(done, total int, step string) {
		if bar == nil {
			bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(w),
				progressbar.OptionSetWidth(30), progressbar.OptionShowCount(),
				progressbar.OptionClearOnFinish(), progressbar.OptionSetElapsedTime(true))
		}
		bar.Describe(step)
		if err := bar.Set(done); err == nil && done >= total {
			_ = bar.Finish()
		}
	}
}

func runBenchCleanup(cc *cli.Context) error {
	return runSubCleanup(cc, "bench cleanup", bench.Cleanup)
}

// benchCommandLine rebuilds the command line from the flags that were set,
// for the report.
func benchCommandLine(cc *cli.Context, kind string) string {
	parts := []string{"wanlab", "bench", kind}
	for _, name := range []string{"quick", "realtime", "kernel", "json", "force"} {
		if cc.IsSet(name) && cc.Bool(name) {
			parts = append(parts, "--"+name)
		}
	}
	for _, name := range []string{"specs", "out"} {
		if cc.IsSet(name) {
			parts = append(parts, "--"+name, cc.String(name))
		}
	}
	return strings.Join(parts, " ")
}

func runBenchFit(cc *cli.Context) error {
	if cc.NArg() > 0 {
		return usageError(fmt.Errorf("bench fit: unexpected argument %q (flags only; see --help)", cc.Args().First()))
	}
	if dirs := cc.StringSlice("refit"); len(dirs) > 0 {
		if cc.Bool("quick") || cc.Bool("kernel") || cc.IsSet("point") {
			return usageError(fmt.Errorf("bench fit: --refit fits kept runs as they were run: no --quick, --kernel or --point"))
		}
		rows, err := experiment.RefitFitGrid(dirs)
		if err != nil {
			return fmt.Errorf("bench fit: --refit: %w", err)
		}
		return writeFitGrid(cc, cc.String("out"), rows)
	}
	points := experiment.FitGrid(cc.Bool("quick"))
	if names := cc.StringSlice("point"); len(names) > 0 {
		if cc.Bool("quick") {
			return usageError(fmt.Errorf("bench fit: --point names points of the full grid: no --quick"))
		}
		var err error
		if points, err = experiment.FitGridPoints(names...); err != nil {
			return usageError(fmt.Errorf("bench fit: --point: %w", err))
		}
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("bench fit: needs root (it builds labs): %w", os.ErrPermission)
	}
	dir := cc.String("out")
	if dir == "" {
		var err error
		if dir, err = hostfile.NewOutputDir(os.TempDir(), "wanlab-bench-fit-"); err != nil {
			return fmt.Errorf("bench fit: %w", err)
		}
	} else if err := hostfile.OutputDir(dir, cc.Bool("force")); err != nil {
		return usageError(fmt.Errorf("bench fit: --out: %w", err))
	}
	ctx, stop := signal.NotifyContext(cc.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	rows, err := experiment.RunFitGrid(ctx, points, dir, cc.App.ErrWriter, experiment.FitGridOptions{Kernel: cc.Bool("kernel")})
	if err != nil {
		return fmt.Errorf("bench fit: %w", err)
	}
	return writeFitGrid(cc, dir, rows)
}

// writeFitGrid writes the grid's rows.json and table.txt to dir (none
// where dir is empty) and the table, or with --json the rows, to stdout.
func writeFitGrid(cc *cli.Context, dir string, rows []experiment.FitRow) error {
	if dir != "" {
		if cc.IsSet("refit") {
			if err := hostfile.OutputDir(dir, cc.Bool("force")); err != nil {
				return usageError(fmt.Errorf("bench fit: --out: %w", err))
			}
		}
		if err := experiment.WriteFitGridFiles(dir, rows); err != nil {
			return fmt.Errorf("bench fit: %w", err)
		}
	}
	if cc.Bool("json") {
		return writeJSON(cc.App.Writer, rows)
	}
	if err := experiment.WriteFitGrid(cc.App.Writer, rows); err != nil {
		return err
	}
	if dir != "" {
		fmt.Fprintf(cc.App.Writer, "rows: %s\n", filepath.Join(dir, "rows.json"))
	}
	return nil
}
