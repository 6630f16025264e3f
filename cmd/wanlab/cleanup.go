package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/wanlab/wanlab/bench"
	"github.com/wanlab/wanlab/experiment"
	"github.com/wanlab/wanlab/lab/kept"
	"github.com/wanlab/wanlab/proxy/control"
	"github.com/wanlab/wanlab/proxy/route"
	"github.com/wanlab/wanlab/shell"
)

func init() {
	register(&cli.Command{
		Name:      "cleanup",
		Usage:     "undo what any crashed or killed wanlab command left on the host",
		UsageText: "wanlab cleanup\n\nexample:\n   wanlab cleanup        # after a crash, kill -9 or reboot-less power loss of a wanlab command",
		Description: "Runs every command's own cleanup, in this order: `proxy cleanup` (policy rules,\n" +
			"routing tables, sysctls, tokens and endpoint files of proxies that are no longer running, from their journals in\n" +
			route.DefaultStateDir + "), `experiment cleanup` (namespaces, veths and state of dead labs, the VMs of\n" +
			"dead owners: qemu or linux.uml and its processes, TAPs left in namespaces, their memory in\n" +
			"/dev/shm, and the tuner's backups of namespaces that no longer exist), the shells' (their NAT tables,\n" +
			"IPv4 forwarding they held, namespaces and veths) and `bench cleanup` (the same for\n" +
			"benchmarks). What running commands hold is left alone. `wanlab tune revert` and `wanlab\n" +
			"kernel clear` undo changes that are meant to last until you undo them, so this does not.",
		Action: runCleanup,
	})
}

func runCleanup(cc *cli.Context) error {
	if cc.NArg() != 0 {
		return usageError(fmt.Errorf("cleanup: unexpected argument %q", cc.Args().First()))
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("cleanup: needs root: %w", os.ErrPermission)
	}
	w := cc.App.Writer
	var errs []error
	restored, err := route.Cleanup(route.DefaultStateDir)
	for _, p := range restored {
		fmt.Fprintf(w, "restored %s\n", p)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("proxy: %w", err))
	}
	creds, err := control.RemoveStaleCredentials(route.DefaultStateDir)
	if err != nil {
		errs = append(errs, fmt.Errorf("proxy: %w", err))
	}
	removed, err := experiment.Cleanup()
	if err != nil {
		errs = append(errs, fmt.Errorf("experiment: %w", err))
	}
	shells, err := shell.Cleanup()
	if err != nil {
		errs = append(errs, fmt.Errorf("shell: %w", err))
	}
	removed = append(removed, shells...)
	labs, err := kept.Cleanup()
	if err != nil {
		errs = append(errs, fmt.Errorf("lab: %w", err))
	}
	removed = append(removed, labs...)
	more, err := bench.Cleanup()
	if err != nil {
		errs = append(errs, fmt.Errorf("bench: %w", err))
	}
	removed = append(creds, removed...)
	for _, r := range append(removed, more...) {
		fmt.Fprintf(w, "removed %s\n", r)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	if len(restored)+len(removed)+len(more) == 0 {
		fmt.Fprintln(w, "nothing to clean up")
	}
	return nil
}
