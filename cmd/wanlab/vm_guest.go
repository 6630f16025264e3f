package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/wanlab/wanlab/lab/vm/pair"
)

// vmGuestCommands run inside a VM, started by the host over the agent:
// the traffic of `wanlab experiment --vms` and the sysctls of its guests.
var vmGuestCommands = []*cli.Command{
	{
		Name:      "serve",
		Usage:     "serve generated files over HTTP in the background and print the server's PID (inside a VM)",
		UsageText: "wanlab vm serve [--foreground] CONFIG-JSON",
		Hidden:    true,
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "foreground", Usage: "serve until SIGTERM instead of starting a background server"}},
		Args:      true,
		Action: oneArg("serve", func(cc *cli.Context, cfg string) error {
			if cc.Bool("foreground") {
				return pair.GuestServeForeground(cc.Context, cfg)
			}
			return pair.GuestServeStart(cc.Context, cfg, cc.App.Writer)
		}),
	},
	{
		Name:      "download",
		Usage:     "download a generated file and print the result with both sockets' TCP_INFO as JSON (inside a VM)",
		UsageText: "wanlab vm download CONFIG-JSON",
		Hidden:    true,
		Args:      true,
		Action: oneArg("download", func(cc *cli.Context, cfg string) error {
			return pair.GuestDownloadRun(cc.Context, cfg, cc.App.Writer, cc.App.ErrWriter)
		}),
	},
	{
		Name:      "rr",
		Usage:     "run a request/response load and print its result as JSON (inside a VM)",
		UsageText: "wanlab vm rr CONFIG-JSON",
		Hidden:    true,
		Args:      true,
		Action: oneArg("rr", func(cc *cli.Context, cfg string) error {
			return pair.GuestRRRun(cc.Context, cfg, cc.App.Writer)
		}),
	},
	{
		Name:      "stop",
		Usage:     "stop a process started by serve and wait for its end (inside a VM)",
		UsageText: "wanlab vm stop PID",
		Hidden:    true,
		Args:      true,
		Action: oneArg("stop", func(cc *cli.Context, arg string) error {
			pid, err := strconv.Atoi(arg)
			if err != nil || pid <= 1 {
				return usageError(fmt.Errorf("vm stop: PID %q: want a number above 1", arg))
			}
			return pair.GuestStop(pid)
		}),
	},
	{
		Name:      "sysctl",
		Usage:     "print sysctls as JSON, then write the --set ones (inside a VM)",
		UsageText: "wanlab vm sysctl [--set KEY=VALUE]... [KEY...]",
		Hidden:    true,
		Flags:     []cli.Flag{&cli.StringSliceFlag{Name: "set", Usage: "`KEY=VALUE` to write after reading"}},
		Args:      true,
		Action: func(cc *cli.Context) error {
			return pair.GuestSysctl(cc.Args().Slice(), cc.StringSlice("set"), cc.App.Writer)
		},
	},
	{
		Name:      "offload",
		Usage:     "print an interface's TSO, GSO and GRO as JSON, then set the --set ones (inside a VM)",
		UsageText: "wanlab vm offload [--set tso|gso|gro=on|off]... IFACE",
		Hidden:    true,
		Flags:     []cli.Flag{&cli.StringSliceFlag{Name: "set", Usage: "`NAME=on|off` to set after reading"}},
		Args:      true,
		Action: oneArg("offload", func(cc *cli.Context, iface string) error {
			return pair.GuestOffload(iface, cc.StringSlice("set"), cc.App.Writer)
		}),
	},
}

// oneArg is the action of a guest command that takes one argument (its
// JSON configuration, or a PID): run gets it.
func oneArg(verb string, run func(cc *cli.Context, arg string) error) cli.ActionFunc {
	return func(cc *cli.Context) error {
		if cc.NArg() != 1 {
			return usageError(errors.New("vm " + verb + ": want one argument"))
		}
		return run(cc, cc.Args().First())
	}
}
