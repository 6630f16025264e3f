package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/experiment"
	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/capture"
	"github.com/wanlab/wanlab/lab/kept"
	"github.com/wanlab/wanlab/tc/schedule"
	"github.com/wanlab/wanlab/tc/spec"
)

// labReady is the line a detached `lab up` prints once the lab is up; the
// `lab up` that started it waits for it.
const labReady = "wanlab lab: ready"

// labDetachedEnv marks the detached `lab up` process.
const labDetachedEnv = "WANLAB_LAB_DETACHED"

// labDownWithin bounds how long `lab down` waits for the lab's process.
const labDownWithin = 30 * time.Second

func labNameFlag() cli.Flag {
	return &cli.StringFlag{Name: "name", Usage: "the lab's `NAME` (default: the one lab up; lab up: " + kept.DefaultName + ")"}
}

func init() {
	register(&cli.Command{
		Name:  "lab",
		Usage: "keep the experiment's client, router and server namespaces up for your own programs",
		UsageText: "wanlab lab up [--name NAME] [--preset NAME] [--impair [to-client=|to-server=]SPEC]... [--foreground]\n" +
			"wanlab lab exec [--name NAME] client|router|server [-- COMMAND [ARGS]]\n" +
			"wanlab lab capture [--name NAME] [--host client|router|server] [--duration D] FILE\n" +
			"wanlab lab down [--name NAME]\n\n" +
			"example:\n" +
			"   sudo wanlab lab up --impair 'to-client=delay 50ms | tbf rate 20mbit burst 32kb limit 200kb' --impair 'to-server=delay 50ms'\n" +
			"   sudo wanlab lab exec server -- iperf3 -s -D\n" +
			"   sudo wanlab lab exec client -- iperf3 -c 10.201.2.2 -R\n" +
			"   sudo wanlab lab exec client -- wanlab proxy set 'to-client=delay 100ms'\n" +
			"   sudo wanlab lab down",
		Description: "The experiment's three namespaces (client 10.201.1.2, router, server 10.201.2.2), kept up\n" +
			"under a name with a wanlab proxy on the router, until `lab down`. `lab exec` runs your programs\n" +
			"in them with WANLAB_CONTROL set, so `wanlab proxy set|stats` change and read the link live;\n" +
			"`lab capture` records a host's link. Everything goes with `lab down`, and after a crash with\n" +
			"`wanlab cleanup`.",
		Subcommands: []*cli.Command{
			{
				Name:      "up",
				Usage:     "build a lab and keep it up (in the background unless --foreground)",
				UsageText: "wanlab lab up [--name NAME] [--preset NAME] [--impair [to-client=|to-server=]SPEC]... [--schedule [to-client=|to-server=]FILE]... [--foreground]",
				Flags: []cli.Flag{
					labNameFlag(),
					&cli.StringFlag{Name: "preset", Usage: "start from the impairment and host settings of the experiment preset `NAME`"},
					&cli.StringSliceFlag{Name: "impair", Usage: "`[to-client=|to-server=]SPEC`; repeatable; both directions without one"},
					&cli.StringSliceFlag{Name: "schedule", Usage: "`[to-client=|to-server=]FILE`: step that direction's spec as FILE says"},
					&cli.BoolFlag{Name: "foreground", Usage: "stay in the foreground until SIGINT or SIGTERM"},
				},
				Action: runLabUp,
			},
			{
				Name:      "exec",
				Usage:     "run a command in one of a lab's namespaces",
				UsageText: "wanlab lab exec [--name NAME] client|router|server [-- COMMAND [ARGS]]",
				Flags:     []cli.Flag{labNameFlag()},
				Args:      true,
				Action:    runLabExec,
			},
			{
				Name:      "capture",
				Usage:     "record a lab host's link to a pcapng file",
				UsageText: "wanlab lab capture [--name NAME] [--host client|router|server] [--duration D] [--filter tcp|all] [--force] FILE",
				Flags: []cli.Flag{
					labNameFlag(),
					&cli.StringFlag{Name: "host", Value: lab.RoleClient, Usage: "whose link: client, server, or router (its client-side link)"},
					&cli.DurationFlag{Name: "duration", Usage: "stop after `D` (default: at SIGINT or SIGTERM)"},
					&cli.StringFlag{Name: "filter", Value: "tcp", Usage: "tcp or all"},
					&cli.BoolFlag{Name: "force", Usage: "replace an existing FILE"},
				},
				Args:   true,
				Action: runLabCapture,
			},
			{
				Name:      "down",
				Usage:     "stop a lab and remove everything it made",
				UsageText: "wanlab lab down [--name NAME]",
				Flags:     []cli.Flag{labNameFlag()},
				Action:    runLabDown,
			},
		},
	})
}

