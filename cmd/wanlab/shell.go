package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/proxy/tap"
	"github.com/wanlab/wanlab/shell"
	"github.com/wanlab/wanlab/tc/schedule"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// shellDirections names the shell's two directions as --impair and
// --schedule take them, in the proxy's order.
var shellDirections = shell.DirectionNames

func init() {
	register(&cli.Command{
		Name:  "shell",
		Usage: "run a command (or your shell) behind an impaired link",
		UsageText: "wanlab shell [--impair [up=|down=]SPEC]... [--schedule [up=|down=]FILE]... [--pcap FILE] [-- COMMAND [ARGS]]\n\n" +
			"examples:\n" +
			"   wanlab shell --impair 'delay 50ms'                      # your $SHELL, 100 ms round trips\n" +
			"   wanlab shell --impair 'down=delay 50ms | tbf rate 20mbit burst 32kb limit 200kb' \\\n" +
			"       --impair 'up=delay 50ms' -- iperf3 -c 192.0.2.10 -R\n" +
			"   wanlab shell --impair 'delay 25ms' -- wanlab shell --impair 'tbf rate 10mbit burst 32kb limit 100kb' -- curl URL\n" +
			"   wanlab proxy set 'down=delay 200ms'                     # inside: WANLAB_CONTROL names the link",
		Description: "Runs COMMAND, or $SHELL, in a new network namespace whose only way out is a wanlab\n" +
			"proxy applying SPEC: up= to traffic from the command, down= to traffic to it, both without\n" +
			"a direction. The proxy runs in a router namespace between the command and this host, which\n" +
			"routes and NATs (an nftables table of the shell's own) what the command sends, so this host\n" +
			"and every network it reaches stay reachable, names resolved by this host's\n" +
			"/etc/resolv.conf (a loopback nameserver, such as systemd-resolved's, is relayed through the\n" +
			"link). Shells nest: each adds its link. The proxy's control address is in\n" +
			"WANLAB_CONTROL, so `wanlab proxy set up=SPEC` and `wanlab proxy stats` change and read\n" +
			"the link live, inside the shell or outside with --control. COMMAND's exit status is the\n" +
			"shell's (128+N when signal N ended it). SIGTERM and SIGHUP are passed on to COMMAND, and\n" +
			"SIGINT when standard input is no terminal (at one, Ctrl-C reaches COMMAND directly).\n" +
			"Everything the shell made (namespaces, veths, routes, the NAT table, IPv4 forwarding,\n" +
			"held with other shells and restored by the last) goes when COMMAND exits;\n" +
			"after a crash or kill -9, `wanlab cleanup` removes it. Needs root (docs/own-software.md\n" +
			"says why there is no rootless mode)." + scheduleHelp,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "impair", Usage: "`[up=|down=]SPEC` for traffic from (up) or to (down) the command, both without a direction; repeatable"},
			&cli.StringSliceFlag{Name: "schedule", Usage: "`[up=|down=]FILE`: step that direction's spec as the schedule FILE says"},
			&cli.StringFlag{Name: "pcap", Usage: "write a pcapng of what entered and left the proxy's engine to `FILE`"},
			&cli.BoolFlag{Name: "force", Usage: "replace an existing --pcap FILE"},
			&cli.StringFlag{Name: "pcap-limit", Value: "1gb", Usage: "stop recording when the pcapng reaches this `SIZE`"},
			&cli.Uint64Flag{Name: "seed", Usage: "seed every stage's random generator"},
			&cli.StringFlag{Name: "resolv-conf", Value: shell.DefaultResolvConf, Hidden: true, Usage: "the resolver configuration whose loopback nameservers are relayed (tests)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "do not print the link's description on standard error"},
		},
		Args:   true,
		Action: runShell,
	})
}

// shellConfig parses the flags into the shell's config and the command.
func shellConfig(cc *cli.Context) (shell.Config, []string, error) {
	var cfg shell.Config
	texts, err := perDirection("--impair", shellDirections, cc.StringSlice("impair"), func(v, text string) (string, error) {
		t, err := specFileArg(text)
		if err != nil {
			return "", fmt.Errorf("--impair %q: %w", v, err)
		}
		return t, nil
	})
	if err != nil {
		return cfg, nil, usageError(fmt.Errorf("shell: %w", err))
	}
	for i, p := range []*spec.Impairment{&cfg.Down, &cfg.Up} {
		if *p, err = spec.ParseImpairment(texts[i]); err != nil {
			return cfg, nil, usageError(fmt.Errorf("shell: --impair for %s: %w", shellDirections[i], err))
		}
	}
	scheds, err := directionSchedules(shellDirections, cc.StringSlice("schedule"))
	if err != nil {
		return cfg, nil, usageError(fmt.Errorf("shell: %w", err))
	}
	cfg.DownSchedule, cfg.UpSchedule = scheds[0], scheds[1]
	cfg.Seed, cfg.HasSeed = cc.Uint64("seed"), cc.IsSet("seed")
	cfg.ResolvConf = cc.String("resolv-conf")
	args, err := commandArgs("shell", cc.Args().Slice())
	return cfg, args, err
}

