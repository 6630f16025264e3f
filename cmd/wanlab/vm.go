package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/wanlab/wanlab/lab/vm"
)

func init() {
	cache := &cli.StringFlag{Name: "cache-dir", Value: vm.DefaultCacheDir, Usage: "where prepare keeps the kernel and initramfs", Hidden: true}
	boot := []cli.Flag{
		cache,
		&cli.IntFlag{Name: "mem", Value: 256, Usage: "guest memory in `MB`"},
		engineFlag(),
		&cli.StringFlag{Name: "binary", Usage: "wanlab `FILE` to run inside (default: this one)", Hidden: true},
	}
	register(&cli.Command{
		Name:  "vm",
		Usage: "a reference Linux (with sch_netem) in qemu or User-Mode Linux, to cross-check the kernel path where this host lacks it",
		UsageText: "wanlab vm prepare [--engine auto|kvm|uml|tcg]\n" +
			"   wanlab vm run [--mem M] [--netns NS --tap NAME] -- COMMAND [ARG...]\n" +
			"   wanlab vm info\n\n" +
			"examples:\n" +
			"   sudo wanlab vm prepare\n" +
			"   sudo wanlab vm run -- tc qdisc add dev eth0 root netem delay 20ms loss 1%\n" +
			"   sudo wanlab vm run -- sh -c 'wanlab kernel apply --iface eth0 \"delay 100ms\" && /usr/sbin/tc qdisc show dev eth0'",
		Description: "Engines (--engine): kvm (qemu with KVM), uml (Debian's user-mode-linux: Linux 6.1 as a\n" +
			"process of this host, the host's / as its read-only root, for hosts without KVM),\n" +
			"tcg (qemu's emulation); auto takes KVM when its probe boots, else UML when it can run\n" +
			"(ptrace allowed), else tcg, and says which and why.\n\n" +
			"prepare installs what the engine needs with apt-get (qemu-system-x86 and busybox-static\n" +
			"for kvm and tcg, user-mode-linux and busybox-static for uml, all of them for auto),\n" +
			"fetches Debian's linux-image-6.1.0-*-cloud-amd64 (the newest apt lists) with apt-get\n" +
			"download into /var/cache/wanlab/vm, unpacks it and builds an initramfs of\n" +
			"busybox-static, iproute2's ip and tc and the qdisc modules (kvm, tcg, auto); nothing\n" +
			"is installed into /boot. It is the only command that downloads anything.\n\n" +
			"run boots the VM with this wanlab binary inside (best built\n" +
			"static, CGO_ENABLED=0; a dynamic one takes this host's shared libraries along), runs\n" +
			"COMMAND there with wanlab on its PATH, prints its\n" +
			"output and exits with its exit code. The guest's eth0 is a virtio-net NIC on a TAP\n" +
			"named NAME in the namespace NS (which you create and configure), or connected to\n" +
			"nothing (under UML: the vector driver's NIC, with the TAP's TSO and GSO off).\n" +
			"Inside, call tc by its full path /usr/sbin/tc in 'sh -c' scripts: busybox's shell\n" +
			"prefers its own applets, and busybox's tc cannot add qdiscs.\n\n" +
			"info boots the VM and prints its kernel release, engine, boot time and qdiscs.\n" +
			"Needs root (exit 3). A VM left by a crash (qemu, linux.uml and its processes, TAPs,\n" +
			"its memory in /dev/shm) is removed by 'wanlab cleanup'.",
		Subcommands: append([]*cli.Command{
			{
				Name:      "prepare",
				Usage:     "install the engine's packages, fetch and unpack the kernel package, build the initramfs (idempotent)",
				UsageText: "wanlab vm prepare [--engine auto|kvm|uml|tcg]",
				Flags:     []cli.Flag{cache, engineFlag()},
				Action:    runVMPrepare,
			},
			{
				Name:      "run",
				Usage:     "boot the VM, run COMMAND inside, exit with its exit code",
				UsageText: "wanlab vm run [--mem M] [--netns NS --tap NAME] -- COMMAND [ARG...]",
				Flags: append(append([]cli.Flag{}, boot...),
					&cli.StringFlag{Name: "netns", Usage: "put the NIC on a TAP in the named namespace `NS`"},
					&cli.StringFlag{Name: "tap", Usage: "name of that TAP device `NAME`"},
					&cli.StringFlag{Name: "addr", Usage: "configure `PREFIX` (e.g. 10.99.0.2/24) on the guest's eth0"},
					&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "do not print the boot line"}),
				Args:   true,
				Action: runVMRun,
			},
			{
				Name:      "info",
				Usage:     "boot the VM and print its kernel, engine, boot time and qdiscs",
				UsageText: "wanlab vm info",
				Flags:     boot,
				Action:    runVMInfo,
			},
			{
				Name:            "uml-exec",
				Usage:           "start linux.uml with the ptrace filter it needs here (run by the host side of a UML VM)",
				Hidden:          true,
				SkipFlagParsing: true,
				Action: func(cc *cli.Context) error {
					args := cc.Args().Slice()
					if len(args) > 0 && args[0] == "--" {
						args = args[1:]
					}
					return vm.ExecUML(args)
				},
			},
			{
				Name:   "agent",
				Usage:  "the guest side (run by the VM's /init)",
				Hidden: true,
				// The kernel hands init the words of its command line it
				// does not know as arguments: the agent reads its own
				// settings from /proc/cmdline and takes whatever comes.
				Args:   true,
				Action: func(*cli.Context) error { return vm.Agent() },
			},
		}, vmGuestCommands...),
	})
}

