package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/kernel"
	"github.com/wanlab/wanlab/tc/spec"
)

// kernelClassesHelp is appended to kernel's description.
const kernelClassesHelp = "\n\nTraffic classes (the same text `wanlab proxy` takes as a direction's spec:\n" +
	"htb/class/filter/leaf statements, tc class and filter commands, YAML, or @FILE)\n" +
	"are built as an htb root with one htb class per class, each leaf's netem/tbf\n" +
	"chain under it (handles 100:, 101:, ...) and one u32 filter per match and\n" +
	"address family. The whole tree is first built on the loopback of a scratch\n" +
	"namespace; every part the kernel lacks is named at once, e.g. 'kernel cannot\n" +
	"build this class tree: no netem qdisc (sch_netem) for leaf 1:3 netem delay\n" +
	"10ms: nothing changed' (exit 4). clear restores what was there before."

func kernelApplyClasses(cc *cli.Context, t kernel.Target, cs *spec.Classes) error {
	printWarnings(cc.App.ErrWriter, engine.WarningsOfClasses(cs))
	if err := kernel.ApplyClasses(t, cs); err != nil {
		return kernelError("apply", err)
	}
	fmt.Fprintf(cc.App.Writer, "%s: htb tree applied: %s\n", t.Iface, cs)
	return nil
}
