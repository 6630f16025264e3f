package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/proxy"
	"github.com/wanlab/wanlab/proxy/control"
	"github.com/wanlab/wanlab/proxy/cpulatency"
	"github.com/wanlab/wanlab/proxy/device"
	"github.com/wanlab/wanlab/proxy/metrics"
	"github.com/wanlab/wanlab/proxy/route"
	"github.com/wanlab/wanlab/proxy/tap"
	"github.com/wanlab/wanlab/tc/schedule"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

func init() {
	register(&cli.Command{
		Name:  "proxy",
		Usage: "impair the traffic a router forwards between two interfaces, in userspace",
		UsageText: "wanlab proxy --iface A --iface B [--impair [IFACE=]SPEC]... [--schedule [IFACE=]FILE]...\n" +
			"             [--backend offload|water]\n" +
			"             [--control ADDR] [--control-group GROUP] [--metrics ADDR] [--pcap FILE [--force]] [--seed N] [--netns NS]\n" +
			"wanlab proxy set [--control ADDR] [--token-file FILE] [IFACE=]SPEC\n" +
			"wanlab proxy stats [--control ADDR] [--token-file FILE] [--json]\n" +
			"wanlab proxy cleanup\n\n" +
			"examples:\n" +
			"   wanlab proxy --iface ens3 --iface ens4 --impair 'delay 50ms'\n" +
			"   wanlab proxy --iface ens3 --iface ens4 \\\n" +
			"       --impair 'ens4=delay 50ms loss 1% | tbf rate 100mbit burst 64kb limit 1mb' \\\n" +
			"       --impair 'ens3=delay 50ms' --metrics 127.0.0.1:9464 --pcap /tmp/proxy.pcapng\n" +
			"   wanlab proxy set 'ens4=delay 100ms | tbf rate 50mbit burst 50kb limit 500kb'\n" +
			"   wanlab proxy --iface ens3 --iface ens4 --impair ens4=@tree.txt   # traffic classes, htb tree\n" +
			"   wanlab proxy --iface ens3 --iface ens4 --impair 'ens4=delay 20ms | trace lte.down' --impair 'ens3=delay 20ms | trace lte.up'\n" +
			"   wanlab proxy --iface ens3 --iface ens4 --schedule ens4=spike.sched   # step the spec over time\n" +
			"   wanlab proxy stats\n" +
			"   wanlab proxy cleanup        # after a crash or kill -9",
		Description: "Run on the router between two hosts (or inside its namespace with --netns). Every packet\n" +
			"the router forwards from A to B is steered by policy routing through a TUN device, impaired\n" +
			"by the spec of its egress interface B and handed back to the kernel at its departure time;\n" +
			"likewise from B to A. Packets for the router itself, ARP and neighbour discovery stay in the\n" +
			"kernel. IFACE= names the EGRESS interface, as with tc on that interface; a spec without it\n" +
			"applies to both directions. SPEC is tc netem/tbf syntax, stages joined by '|'.\n\n" +
			"Setup is netlink only and journalled in /run/wanlab before each change; SIGINT, SIGTERM and\n" +
			"SIGHUP restore the host exactly; after a crash or SIGKILL run `wanlab proxy cleanup`. A second\n" +
			"proxy on the same interfaces is refused. The control API (default unix:/run/wanlab/A-B.sock)\n" +
			"serves `wanlab proxy set` and `wanlab proxy stats` to root and the proxy's user (and\n" +
			"--control-group's members): the socket checks the caller's credentials; a loopback TCP\n" +
			"address needs the bearer token the proxy writes to /run/wanlab/A-B.token (0600), beside\n" +
			"A-B.control (the literal address bound and the proxy's pid, which clients check). @FILE\n" +
			"is read by the command line only, never by the running proxy. --metrics serves read-only\n" +
			"Prometheus /metrics (loopback unless ADDR names a host; every interface only with\n" +
			"--metrics-public); --pcap records each packet as\n" +
			"it entered and left the engine (drops marked).\n\n" +
			"Backends: offload (default; wireguard-go TUN with GSO/GRO and batches) or water (one\n" +
			"packet per system call). Exit codes: 2 bad flags or spec, 3 no CAP_NET_ADMIN, 4 no TUN.\n\n" +
			"\"trace FILE [once]\" replays a mahimahi mm-link capacity trace (see wanlab trace); the\n" +
			"command line reads FILE and sends its opportunities inline." + scheduleHelp,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "iface", EnvVars: []string{"WANLAB_IFACES"}, Usage: "an interface the proxy sits between; give exactly two"},
			&cli.StringSliceFlag{Name: "impair", Usage: "`[IFACE=]SPEC` for traffic leaving through IFACE (both directions without IFACE=); repeatable; without it, WANLAB_IMPAIR and WANLAB_IMPAIR_<IFACE> are read"},
			&cli.StringSliceFlag{Name: "schedule", EnvVars: []string{"WANLAB_SCHEDULE"}, Usage: "`[IFACE=]FILE`: step the spec of traffic leaving through IFACE (both without IFACE=) as the schedule FILE says, from the start; --impair holds before its first step; proxy set on that direction ends it"},
			&cli.StringFlag{Name: "backend", Value: device.Offload, Usage: "TUN backend: offload or water"},
			&cli.IntFlag{Name: "queues", EnvVars: []string{"WANLAB_QUEUES"}, Usage: "queues per TUN, each with its own reader (multi-queue TUN); `N` 0 means one per two CPUs (the readers of both directions together one per CPU)", Value: 0},
			&cli.StringFlag{Name: "control", EnvVars: []string{"WANLAB_CONTROL"}, Usage: "control API address: unix:/path or 127.0.0.1:port (default unix:/run/wanlab/A-B.sock); TCP needs the token in /run/wanlab/A-B.token"},
			&cli.StringFlag{Name: "control-group", EnvVars: []string{"WANLAB_CONTROL_GROUP"}, Usage: "also let the members of `GROUP` (name or gid) use the control socket"},
			&cli.StringFlag{Name: "metrics", EnvVars: []string{"WANLAB_METRICS"}, Usage: "serve read-only Prometheus /metrics on `ADDR` (host:port; :PORT binds 127.0.0.1; every interface, e.g. 0.0.0.0:PORT, only with --metrics-public)"},
			&cli.BoolFlag{Name: "metrics-public", EnvVars: []string{"WANLAB_METRICS_PUBLIC"}, Usage: "let --metrics listen on every interface (0.0.0.0, ::, [] or an empty host): anyone on the network can then read the counters"},
			&cli.StringSliceFlag{Name: "label", EnvVars: []string{"WANLAB_LABELS"}, Usage: "`NAME=VALUE[,NAME=VALUE]` added to every metric (lab=l1,link=r1-r2), so one Prometheus scrapes many proxies; repeatable"},
			&cli.StringFlag{Name: "pcap", EnvVars: []string{"WANLAB_PCAP"}, Usage: "write a pcapng of what entered and left the engine to `FILE`"},
			&cli.BoolFlag{Name: "force", EnvVars: []string{"WANLAB_FORCE"}, Usage: "replace an existing --pcap FILE (a new file renamed over it, never written through)"},
			&cli.StringFlag{Name: "pcap-limit", Value: "1gb", Usage: "stop recording when the pcapng reaches this `SIZE` (tc size syntax)"},
			queueMemoryFlag(),
			&cli.Uint64Flag{Name: "seed", EnvVars: []string{"WANLAB_SEED"}, Usage: "seed every stage's random generator (default: random, printed)"},
			&cli.StringFlag{Name: "netns", Usage: "the interfaces live in the named network namespace `NS`"},
			&cli.DurationFlag{Name: "wait-ifaces", EnvVars: []string{"WANLAB_WAIT_IFACES"}, Usage: "wait up to `DURATION` for both interfaces to exist and be up before setting up (a container whose links are added after it starts)"},
			&cli.BoolFlag{Name: "realtime", Usage: "run the release loops under SCHED_FIFO for tighter timing on a busy host"},
			&cli.DurationFlag{Name: "release-spin", Value: 50 * time.Microsecond, Usage: "spin this long before each departure for µs precision; 0 sleeps on the timer only (less CPU at high packet rates)"},
			&cli.StringFlag{Name: "low-latency", Value: string(cpulatency.Auto), Usage: "keep idle CPUs quick to wake through /dev/cpu_dma_latency: `MODE` auto (while packets flowed in the last second), on (always), off. Wakes cost up to 150 µs on VMs whose idle vCPUs halt; the price is idle CPUs polling"},
			&cli.StringFlag{Name: "state-dir", Value: route.DefaultStateDir, Usage: "where state, lock and socket files live", Hidden: true},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a Go CPU profile of the run to `FILE` (go tool pprof)", Hidden: true},
		},
		Action: runProxy,
		Subcommands: []*cli.Command{
			proxySetCommand(),
			proxyStatsCommand(),
			{
				Name:      "cleanup",
				Usage:     "restore the host after a proxy that crashed or was killed with SIGKILL",
				UsageText: "wanlab proxy cleanup\n\nexample:\n   wanlab proxy cleanup",
				Description: "Undoes every change recorded in the state files of proxies that are no longer\n" +
					"running (policy rules, routing tables, sysctls), exactly as they were. Files of running\n" +
					"proxies are left alone.",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "state-dir", Value: route.DefaultStateDir, Usage: "where state files live", Hidden: true},
				},
				Action: runProxyCleanup,
			},
		},
	})
}

