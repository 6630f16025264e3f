package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/wanlab/wanlab/experiment"
	"github.com/wanlab/wanlab/fit"
	"github.com/wanlab/wanlab/lab/traffic"
	"github.com/wanlab/wanlab/lab/vm"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

func init() {
	register(&cli.Command{
		Name:  "experiment",
		Usage: "build a client-router-server lab, impair it, download through it, capture and explain",
		UsageText: "wanlab experiment [--preset NAME] [--impair [to-client=|to-server=]SPEC]...\n" +
			"                  [--schedule [to-client=|to-server=]FILE]...\n" +
			"                  [--delay RTT] [--loss P] [--rate RATE] [--kernel] [--size SIZE]\n" +
			"                  [--client-rcvbuf SIZE] [--server-sndbuf SIZE] [--cc NAME] [--quickack]\n" +
			"                  [--client-sysctl KEY=VALUE]... [--server-sysctl KEY=VALUE]...\n" +
			"                  [--requests N --concurrency C] [--vms] [--json] [--out DIR]\n" +
			"wanlab experiment cleanup\n\n" +
			"examples:\n" +
			"   sudo wanlab experiment                      # seed 001: 35 ms RTT, client receive window limited\n" +
			"   sudo wanlab experiment --preset seed000     # server tcp_wmem 4096 at 100 ms: send-buffer limited\n" +
			"   sudo wanlab experiment --preset seed001 --client-sysctl net.ipv4.tcp_rmem='4096 131072 16777216'\n" +
			"   sudo wanlab experiment --impair 'to-client=delay 50ms loss 1% | tbf rate 100mbit burst 64kb limit 1mb'\n" +
			"   sudo wanlab experiment --delay 100ms --rate 50mbit --size 32mb --out run1\n" +
			"   sudo wanlab experiment --preset seed003 --quickack   # delayed-ACK stall gone (client fix)\n" +
			"   sudo wanlab experiment --preset seed003 --nodelay    # delayed-ACK stall gone (server fix)\n" +
			"   sudo wanlab experiment --vms                # seed 001 between two VMs (6.1 kernel: window = 50 % of the buffer)\n" +
			"   sudo wanlab experiment --vms --kernel --preset seed002   # netem in the server VM, tbf where the kernel has it\n" +
			"   sudo wanlab experiment cleanup              # remove what a crashed run left",
		Description: "Builds three network namespaces (client, router, server) joined by veth pairs, with\n" +
			"private test addresses that exist only inside them. The router impairs traffic with\n" +
			"the userspace proxy (or, with --kernel, the same spec as qdiscs on its veths). The\n" +
			"server serves a generated file over HTTP and the client downloads it (like nginx and\n" +
			"curl -O in the seeds), or with --requests runs a wrk-like request/response load.\n" +
			"Both ends are captured in-process (AF_PACKET, snaplen 120) to pcapng, then analyzed.\n\n" +
			"Prints a live progress line, a curl-like summary, the TCP_INFO of both sockets and\n" +
			"the diagnosis of each capture with advice, and writes OUT/report.html (graphs of\n" +
			"both captures side by side), OUT/result.json and the captures. Everything it\n" +
			"created is removed on exit, on Ctrl-C and on error.\n\n" +
			"Directions: to-client is what the router sends toward the client (the download's\n" +
			"data), to-server what it sends toward the server (requests, ACKs). Specs use tc's\n" +
			"netem/tbf syntax, stages joined by '|'. --delay RTT adds the round trip on the\n" +
			"to-server side (as netem on the client in the scenarios), --loss P and --rate RATE act on\n" +
			"the data (to-client). Impairment flags replace the preset's impairment.\n\n" +
			"With --vms the client and the server are VMs of Debian's Linux 6.1 (`wanlab vm prepare`;\n" +
			"--engine auto|kvm|uml|tcg: qemu with KVM, User-Mode Linux, qemu's emulation; auto takes\n" +
			"KVM when its probe boots, else UML, else tcg), whose window is 50 % of the receive buffer as in the scenarios'\n" +
			"Ubuntu 5.4), each on a TAP of the router namespace; the traffic runs inside them (this\n" +
			"wanlab binary is their agent), the sysctls are written inside them, the TAPs are\n" +
			"captured. With --kernel, a direction whose qdiscs this host's kernel lacks (netem)\n" +
			"goes on the sending VM's eth0. The request/response preset runs 200 requests.\n\n" +
			"Presets:\n" + presetHelp(),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "preset", Usage: "start from a scenario (docs/scenarios.md) by name or id: " + presetNames() + " (default receive-window, seed001)"},
			&cli.StringSliceFlag{Name: "impair", Usage: "`[to-client=|to-server=]SPEC` in tc netem/tbf syntax (repeatable; no direction: both)"},
			&cli.StringSliceFlag{Name: "schedule", Usage: "`[to-client=|to-server=]FILE`: step the direction's spec over time as the schedule FILE says (no direction: both; needs the proxy)"},
			&cli.StringFlag{Name: "delay", Usage: "add `RTT` of delay (netem on the to-server side)"},
			&cli.StringFlag{Name: "loss", Usage: "lose `P` percent of the data (netem loss on the to-client side)"},
			&cli.StringFlag{Name: "rate", Usage: "limit the data to `RATE` (tbf on the to-client side)"},
			&cli.BoolFlag{Name: "kernel", Usage: "apply the specs as qdiscs on the router's veths instead of the userspace proxy"},
			&cli.BoolFlag{Name: "vms", Usage: "run the client and the server as VMs (Debian's 6.1 kernel, `wanlab vm prepare`) on TAPs of the router namespace"},
			engineFlag(),
			&cli.StringFlag{Name: "backend", Usage: "proxy device backend: offload or water"},
			&cli.Int64Flag{Name: "seed", Usage: "seed of the proxy's random stages"},
			&cli.StringFlag{Name: "size", Usage: "`SIZE` of the downloaded file (e.g. 256mb)"},
			&cli.StringFlag{Name: "client-rcvbuf", Usage: "SO_RCVBUF of the client socket (`SIZE`; disables autotuning)"},
			&cli.StringFlag{Name: "server-sndbuf", Usage: "SO_SNDBUF of the server socket (`SIZE`; disables autotuning)"},
			&cli.StringFlag{Name: "cc", Usage: "congestion control of both sockets (`NAME`: cubic, bbr, reno...)"},
			&cli.BoolFlag{Name: "quickack", Usage: "TCP_QUICKACK on the client, re-armed after every read"},
			&cli.BoolFlag{Name: "nodelay", Usage: "keep TCP_NODELAY on the server in request/response mode (nginx's tcp_nodelay on, seed 003's fix)"},
			&cli.StringSliceFlag{Name: "client-sysctl", Usage: "`KEY=VALUE` written in the client's namespace (repeatable)"},
			&cli.StringSliceFlag{Name: "server-sysctl", Usage: "`KEY=VALUE` written in the server's namespace (repeatable)"},
			&cli.IntFlag{Name: "requests", Usage: "run `N` requests (request/response mode, like wrk) instead of a download"},
			&cli.StringFlag{Name: "server-cmd", Usage: "also run the shell command line `CMD` in the server namespace for the whole experiment (your server: 'iperf3 -s'); $WANLAB_SERVER is the server's address"},
			&cli.StringFlag{Name: "client-cmd", Usage: "run the shell command line `CMD` in the client namespace instead of the download, the experiment lasting while it runs ('iperf3 -c $WANLAB_SERVER -R')"},
			&cli.IntFlag{Name: "concurrency", Usage: "connections of the request/response mode (`C`, default 50)"},
			&cli.BoolFlag{Name: "ipv6", Usage: "run over the lab's IPv6 addresses"},
			&cli.BoolFlag{Name: "no-offload", Usage: "turn TSO/GSO/GRO off on the lab's veths: captures hold wire-sized segments"},
			&cli.IntFlag{Name: "snaplen", Usage: "bytes kept per captured packet (default 120)"},
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON instead of the summary"},
			&cli.StringFlag{Name: "out", Usage: "output `DIR`, which must not exist (default: a new directory wanlab-experiment-TIME-<64 random bits>, mode 0700, under the current one)"},
			&cli.BoolFlag{Name: "force", Usage: "write into an existing --out DIR, replacing its files by rename (never writing through them)"},
			&cli.StringFlag{Name: "timeout", Usage: "give up on the traffic after `DURATION` (default 5m)"},
			&cli.StringFlag{Name: "like", Usage: "reproduce the transfer of `CAPTURE`: fit it (wanlab fit), run the lab the fit describes, compare the two"},
			&cli.StringSliceFlag{Name: "try", Usage: "with --like, run the fix `[client:|server:]KEY=VALUE` on the reproduced path (repeatable: one run each)"},
			&cli.StringFlag{Name: "flow", Usage: "with --like, the capture's connection to reproduce (default: the one with the most data)"},
			&cli.DurationFlag{Name: "deadline", Usage: "with --like, end the whole reproduction after `D` (default: a minute and ten times the original's duration per run)"},
			&cli.IntFlag{Name: "runs", Usage: fmt.Sprintf("with --like, run the reproduction `N` times (1 to %d): each compared, the median by rate of those that agree shown beside the original, reproduced when more than half are", experiment.MaxLikeRuns), Value: 1},
		},
		Action: runExperiment,
		Subcommands: []*cli.Command{{
			Name:      "cleanup",
			Usage:     "remove namespaces, veths and proxy state left by crashed experiments",
			UsageText: "wanlab experiment cleanup",
			Action:    runExperimentCleanup,
		}},
	})
}