func labConfig(cc *cli.Context) (kept.Config, error) {
	cfg := kept.Config{Name: cc.String("name")}
	if cfg.Name != "" && !lab.ValidID(cfg.Name) {
		return cfg, usageError(fmt.Errorf("lab up: --name %q: want 1-8 characters of [0-9a-z]", cfg.Name))
	}
	base := experiment.Config{}
	if p := cc.String("preset"); p != "" {
		var err error
		if base, err = experiment.Preset(p); err != nil {
			return cfg, usageError(fmt.Errorf("lab up: --preset: %w", err))
		}
	}
	dirs := kept.DirectionNames
	var texts [2]string
	for i, d := range dirs {
		texts[i] = base.Impair[d]
	}
	set, err := perDirection("--impair", dirs, cc.StringSlice("impair"), func(v, text string) (*string, error) {
		t, err := specFileArg(text)
		if err != nil {
			return nil, fmt.Errorf("--impair %q: %w", v, err)
		}
		return &t, nil
	})
	if err != nil {
		return cfg, usageError(fmt.Errorf("lab up: %w", err))
	}
	for i := range dirs {
		if set[i] != nil {
			texts[i] = *set[i]
		}
		if cfg.Specs[i], err = spec.ParseImpairment(texts[i]); err != nil {
			return cfg, usageError(fmt.Errorf("lab up: --impair for %s: %w", dirs[i], err))
		}
	}
	scheds, err := base.Schedules()
	if err != nil {
		return cfg, usageError(fmt.Errorf("lab up: --preset: %w", err))
	}
	cfg.Schedules = [2]*schedule.Schedule{scheds[dirs[0]], scheds[dirs[1]]}
	more, err := directionSchedules(dirs, cc.StringSlice("schedule"))
	if err != nil {
		return cfg, usageError(fmt.Errorf("lab up: %w", err))
	}
	for i := range more {
		if more[i] != nil {
			cfg.Schedules[i] = more[i]
		}
	}
	cfg.ClientSysctls, cfg.ServerSysctls, cfg.NoOffload = base.ClientSysctls, base.ServerSysctls, base.NoOffload
	return cfg, nil
}

func runLabUp(cc *cli.Context) error {
	if cc.NArg() != 0 {
		return usageError(fmt.Errorf("lab up: unexpected argument %q", cc.Args().First()))
	}
	cfg, err := labConfig(cc)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("lab up: needs root (network namespaces, veths, a TUN): run `sudo wanlab lab up ...`: %w", os.ErrPermission)
	}
	if !cc.Bool("foreground") {
		return startDetachedLab(cc)
	}
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigc)
	k, err := kept.Start(cc.Context, cfg)
	if err != nil {
		return fmt.Errorf("lab up: %w", err)
	}
	describeLab(cc.App.Writer, k.Info)
	if os.Getenv(labDetachedEnv) != "" {
		fmt.Fprintln(cc.App.Writer, labReady)
		// Nobody reads our output from here on.
		if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
			unix.Dup2(int(null.Fd()), 1)
			unix.Dup2(int(null.Fd()), 2)
			null.Close()
		}
	}
	<-sigc
	if err := k.Close(); err != nil {
		return fmt.Errorf("lab down: %w (run wanlab cleanup)", err)
	}
	return nil
}

// startDetachedLab starts `lab up --foreground` in a session of its own
// and returns once it reported the lab up, passing on its output; if it
// failed instead, its error and exit status.
func startDetachedLab(cc *cli.Context) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("lab up: %w", err)
	}
	args := append([]string{"lab", "up", "--foreground"}, os.Args[3:]...)
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), labDetachedEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("lab up: %w", err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return fmt.Errorf("lab up: %w", err)
	}
	defer r.Close()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if sc.Text() == labReady {
			_ = cmd.Process.Release()
			return nil
		}
		fmt.Fprintln(cc.App.Writer, sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return cli.Exit("", ee.ExitCode())
		}
		return fmt.Errorf("lab up: %w", err)
	}
	return errors.New("lab up: the lab's process ended before the lab was up")
}

func describeLab(w io.Writer, i kept.Info) {
	fmt.Fprintf(w, "lab %s up (pid %d): client %s, server %s\n", i.Name, i.PID, i.Addrs[lab.RoleClient], i.Addrs[lab.RoleServer])
	fmt.Fprintf(w, "  %s=%s\n", "WANLAB_CONTROL", i.Control)
	fmt.Fprintf(w, "  wanlab lab exec --name %s client|router|server -- COMMAND; wanlab lab down --name %s\n", i.Name, i.Name)
}

