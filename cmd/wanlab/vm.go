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
		&cli.StringFlag{Name: "accel", Value: "auto", Usage: "auto (KVM when a probe boot works), kvm or tcg"},
		&cli.StringFlag{Name: "binary", Usage: "wanlab `FILE` to run inside (default: this one)", Hidden: true},
	}
	register(&cli.Command{
		Name:  "vm",
		Usage: "a reference Linux (with sch_netem) in qemu, to cross-check the kernel path where this host lacks it",
		UsageText: "wanlab vm prepare\n" +
			"   wanlab vm run [--mem M] [--netns NS --tap NAME] -- COMMAND [ARG...]\n" +
			"   wanlab vm info\n\n" +
			"examples:\n" +
			"   sudo wanlab vm prepare\n" +
			"   sudo wanlab vm run -- tc qdisc add dev eth0 root netem delay 20ms loss 1%\n" +
			"   sudo wanlab vm run -- sh -c 'wanlab kernel apply --iface eth0 \"delay 100ms\" && /usr/sbin/tc qdisc show dev eth0'",
		Description: "prepare fetches Debian's linux-image-6.1.0-*-cloud-amd64 (the newest apt lists) with\n" +
			"apt-get download into /var/cache/wanlab/vm, unpacks it and builds an initramfs of\n" +
			"busybox-static, iproute2's ip and tc and the qdisc modules; nothing is installed\n" +
			"into /boot. It is the only command that downloads anything.\n\n" +
			"run boots that kernel in qemu-system-x86 with this wanlab binary inside (best built\n" +
			"static, CGO_ENABLED=0; a dynamic one takes this host's shared libraries along), runs\n" +
			"COMMAND there with wanlab on its PATH, prints its\n" +
			"output and exits with its exit code. The guest's eth0 is a virtio-net NIC on a TAP\n" +
			"named NAME in the namespace NS (which you create and configure), or connected to\n" +
			"nothing. KVM is used when a probe boot under it works, emulation otherwise.\n" +
			"Inside, call tc by its full path /usr/sbin/tc in 'sh -c' scripts: busybox's shell\n" +
			"prefers its own applets, and busybox's tc cannot add qdiscs.\n\n" +
			"info boots the VM and prints its kernel release, accelerator, boot time and qdiscs.\n" +
			"Needs root (exit 3). A VM left by a crash is stopped by 'wanlab experiment cleanup'.",
		Subcommands: append([]*cli.Command{
			{
				Name:      "prepare",
				Usage:     "fetch and unpack the kernel package, build the initramfs (idempotent)",
				UsageText: "wanlab vm prepare",
				Flags:     []cli.Flag{cache},
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
				Action: runVMRun,
			},
			{
				Name:      "info",
				Usage:     "boot the VM and print its kernel, accelerator, boot time and qdiscs",
				UsageText: "wanlab vm info",
				Flags:     boot,
				Action:    runVMInfo,
			},
			{
				Name:   "agent",
				Usage:  "the guest side (run by the VM's /init)",
				Hidden: true,
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
	ctx, stop := signal.NotifyContext(cc.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := vm.Prepare(ctx, cc.String("cache-dir"), cc.App.ErrWriter); err != nil {
		return err
	}
	accel, reason, err := vm.ProbeAccel(ctx, cc.String("cache-dir"))
	if err != nil {
		return fmt.Errorf("vm prepare: %w", err)
	}
	fmt.Fprintf(cc.App.ErrWriter, "vm prepare: accelerator %s (%s)\n", accelName(accel), reason)
	return nil
}

func accelName(a vm.Accel) string {
	if a == vm.AccelKVM {
		return "kvm"
	}
	return "tcg (emulation)"
}

func vmConfig(cc *cli.Context, verb string) (vm.Config, error) {
	cfg := vm.Config{CacheDir: cc.String("cache-dir"), MemoryMB: cc.Int("mem"), Binary: cc.String("binary")}
	switch a := cc.String("accel"); a {
	case "auto", "":
	case "kvm", "tcg":
		cfg.Accel = vm.Accel(a)
	default:
		return cfg, usageError(fmt.Errorf("vm %s: --accel %q: want auto, kvm or tcg", verb, a))
	}
	if cfg.MemoryMB < 64 {
		return cfg, usageError(fmt.Errorf("vm %s: --mem %d: want at least 64 (MB)", verb, cfg.MemoryMB))
	}
	return cfg, nil
}

// bootVM boots a VM with Ctrl-C stopping it and prints the one boot line.
func bootVM(ctx context.Context, cc *cli.Context, cfg vm.Config, verb string, quiet bool) (*vm.VM, error) {
	v, err := vm.Boot(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("vm %s: %w", verb, err)
	}
	if !quiet {
		fmt.Fprintf(cc.App.ErrWriter, "wanlab vm: %s booted under %s in %.1f s\n", v.Hello.Release, accelName(v.Accel), v.BootTime.Seconds())
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
	_, reason, err := vm.ProbeAccel(ctx, cfg.CacheDir)
	if err != nil {
		return fmt.Errorf("vm info: %w", err)
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
	if p != nil {
		fmt.Fprintf(w, " (%s %s)", p.Package, p.Version)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "accelerator: %s", accelName(v.Accel))
	if v.Accel != vm.AccelKVM && reason != "" {
		fmt.Fprintf(w, " (%s)", reason)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "boot time:   %.2f s to the agent (guest uptime %.2f s)\n", v.BootTime.Seconds(), v.Hello.Uptime)
	fmt.Fprintf(w, "qdiscs:      %s\n", strings.Join(v.Hello.Qdiscs, " "))
}