func presetHelp() string {
	var b strings.Builder
	for _, p := range experiment.Presets() {
		id := p
		if experiment.ScenarioName(p) == p {
			id = strings.Repeat(" ", len("seed000")) // a preset with a name only
		}
		fmt.Fprintf(&b, "   %-15s %s  %s\n", experiment.ScenarioName(p), id, experiment.PresetAbout(p))
	}
	return b.String()
}

func presetNames() string {
	var names []string
	for _, p := range experiment.Presets() {
		if experiment.ScenarioName(p) == p {
			names = append(names, p)
			continue
		}
		names = append(names, experiment.ScenarioName(p)+" ("+p+")")
	}
	return strings.Join(names, ", ")
}

// experimentConfig turns the flags into a Config; every error is a usage
// error naming the flag.
func experimentConfig(cc *cli.Context) (experiment.Config, error) {
	name := cc.String("preset")
	if name == "" {
		name = "seed001"
	}
	cfg, err := experiment.Preset(name)
	if err != nil {
		return cfg, fmt.Errorf("--preset: %w", err)
	}
	if cc.String("like") != "" {
		// The impairment, the sysctls and the size come from the fit;
		// the flags below add to them.
		for _, f := range []string{"preset", "impair", "schedule", "delay", "loss", "rate", "requests"} {
			if cc.IsSet(f) {
				return cfg, fmt.Errorf("--like takes the path from the capture: --%s does not go with it", f)
			}
		}
		cfg = experiment.Config{}
	} else if cc.IsSet("try") {
		return cfg, errors.New("--try needs --like CAPTURE")
	} else if cc.IsSet("runs") {
		return cfg, errors.New("--runs needs --like CAPTURE")
	}
	if cc.IsSet("deadline") && cc.String("like") == "" {
		return cfg, errors.New("--deadline needs --like CAPTURE")
	}
	if cc.IsSet("deadline") && cc.Duration("deadline") <= 0 {
		return cfg, fmt.Errorf("--deadline %v: want a positive duration", cc.Duration("deadline"))
	}
	if n := cc.Int("runs"); n < 1 || n > experiment.MaxLikeRuns {
		return cfg, fmt.Errorf("--runs %d: want 1 to %d runs of the reproduction", n, experiment.MaxLikeRuns)
	}
	if cc.IsSet("impair") || cc.IsSet("delay") || cc.IsSet("loss") || cc.IsSet("rate") {
		cfg.Impair = nil
		cfg.Name = "custom"
		if cc.IsSet("preset") {
			cfg.Name = "custom (from " + name + ")"
		}
	}
	for _, arg := range cc.StringSlice("schedule") {
		dir, path, err := spec.SplitDirectional(arg)
		if err != nil {
			return cfg, fmt.Errorf("--schedule %q: %w", arg, err)
		}
		s, err := readSchedule(strings.TrimSpace(path))
		if err != nil {
			return cfg, fmt.Errorf("--schedule: %w", err)
		}
		if cfg.Schedule == nil {
			cfg.Schedule = map[string]string{}
		}
		switch dir {
		case "":
			cfg.Schedule[experiment.ToClient], cfg.Schedule[experiment.ToServer] = s.String(), s.String()
		case experiment.ToClient, experiment.ToServer:
			cfg.Schedule[dir] = s.String()
		default:
			return cfg, fmt.Errorf("--schedule %q: direction %q: want %s or %s", arg, dir, experiment.ToClient, experiment.ToServer)
		}
	}
	for _, arg := range cc.StringSlice("impair") {
		arg, err := resolveTraces(arg, "")
		if err != nil {
			return cfg, fmt.Errorf("--impair: %w", err)
		}
		if err := cfg.AddImpair(arg); err != nil {
			return cfg, err
		}
	}
	if v := cc.String("delay"); v != "" {
		if _, err := units.ParseTime(v, time.Millisecond); err != nil {
			return cfg, fmt.Errorf("--delay %q: %w", v, err)
		}
		cfg.AppendStage(experiment.ToServer, "delay "+v)
	}
	if v := cc.String("loss"); v != "" {
		if !strings.HasSuffix(v, "%") {
			v += "%"
		}
		if _, err := units.ParsePercent(v); err != nil {
			return cfg, fmt.Errorf("--loss %q: %w", cc.String("loss"), err)
		}
		cfg.AppendStage(experiment.ToClient, "loss "+v)
	}
	if v := cc.String("rate"); v != "" {
		r, err := units.ParseRate(v)
		if err != nil {
			return cfg, fmt.Errorf("--rate %q: %w", v, err)
		}
		// A burst of 2 ms at the rate (at least 32 KiB) and a queue that
		// holds 50 ms: tc's usual advice for tbf.
		burst := max(units.Size(r.BytesPerSecond()*0.002), 32*units.KiB)
		cfg.AppendStage(experiment.ToClient, fmt.Sprintf("tbf rate %s burst %s latency 50ms", r, burst))
	}
	if _, err := cfg.Specs(); err != nil {
		return cfg, err
	}
	cfg.Kernel = cc.Bool("kernel")
	cfg.Backend = cc.String("backend")
	cfg.Seed = cc.Int64("seed")
	sizeFlag := func(flag string, dst *units.Size) error {
		if v := cc.String(flag); v != "" {
			s, err := units.ParseSize(v)
			if err != nil {
				return fmt.Errorf("--%s: %w", flag, err)
			}
			if s == 0 {
				return fmt.Errorf("--%s %q: want a size such as 256mb", flag, v)
			}
			*dst = s
		}
		return nil
	}
	for _, f := range []struct {
		flag string
		dst  *units.Size
	}{{"size", &cfg.Size}, {"client-rcvbuf", &cfg.Client.RcvBuf}, {"server-sndbuf", &cfg.Server.SndBuf}} {
		if err := sizeFlag(f.flag, f.dst); err != nil {
			return cfg, err
		}
	}
	if v := cc.String("cc"); v != "" {
		cfg.Client.CC, cfg.Server.CC = v, v
	}
	cfg.Client.QuickAck = cc.Bool("quickack")
	cfg.NoNagle = cc.Bool("nodelay")
	for _, h := range []struct {
		flag string
		dst  *map[string]string
	}{{"client-sysctl", &cfg.ClientSysctls}, {"server-sysctl", &cfg.ServerSysctls}} {
		for _, kv := range cc.StringSlice(h.flag) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || !strings.HasPrefix(k, "net.") {
				return cfg, fmt.Errorf("--%s %q: want net.KEY=VALUE", h.flag, kv)
			}
			if *h.dst == nil {
				*h.dst = map[string]string{}
			}
			(*h.dst)[k] = v
		}
	}
	cfg.ServerCmd, cfg.ClientCmd = cc.String("server-cmd"), cc.String("client-cmd")
	if cfg.ClientCmd != "" && cc.IsSet("requests") {
		return cfg, errors.New("--client-cmd replaces the built-in traffic: not with --requests")
	}
	if cc.IsSet("requests") {
		if cc.Int("requests") <= 0 {
			return cfg, fmt.Errorf("--requests %d: want a positive count", cc.Int("requests"))
		}
		cfg.Requests = cc.Int("requests")
	}
	if cc.IsSet("concurrency") {
		if cc.Int("concurrency") <= 0 {
			return cfg, fmt.Errorf("--concurrency %d: want a positive count", cc.Int("concurrency"))
		}
		cfg.Concurrency = cc.Int("concurrency")
	}
	cfg.VMs = cc.Bool("vms")
	if cc.IsSet("engine") {
		e, err := vm.ParseEngine(cc.String("engine"))
		if err != nil {
			return cfg, fmt.Errorf("--%w", err)
		}
		if !cfg.VMs {
			return cfg, fmt.Errorf("--engine %s: needs --vms", e)
		}
		cfg.VMEngine = string(e)
	}
	if cfg.VMs && cfg.Requests > vmRequests && !cc.IsSet("requests") {
		// Emulated guests answer a request in milliseconds, not
		// microseconds: the preset's load would take minutes.
		cfg.Requests = vmRequests
	}
	if err := cfg.CheckSysctls(); err != nil {
		return cfg, err
	}
	cfg.IPv6 = cc.Bool("ipv6")
	cfg.NoOffload = cc.Bool("no-offload")
	cfg.Snaplen = cc.Int("snaplen")
	cfg.Out = cc.String("out")
	cfg.Force = cc.Bool("force")
	if v := cc.String("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("--timeout %q: want a duration such as 90s or 5m", v)
		}
		cfg.Timeout = d
	}
	cfg.Args = os.Args[1:]
	// A typed value outside the lab's range is refused before anything
	// is built (a fitted one, by --like, once the fit gave it).
	if err := cfg.CheckRange(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// vmRequests is the request/response preset's load with --vms.
const vmRequests = 200

func runExperiment(cc *cli.Context) error {
	if cc.NArg() > 0 {
		return usageError(fmt.Errorf("experiment: unexpected argument %q (flags only; see --help)", cc.Args().First()))
	}
	cfg, err := experimentConfig(cc)
	if err != nil {
		return usageError(fmt.Errorf("experiment: %w", err))
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("experiment: needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN to build namespaces): %w", os.ErrPermission)
	}
	ctx, stop := signal.NotifyContext(cc.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	stderr := cc.App.ErrWriter
	if stderr == nil {
		stderr = os.Stderr
	}
	if !cc.Bool("json") {
		cfg.Log = stderr
		if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			cfg.Progress = progressLine(stderr)
		}
	}
	if capture := cc.String("like"); capture != "" {
		if err := captureInput(capture); err != nil || capture == "-" {
			if err == nil {
				err = errors.New("a capture file, not standard input")
			}
			return usageError(fmt.Errorf("experiment: --like: %w", err))
		}
		lr, err := experiment.Like(ctx, capture, cfg, fit.Options{Flow: cc.String("flow")}, experiment.LikeOptions{Tries: cc.StringSlice("try"), Runs: cc.Int("runs"), Deadline: cc.Duration("deadline")})
		if err != nil {
			if errors.Is(err, experiment.ErrCapture) || errors.Is(err, fit.ErrNoConnection) {
				return usageError(fmt.Errorf("experiment: --like: %w", err))
			}
			return fmt.Errorf("experiment: --like: %w", err)
		}
		return jsonOrText(cc, lr, func(w io.Writer) error { return experiment.WriteLikeSummary(w, lr) })
	}
	res, err := experiment.Run(ctx, cfg)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("experiment: interrupted, lab removed: %w", err)
		case errors.Is(err, experiment.ErrOutOfRange):
			return usageError(fmt.Errorf("experiment: %w", err))
		case errors.Is(err, experiment.ErrNoKernelSupport):
			return &kindError{err: fmt.Errorf("experiment: %w", err), kind: ErrNoKernelSupport}
		}
		return fmt.Errorf("experiment: %w", err)
	}
	return jsonOrText(cc, res, func(w io.Writer) error { return experiment.WriteSummary(w, res) })
}