// labNamespace finds the namespace of a role of the lab named by --name.
func labNamespace(cc *cli.Context, what, role string) (kept.Info, string, error) {
	i, err := kept.Find(cc.String("name"))
	if err != nil {
		return i, "", fmt.Errorf("%s: %w", what, err)
	}
	ns, ok := i.Namespaces[role]
	if !ok {
		roles := make([]string, 0, len(i.Namespaces))
		for r := range i.Namespaces {
			roles = append(roles, r)
		}
		sort.Strings(roles)
		return i, "", usageError(fmt.Errorf("%s: host %q: want one of %s", what, role, strings.Join(roles, ", ")))
	}
	return i, ns, nil
}

func runLabExec(cc *cli.Context) error {
	if cc.NArg() == 0 {
		return usageError(errors.New("lab exec: want client, router or server, then -- COMMAND"))
	}
	i, ns, err := labNamespace(cc, "lab exec", cc.Args().First())
	if err != nil {
		return err
	}
	tail := cc.Args().Tail()
	if len(tail) > 0 && tail[0] == "--" {
		tail = tail[1:]
	}
	args, err := commandArgs("lab exec", tail)
	if err != nil {
		return err
	}
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigc)
	code, err := runForwarding(args, func(cmd *exec.Cmd) error {
		cmd.Env = append(os.Environ(), "WANLAB_CONTROL="+i.Control)
		return nsrun.DoNamed(ns, cmd.Start)
	}, sigc)
	if err != nil {
		return fmt.Errorf("lab exec: %w", err)
	}
	if code != 0 {
		return cli.Exit("", code)
	}
	return nil
}

func runLabCapture(cc *cli.Context) error {
	if cc.NArg() != 1 {
		return usageError(errors.New("lab capture: want one FILE"))
	}
	role := cc.String("host")
	i, ns, err := labNamespace(cc, "lab capture", role)
	if err != nil {
		return err
	}
	link := i.Links[role]
	if role == lab.RoleRouter {
		link = "wl" + i.Name + "-rc"
	}
	filter, err := capture.ParseFilter(cc.String("filter"))
	if err != nil {
		return usageError(fmt.Errorf("lab capture: --filter: %w", err))
	}
	h, err := nsrun.Open(ns)
	if err != nil {
		return fmt.Errorf("lab capture: %w", err)
	}
	defer h.Close()
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigc)
	c, err := capture.StartFile(h, link, cc.Args().First(), capture.Config{Filter: filter, Replace: cc.Bool("force"), Comment: ns})
	if err != nil {
		return fmt.Errorf("lab capture: %w", err)
	}
	var stop <-chan time.Time
	if d := cc.Duration("duration"); d > 0 {
		stop = time.After(d)
	}
	select {
	case <-sigc:
	case <-stop:
	case <-c.Done():
	}
	st, err := c.Stop()
	if err != nil {
		return fmt.Errorf("lab capture: %w", err)
	}
	fmt.Fprintf(cc.App.Writer, "lab capture: %s of %s: %d packets written to %s (%d seen, %d dropped by the kernel)\n",
		link, ns, st.Packets, cc.Args().First(), st.KernelPackets, st.KernelDrops)
	return nil
}

func runLabDown(cc *cli.Context) error {
	if cc.NArg() != 0 {
		return usageError(fmt.Errorf("lab down: unexpected argument %q", cc.Args().First()))
	}
	i, err := kept.Find(cc.String("name"))
	if err != nil {
		return fmt.Errorf("lab down: %w", err)
	}
	if i.Alive() {
		if err := syscall.Kill(i.PID, syscall.SIGTERM); err != nil {
			return fmt.Errorf("lab down: lab %s (pid %d): %w", i.Name, i.PID, err)
		}
		deadline := time.Now().Add(labDownWithin)
		for i.Alive() {
			if time.Now().After(deadline) {
				return fmt.Errorf("lab down: lab %s (pid %d) still running %v after SIGTERM", i.Name, i.PID, labDownWithin)
			}
			time.Sleep(10 * time.Millisecond) // polling interval: another process's exit has no event here
		}
	}
	// What a lab whose process died left.
	if _, err := lab.Cleanup(); err != nil {
		return fmt.Errorf("lab down: %w", err)
	}
	if _, err := kept.Cleanup(); err != nil {
		return fmt.Errorf("lab down: %w", err)
	}
	fmt.Fprintf(cc.App.Writer, "lab %s down\n", i.Name)
	return nil
}