// parseImpair turns --impair values into one spec text per interface, with
// @FILE read here. A value is "IFACE=SPEC" (spec.SplitDirectional), IFACE
// one of the interfaces, or a SPEC for both. Later values override earlier
// ones for the same direction.
func parseImpair(ifaces [2]string, values []string) ([2]string, error) {
	return perDirection("--impair", ifaces, values, func(v, text string) (string, error) {
		t, err := specFileArg(text)
		if err != nil {
			return "", fmt.Errorf("--impair %q: %w", v, err)
		}
		return t, nil
	})
}

// perDirection reads the values of a directional flag ("[IFACE=]VALUE",
// --impair and --schedule), each with read, into the directions they name
// (no IFACE: both).
func perDirection[T any](flag string, ifaces [2]string, values []string, read func(v, text string) (T, error)) ([2]T, error) {
	var out [2]T
	for _, v := range values {
		name, text, err := spec.SplitDirectional(v)
		if err != nil {
			return out, fmt.Errorf("%s %q: %w", flag, v, err)
		}
		x, err := read(v, text)
		if err != nil {
			return out, err
		}
		switch name {
		case "":
			out[0], out[1] = x, x
		case ifaces[0]:
			out[0] = x
		case ifaces[1]:
			out[1] = x
		default:
			return out, fmt.Errorf("%s %q: %q is not one of the interfaces (%s, %s)", flag, v, name, ifaces[0], ifaces[1])
		}
	}
	return out, nil
}