func vmNeedsRoot(verb string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("vm %s: needs root (qemu, TAP devices, /var/cache/wanlab): %w", verb, os.ErrPermission)
	}
	return nil
}

func runVMPrepare(cc *cli.Context) error {
	if err := vmNeedsRoot("prepare"); err != nil {
		return err
	}
	engine, err := vm.ParseEngine(cc.String("engine"))
	if err != nil {
		return usageError(fmt.Errorf("vm prepare: --%w", err))
	}
	ctx, stop := signal.NotifyContext(cc.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := vm.InstallEngine(ctx, engine, cc.App.ErrWriter); err != nil {
		return fmt.Errorf("vm prepare: %w", err)
	}
	if engine != vm.EngineUML {
		if _, err := vm.Prepare(ctx, cc.String("cache-dir"), cc.App.ErrWriter); err != nil {
			return err
		}
	}
	switch engine {
	case vm.EngineAuto:
		e, reason, err := vm.ChooseEngine(ctx, cc.String("cache-dir"))
		if err != nil {
			return fmt.Errorf("vm prepare: %w", err)
		}
		fmt.Fprintf(cc.App.ErrWriter, "vm prepare: engine %s (%s)\n", e, reason)
	case vm.EngineUML:
		if err := vm.UMLUsable(); err != nil {
			return fmt.Errorf("vm prepare: uml: %w", err)
		}
		rel, _ := vm.UMLRelease()
		fmt.Fprintf(cc.App.ErrWriter, "vm prepare: engine uml (Linux %s), ready\n", rel)
	default:
		fmt.Fprintf(cc.App.ErrWriter, "vm prepare: engine %s, ready\n", engine)
	}
	return nil
}

// engineFlag is --engine, for the commands that boot VMs.
func engineFlag() cli.Flag {
	return &cli.StringFlag{Name: "engine", Aliases: []string{"accel"}, Value: "auto",
		Usage: "what runs the VMs: `auto` (KVM when its probe boots, else UML when it can run, else tcg), kvm, uml or tcg"}
}

// vmEngine reads --engine.
func vmEngine(cc *cli.Context, verb string) (vm.Engine, error) {
	e, err := vm.ParseEngine(cc.String("engine"))
	if err != nil {
		return "", usageError(fmt.Errorf("%s: --%w", verb, err))
	}
	return e, nil
}

func engineWords(e vm.Engine) string {
	switch e {
	case vm.EngineKVM:
		return "kvm"
	case vm.EngineUML:
		return "uml (User-Mode Linux)"
	}
	return "tcg (emulation)"
}

func vmConfig(cc *cli.Context, verb string) (vm.Config, error) {
	cfg := vm.Config{CacheDir: cc.String("cache-dir"), MemoryMB: cc.Int("mem"), Binary: cc.String("binary")}
	var err error
	if cfg.Engine, err = vmEngine(cc, "vm "+verb); err != nil {
		return cfg, err
	}
	if cfg.MemoryMB < 64 {
		return cfg, usageError(fmt.Errorf("vm %s: --mem %d: want at least 64 (MB)", verb, cfg.MemoryMB))
	}
	return cfg, nil
}

// bootVM boots a VM with Ctrl-C stopping it and prints the one boot line
// (with auto, first the engine chosen and why).
func bootVM(ctx context.Context, cc *cli.Context, cfg vm.Config, verb string, quiet bool) (*vm.VM, error) {
	if cfg.Engine == vm.EngineAuto {
		e, reason, err := vm.ChooseEngine(ctx, cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("vm %s: %w", verb, err)
		}
		cfg.Engine = e
		if !quiet {
			fmt.Fprintf(cc.App.ErrWriter, "wanlab vm: engine %s\n", reason)
		}
	}
	v, err := vm.Boot(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("vm %s: %w", verb, err)
	}
	if !quiet {
		fmt.Fprintf(cc.App.ErrWriter, "wanlab vm: %s booted under %s in %.1f s\n", v.Hello.Release, engineWords(v.Engine), v.BootTime.Seconds())
	}
	return v, nil
}

func runVMRun(cc *cli.Context) error {
	if err := vmNeedsRoot("run"); err != nil {
		return err
	}
	argv := cc.Args().Slice()
	if len(argv) == 0 {
		return usageError(errors.New("vm run: COMMAND is required (wanlab vm run -- COMMAND [ARG...])"))
	}
	cfg, err := vmConfig(cc, "run")
	if err != nil {
		return err
	}
	if (cc.String("netns") == "") != (cc.String("tap") == "") {
		return usageError(errors.New("vm run: --netns and --tap go together"))
	}
	if cc.String("tap") != "" {
		nic := vm.NIC{Tap: cc.String("tap")}
		if a := cc.String("addr"); a != "" {
			if nic.Addr, err = netip.ParsePrefix(a); err != nil {
				return usageError(fmt.Errorf("vm run: --addr %q: %w", a, err))
			}
		}
		cfg.Netns, cfg.NICs = cc.String("netns"), []vm.NIC{nic}
	} else if cc.String("addr") != "" {
		return usageError(errors.New("vm run: --addr needs --netns and --tap"))
	}
	ctx, stop := signal.NotifyContext(cc.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	v, err := bootVM(ctx, cc, cfg, "run", cc.Bool("quiet"))
	if err != nil {
		return err
	}
	defer v.Close()
	stdout, stderr := cc.App.Writer, cc.App.ErrWriter
	code, err := v.Stream(ctx, stdout, stderr, argv...)
	if cerr := v.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("vm run: interrupted, VM stopped: %w", ctx.Err())
		}
		return fmt.Errorf("vm run: %w", err)
	}
	if code != 0 {
		return cli.Exit("", code)
	}
	return nil
}