// progressLine prints curl's progress meter on one rewritten line: done,
// speed over the last interval and on average, time left.
func progressLine(w io.Writer) func(traffic.Progress) {
	mb := func(r units.Rate) string { return fmt.Sprintf("%.1f MB/s", r.BytesPerSecond()/1e6) }
	return func(p traffic.Progress) {
		pct := 0.0
		if p.Total > 0 {
			pct = 100 * float64(p.Bytes) / float64(p.Total)
		}
		eta := "--"
		if p.ETA > 0 {
			eta = fmt.Sprintf("%.1fs", p.ETA.Seconds())
		}
		fmt.Fprintf(w, "\r%5.1f%%  %9s of %-9s  now %-11s avg %-11s (%s)  ETA %-7s", pct, p.Bytes.Human(), p.Total.Human(),
			mb(p.Rate), mb(p.Average), p.Average.Human(), eta)
		if p.Done {
			fmt.Fprintln(w)
		}
	}
}

func runExperimentCleanup(cc *cli.Context) error {
	return runSubCleanup(cc, "experiment cleanup", experiment.Cleanup)
}

// runSubCleanup runs the cleanup of `wanlab experiment cleanup` or `wanlab
// bench cleanup` (name) and prints what it removed.
func runSubCleanup(cc *cli.Context, name string, cleanup func() ([]string, error)) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s: needs root: %w", name, os.ErrPermission)
	}
	removed, err := cleanup()
	for _, r := range removed {
		fmt.Fprintf(cc.App.Writer, "removed %s\n", r)
	}
	if len(removed) == 0 && err == nil {
		fmt.Fprintln(cc.App.Writer, "nothing to clean up")
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