func proxyConfig(cc *cli.Context) (proxy.Config, error) {
	var cfg proxy.Config
	if cc.NArg() != 0 {
		return cfg, usageError(fmt.Errorf("proxy: unexpected argument %q (specs go in --impair)", cc.Args().First()))
	}
	var ifaces []string
	for _, v := range cc.StringSlice("iface") {
		// WANLAB_IFACES=eth1,eth2 (no interface name holds a comma).
		ifaces = append(ifaces, strings.Split(v, ",")...)
	}
	if len(ifaces) != 2 || ifaces[0] == ifaces[1] {
		return cfg, usageError(fmt.Errorf("proxy: need --iface twice with two different interfaces, got %d (%s)", len(ifaces), strings.Join(ifaces, ", ")))
	}
	cfg.Ifaces = [2]string{ifaces[0], ifaces[1]}
	var err error
	values := cc.StringSlice("impair")
	if !cc.IsSet("impair") {
		if values, err = impairFromEnv(cfg.Ifaces, os.Environ()); err != nil {
			return cfg, usageError(fmt.Errorf("proxy: %w", err))
		}
	}
	texts, err := parseImpair(cfg.Ifaces, values)
	if err != nil {
		return cfg, usageError(err)
	}
	// Parsed here, once, before anything touches the host.
	for i, text := range texts {
		if cfg.Specs[i], err = spec.ParseImpairment(text); err != nil {
			return cfg, usageError(fmt.Errorf("proxy: --impair for %s: %w", cfg.Ifaces[i], err))
		}
	}
	cfg.Schedules, err = perDirection("--schedule", cfg.Ifaces, cc.StringSlice("schedule"), func(_, path string) (*schedule.Schedule, error) {
		sched, err := readSchedule(strings.TrimSpace(path))
		if err != nil {
			return nil, fmt.Errorf("--schedule: %w", err)
		}
		return sched, nil
	})
	if err != nil {
		return cfg, usageError(fmt.Errorf("proxy: %w", err))
	}
	cfg.Backend = cc.String("backend")
	if cfg.Backend != device.Offload && cfg.Backend != device.Water {
		return cfg, usageError(fmt.Errorf("proxy: --backend %q: want offload or water", cfg.Backend))
	}
	cfg.Queues = cc.Int("queues")
	if cfg.Queues < 0 || cfg.Queues > device.MaxQueues {
		return cfg, usageError(fmt.Errorf("proxy: --queues %d: want 0 (one per two CPUs) to %d", cfg.Queues, device.MaxQueues))
	}
	cfg.Seed, cfg.HasSeed = cc.Uint64("seed"), cc.IsSet("seed")
	cfg.Netns = cc.String("netns")
	cfg.StateDir = cc.String("state-dir")
	cfg.Realtime = cc.Bool("realtime")
	if cfg.LowLatency, err = cpulatency.ParseMode(cc.String("low-latency")); err != nil {
		return cfg, usageError(fmt.Errorf("proxy: --low-latency: %w", err))
	}
	cfg.ReleaseSpin = cc.Duration("release-spin")
	if cfg.ReleaseSpin < 0 {
		return cfg, usageError(fmt.Errorf("proxy: --release-spin %v: must not be negative", cfg.ReleaseSpin))
	}
	if cfg.ReleaseSpin == 0 {
		cfg.ReleaseSpin = -1 // the proxy's "no spin"
	}
	if cfg.QueueMemory, err = queueMemory(cc); err != nil {
		return cfg, usageError(fmt.Errorf("proxy: %w", err))
	}
	return cfg, nil
}