func runVMInfo(cc *cli.Context) error {
	if err := vmNeedsRoot("info"); err != nil {
		return err
	}
	cfg, err := vmConfig(cc, "info")
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cc.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	reason := "chosen by --engine"
	if cfg.Engine == vm.EngineAuto {
		if cfg.Engine, reason, err = vm.ChooseEngine(ctx, cfg.CacheDir); err != nil {
			return fmt.Errorf("vm info: %w", err)
		}
	}
	v, err := bootVM(ctx, cc, cfg, "info", true)
	if err != nil {
		return err
	}
	defer v.Close()
	p, _ := vm.LoadPrepared(cfg.CacheDir)
	printVMInfo(cc.App.Writer, v, p, reason)
	return v.Close()
}

func printVMInfo(w io.Writer, v *vm.VM, p *vm.Prepared, reason string) {
	fmt.Fprintf(w, "kernel:      %s", v.Hello.Release)
	if p != nil && v.Engine != vm.EngineUML {
		fmt.Fprintf(w, " (%s %s)", p.Package, p.Version)
	}
	if v.Engine == vm.EngineUML {
		fmt.Fprint(w, " (Debian's user-mode-linux)")
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "engine:      %s", engineWords(v.Engine))
	if reason != "" {
		fmt.Fprintf(w, " (%s)", reason)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "boot time:   %.2f s to the agent (guest uptime %.2f s)\n", v.BootTime.Seconds(), v.Hello.Uptime)
	fmt.Fprintf(w, "qdiscs:      %s\n", strings.Join(v.Hello.Qdiscs, " "))
}