// directionSchedules reads --schedule values ("[DIRECTION=]FILE") into
// the directions they name.
func directionSchedules(dirs [2]string, values []string) ([2]*schedule.Schedule, error) {
	return perDirection("--schedule", dirs, values, func(_, path string) (*schedule.Schedule, error) {
		s, err := readSchedule(strings.TrimSpace(path))
		if err != nil {
			return nil, fmt.Errorf("--schedule: %w", err)
		}
		return s, nil
	})
}

// commandArgs is the command to run: args with its program looked up in
// PATH, or the user's $SHELL when args is empty.
func commandArgs(what string, args []string) ([]string, error) {
	if len(args) == 0 {
		sh := os.Getenv("SHELL")
		if sh == "" {
			sh = "/bin/sh"
		}
		args = []string{sh}
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		return nil, usageError(fmt.Errorf("%s: command %q: %w", what, args[0], errors.Unwrap(err)))
	}
	return append([]string{path}, args[1:]...), nil
}

func runShell(cc *cli.Context) error {
	cfg, args, err := shellConfig(cc)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("shell: needs root (it makes network namespaces, a veth and a NAT table on this host): "+
			"run `sudo wanlab shell ...`; there is no rootless mode (docs/own-software.md): %w", os.ErrPermission)
	}
	limit, err := units.ParseSize(cc.String("pcap-limit"))
	if err != nil {
		return usageError(fmt.Errorf("shell: --pcap-limit: %w", err))
	}
	// Caught from here on, so that no signal ends the process between
	// building the link and removing it.
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigc)
	signal.Ignore(syscall.SIGPIPE)
	if path := cc.String("pcap"); path != "" {
		f, err := hostfile.CreateOutput(path, 0o600, cc.Bool("force"))
		if err != nil {
			return fmt.Errorf("shell: --pcap: %w", err)
		}
		defer f.Close()
		t, err := tap.New(f, limit, shellDirections[:])
		if err != nil {
			return fmt.Errorf("shell: --pcap %s: %w", path, err)
		}
		defer t.Close()
		cfg.Tap = t
	}
	sh, err := shell.Start(cc.Context, cfg)
	if err != nil {
		return fmt.Errorf("shell: %w", err)
	}
	code, runErr := runInShell(sh, args, sigc, cc.App.ErrWriter, cc.Bool("quiet"))
	if err := sh.Close(); err != nil {
		return fmt.Errorf("shell: removing the link: %w (run wanlab cleanup)", err)
	}
	if runErr != nil {
		return fmt.Errorf("shell: %w", runErr)
	}
	if code != 0 {
		return cli.Exit("", code)
	}
	return nil
}

// runInShell runs the command in the shell, passing on signals, and
// returns its exit status as a shell reports it.
func runInShell(sh *shell.Shell, args []string, sigc <-chan os.Signal, errw io.Writer, quiet bool) (int, error) {
	if !quiet {
		specs := sh.Proxy().Specs()
		desc := func(i int) string {
			if s := spec.Abbrev(specs[sh.Ifaces[i]]); s != "" {
				return s
			}
			return "(none)"
		}
		fmt.Fprintf(errw, "wanlab shell %s: up %s; down %s; %s=%s\n", sh.Lab.ID, desc(1), desc(0), shell.EnvControl, sh.Control)
	}
	return runForwarding(args, sh.StartCommand, sigc)
}

// runForwarding starts the command args with start (which puts it in a
// namespace), passes the signals of sigc on to it, and returns its exit
// status as a shell reports it (128+N for signal N).
func runForwarding(args []string, start func(*exec.Cmd) error, sigc <-chan os.Signal) (int, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := start(cmd); err != nil {
		return 0, fmt.Errorf("command %s: %w", args[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// At a terminal, Ctrl-C's SIGINT reaches the command itself (it is in
	// the terminal's foreground process group, as this process is); a
	// second copy would make an iperf3 or a curl quit without its report.
	_, termErr := unix.IoctlGetTermios(int(os.Stdin.Fd()), unix.TCGETS)
	atTerminal := termErr == nil
	for {
		select {
		case sig := <-sigc:
			if sig == os.Interrupt && atTerminal {
				continue
			}
			_ = cmd.Process.Signal(sig)
		case err := <-done:
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					return 128 + int(ws.Signal()), nil
				}
				return ee.ExitCode(), nil
			}
			if err != nil {
				return 0, fmt.Errorf("command %s: %w", args[0], err)
			}
			return 0, nil
		}
	}
}