func runProxy(cc *cli.Context) error {
	cfg, err := proxyConfig(cc)
	if err != nil {
		return err
	}
	limit, err := units.ParseSize(cc.String("pcap-limit"))
	if err != nil {
		return usageError(fmt.Errorf("proxy: --pcap-limit: %w", err))
	}
	// Every signal that would end the proxy ends it through the closers, so
	// that its routing, token and endpoint files go with it. SIGPIPE (a
	// closed stdout) then fails the write instead of killing the process.
	ctx, stop := signal.NotifyContext(cc.Context, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	stopProfile, err := startCPUProfile(cc.String("cpuprofile"))
	if err != nil {
		return fmt.Errorf("proxy: --cpuprofile: %w", err)
	}
	defer stopProfile()

	var closers []func() error // run in reverse on the way out
	started := false           // the proxy ran (its capture is kept)
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	if path := cc.String("pcap"); path != "" {
		// A capture holds payloads: 0600, and never through a link.
		f, err := hostfile.CreateOutput(path, 0o600, cc.Bool("force"))
		if err != nil {
			return fmt.Errorf("proxy: --pcap: %w", err)
		}
		// A proxy that never started leaves no capture behind.
		closers = append(closers, func() error {
			if !started {
				os.Remove(path)
			}
			return nil
		}, f.Close)
		t, err := tap.New(f, limit, cfg.Ifaces[:])
		if err != nil {
			return fmt.Errorf("proxy: --pcap %s: %w", path, err)
		}
		closers = append(closers, t.Close)
		cfg.Tap = t
	}

	addr := cc.String("control")
	if addr == "" {
		addr = control.DefaultAddr(cfg.StateDir, cfg.Ifaces)
	}
	if err := control.CheckAddr(addr); err != nil {
		return usageError(fmt.Errorf("proxy: --control: %w", err))
	}
	acc, err := controlAccess(cc.String("control-group"))
	if err != nil {
		return usageError(fmt.Errorf("proxy: --control-group: %w", err))
	}
	metricsAddr := loopbackByDefault(cc.String("metrics"))
	labels, err := metrics.ParseLabels(cc.StringSlice("label"))
	if err != nil {
		return usageError(fmt.Errorf("proxy: --label: %w", err))
	}
	if labels != nil && metricsAddr == "" {
		return usageError(errors.New("proxy: --label needs --metrics"))
	}
	if metricsAddr != "" {
		if err := metrics.CheckAddr(metricsAddr, cc.Bool("metrics-public")); err != nil {
			return usageError(fmt.Errorf("proxy: --metrics %w", err))
		}
	}

	if err := proxy.Preflight(); err != nil {
		return proxyError(err) // before any wait: a missing privilege is said at once
	}
	if within := cc.Duration("wait-ifaces"); within > 0 {
		if err := waitIfaces(ctx, cfg.Netns, cfg.Ifaces, within); err != nil {
			return usageError(fmt.Errorf("proxy: %w", err))
		}
	}
	p, err := proxy.Start(ctx, cfg)
	if err != nil {
		return proxyError(err)
	}
	closers = append(closers, p.Close)
	started = true
	// What it starts with, taken before the control API can change it.
	specs, warnings := p.Specs(), p.Warnings()

	l, err := control.Listen(addr, acc)
	if err != nil {
		return fmt.Errorf("proxy: --control: %w", err)
	}
	// The token is on disk before anyone can be answered: a client that
	// reaches the API can find it. The endpoint file names the literal
	// address bound (localhost resolved once, here) and this process.
	ep, err := control.SelfEndpoint(l)
	if err != nil {
		l.Close()
		return fmt.Errorf("proxy: %w", err)
	}
	addr = ep.Address
	removeCreds, err := control.WriteCredentials(cfg.StateDir, cfg.Ifaces, ep, acc.Token)
	if err != nil {
		l.Close()
		return fmt.Errorf("proxy: %w", err)
	}
	closers = append(closers, removeCreds)
	srv, err := control.Serve(l, p, acc)
	if err != nil {
		l.Close()
		return fmt.Errorf("proxy: --control: %w", err)
	}
	closers = append(closers, srv.Close)
	served := []servedAddress{{"control", addr, "token " + control.TokenPath(cfg.StateDir, cfg.Ifaces)}}
	if metricsAddr != "" {
		errw := cc.App.ErrWriter
		ms, err := metrics.Serve(metricsAddr, p.Stats, metrics.Options{Labels: labels,
			Warn: func(line string) { fmt.Fprintf(errw, "wanlab proxy: warning: %s\n", line) }})
		if err != nil {
			return fmt.Errorf("proxy: --metrics: %w", err)
		}
		closers = append(closers, ms.Close)
		served = append(served, servedAddress{"metrics", "http://" + ms.Addr().String() + "/metrics", "read-only, no token"})
	}

	w := cc.App.Writer
	tuns := p.TUNs()
	fmt.Fprintf(w, "wanlab proxy: %s <-> %s through %s, %s (%s backend), seed %d\n",
		cfg.Ifaces[0], cfg.Ifaces[1], tuns[0], tuns[1], cfg.Backend, p.Seed())
	fmt.Fprintf(w, "  %s per TUN, a reader each\n", queuesText(p.Queues()))
	for _, iface := range cfg.Ifaces {
		s := spec.Abbrev(specs[iface])
		if s == "" {
			s = "(none)"
		}
		fmt.Fprintf(w, "  leaving through %s: %s\n", iface, s)
		for _, line := range warnings[iface] {
			fmt.Fprintf(w, "  warning: %s: %s\n", iface, line)
		}
	}
	if open, _ := p.LowLatency(); open {
		fmt.Fprintf(w, "  low latency: %s (%s)\n", cfg.LowLatency, cpulatency.DevicePath)
	} else if cfg.LowLatency != cpulatency.Off {
		fmt.Fprintf(w, "  low latency: unavailable (cannot open %s)\n", cpulatency.DevicePath)
	}
	writeServed(w, served)

	select {
	case <-ctx.Done():
	case <-p.Done():
	}
	// Stop forwarding first; the deferred closers then stop the servers,
	// flush the tap and close its file.
	if err := p.Close(); err != nil {
		return fmt.Errorf("proxy: stopping: %w", err)
	}
	fmt.Fprintln(w, "wanlab proxy: stopped, routing restored")
	return nil
}

// servedAddress is one address a running proxy answers on, for its
// banner.
type servedAddress struct{ what, addr, note string }

// writeServed ends the proxy's banner: every address it serves, one a
// line, then how to stop it.
func writeServed(w io.Writer, served []servedAddress) {
	for _, s := range served {
		fmt.Fprintf(w, "  %s %s (%s)\n", s.what, s.addr, s.note)
	}
	fmt.Fprintln(w, "  stop with Ctrl-C")
}

// queuesText says how many queues each TUN has.
func queuesText(n int) string {
	if n == 1 {
		return "1 queue"
	}
	return strconv.Itoa(n) + " queues"
}

// proxyError names the command in a setup failure, with the privilege it
// lacked (exitCode maps it: a missing interface 2, permissions 3, no TUN
// driver 4).
func proxyError(err error) error {
	var named *host.PrivilegeError
	if errors.Is(err, os.ErrPermission) && !errors.As(err, &named) {
		return fmt.Errorf("proxy: %w (needs root or CAP_NET_ADMIN)", err)
	}
	return fmt.Errorf("proxy: %w", err)
}

func runProxyCleanup(cc *cli.Context) error {
	undone, err := route.Cleanup(cc.String("state-dir"))
	w := cc.App.Writer
	for _, p := range undone {
		fmt.Fprintf(w, "restored %s\n", p)
	}
	removed, cerr := control.RemoveStaleCredentials(cc.String("state-dir"))
	for _, p := range removed {
		fmt.Fprintf(w, "removed %s\n", p)
	}
	if err = errors.Join(err, cerr); err != nil {
		return fmt.Errorf("proxy cleanup: %w", err)
	}
	if len(undone)+len(removed) == 0 {
		fmt.Fprintln(w, "nothing to clean up")
	}
	return nil
}

// controlAccess is who may use the control API: a fresh token (for
// loopback TCP) and the optional control group (a name or a gid).
func controlAccess(group string) (control.Access, error) {
	tok, err := control.NewToken()
	if err != nil {
		return control.Access{}, err
	}
	acc := control.Access{Token: tok}
	if group == "" {
		return acc, nil
	}
	gid, err := strconv.Atoi(group)
	if err != nil {
		g, lerr := user.LookupGroup(group)
		if lerr != nil {
			return acc, fmt.Errorf("%q: %w", group, lerr)
		}
		if gid, err = strconv.Atoi(g.Gid); err != nil {
			return acc, fmt.Errorf("%q: gid %q: %w", group, g.Gid, err)
		}
	}
	if gid < 0 {
		return acc, fmt.Errorf("%q: not a group", group)
	}
	acc.Group, acc.HasGroup = gid, true
	return acc, nil
}

// loopbackByDefault turns ":PORT" into "127.0.0.1:PORT": metrics are
// served beyond this host only when the address names a host.
func loopbackByDefault(addr string) string {
	if strings.HasPrefix(addr, ":") {
		return "127.0.0.1" + addr
	}
	return addr
}
