package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/kernel"
	"github.com/wanlab/wanlab/tc/spec"
)

func init() {
	target := []cli.Flag{
		&cli.StringFlag{Name: "iface", Usage: "egress interface `IFACE` (required)"},
		&cli.StringFlag{Name: "netns", Usage: "configure inside the named network namespace `NS` (ip netns)"},
		&cli.StringFlag{Name: "state-dir", Value: kernel.DefaultStateDir, Usage: "where the replaced qdiscs are recorded for clear", Hidden: true},
	}
	register(&cli.Command{
		Name:  "kernel",
		Usage: "configure the same spec as the kernel's qdiscs (netem/tbf) to compare with the proxy",
		UsageText: "wanlab kernel apply --iface IFACE [--netns NS] SPEC\n" +
			"   wanlab kernel show --iface IFACE [--netns NS] [--stats] [--json]\n" +
			"   wanlab kernel clear --iface IFACE [--netns NS]\n\n" +
			"examples:\n" +
			"   wanlab kernel apply --iface eth1 'tbf rate 50mbit burst 50kb limit 500kb'\n" +
			"   wanlab kernel apply --iface eth1 'delay 100ms | tbf rate 50mbit burst 50kb limit 500kb'\n" +
			"   wanlab kernel apply --iface eth1 @tree.txt     (traffic classes: an htb tree)\n" +
			"   wanlab kernel show --iface eth1 --stats\n" +
			"   wanlab kernel clear --iface eth1",
		Description: "The kernel cross-check: the spec the proxy runs in userspace, set up as the\n" +
			"kernel's own root qdisc chain by netlink, as tc would (netem root with a tbf\n" +
			"child for 'delay 100ms | tbf ...', as 'tc qdisc add dev IFACE root handle 1:\n" +
			"netem ...' then 'parent 1:1 handle 10: tbf ...'). show reads the chain back\n" +
			"and prints it in the same canonical spec form; clear puts back the root qdisc\n" +
			"tree apply replaced (recorded in /run/wanlab), or the kernel's default.\n\n" +
			"A kind the kernel lacks is named and nothing is changed (exit 4), e.g. on a\n" +
			"kernel without sch_netem: 'kernel has no netem qdisc (sch_netem not\n" +
			"available): nothing changed'. So is a netem stage the kernel takes but keeps only in\n" +
			"part (apply reads it back), e.g. the seed, which sch_netem knows from Linux 6.6 on:\n" +
			"'kernel ignored netem seed 42 of stage 1 (...): nothing changed'. Needs root or\n" +
			"CAP_NET_ADMIN (exit 3).\n\n" +
			"Traffic classes (the same text `wanlab proxy` takes as a direction's spec:\n" +
			"htb/class/filter/leaf statements, tc class and filter commands, YAML, or @FILE)\n" +
			"are built as an htb root with one htb class per class, each leaf's netem/tbf\n" +
			"chain under it (handles 100:, 101:, ...) and one u32 filter per match and\n" +
			"address family. The whole tree is first built on the loopback of a scratch\n" +
			"namespace; every part the kernel lacks is named at once, e.g. 'kernel cannot\n" +
			"build this class tree: no netem qdisc (sch_netem) for leaf 1:3 netem delay\n" +
			"10ms: nothing changed' (exit 4). show prints the tree as a class set (one\n" +
			"not applied by wanlab too, read from the kernel, if it has no filters); clear\n" +
			"restores what was there before the first apply.",
		Subcommands: []*cli.Command{
			{
				Name:      "apply",
				Usage:     "replace IFACE's root qdisc with SPEC's netem/tbf chain",
				UsageText: "wanlab kernel apply --iface IFACE [--netns NS] SPEC",
				Flags:     target,
				Args:      true,
				Action: func(cc *cli.Context) error {
					t, err := kernelTarget(cc, "apply")
					if err != nil {
						return err
					}
					text := strings.Join(cc.Args().Slice(), " ")
					if strings.TrimSpace(text) == "" {
						return usageError(errors.New("kernel apply: SPEC is required (e.g. 'tbf rate 50mbit burst 50kb limit 500kb'; use clear to remove)"))
					}
					// @FILE is read here, then the text parsed once: a
					// pipeline or a class tree, whichever it holds.
					if text, err = specFileArg(text); err != nil {
						return usageError(fmt.Errorf("kernel apply: %w", err))
					}
					im, err := spec.ParseImpairment(text)
					if err != nil {
						return usageError(fmt.Errorf("kernel apply: %w", err))
					}
					printWarnings(cc.App.ErrWriter, append(engine.WarningsOfClasses(im.Classes), engine.DelayLimitWarningsOfClasses(im.Classes)...))
					if err := kernel.Apply(t, im); err != nil {
						return kernelError("apply", err)
					}
					// A tree is said to be applied (show prints it as a
					// class set); a chain is read back, as the kernel keeps it.
					if _, plain := im.Pipeline(); !plain {
						fmt.Fprintf(cc.App.Writer, "%s: htb tree applied: %s\n", t.Iface, im.Classes)
						return nil
					}
					got, err := kernel.Show(t)
					if err != nil {
						return kernelError("show", err)
					}
					fmt.Fprintln(cc.App.Writer, got)
					return nil
				},
			},
			{
				Name:  "show",
				Usage: "print IFACE's root qdisc chain as a spec, or its htb tree as a class set (nothing for the kernel's default)",
				UsageText: "wanlab kernel show --iface IFACE [--netns NS] [--stats] [--json]\n\n" +
					"   --stats adds each stage's counters as 'tc -s qdisc' shows them;\n" +
					"   --json prints {iface, netns, spec, stages: [{kind, handle, parent,\n" +
					"   counters: {bytes, packets, drops, overlimits, requeues, backlog_bytes,\n" +
					"   backlog_packets}}]}.",
				Flags: append(append([]cli.Flag{}, target...),
					&cli.BoolFlag{Name: "stats", Usage: "print each stage's counters"},
					&cli.BoolFlag{Name: "json", Usage: "print one JSON object"}),
				Action: runKernelShow,
			},
			{
				Name:      "clear",
				Usage:     "restore the root qdisc apply replaced",
				UsageText: "wanlab kernel clear --iface IFACE [--netns NS]",
				Flags:     target,
				Action: func(cc *cli.Context) error {
					t, err := kernelTarget(cc, "clear")
					if err != nil {
						return err
					}
					return kernelError("clear", kernel.Clear(t))
				},
			},
		},
	})
}

func kernelTarget(cc *cli.Context, verb string) (kernel.Target, error) {
	if cc.String("iface") == "" {
		return kernel.Target{}, usageError(fmt.Errorf("kernel %s: --iface is required", verb))
	}
	if verb != "apply" && cc.NArg() > 0 {
		return kernel.Target{}, usageError(fmt.Errorf("kernel %s: unexpected argument %q", verb, cc.Args().First()))
	}
	return kernel.Target{Iface: cc.String("iface"), Netns: cc.String("netns"), StateDir: cc.String("state-dir")}, nil
}

// kernelError names the subcommand in a kernel package error (exitCode
// maps it: a missing qdisc kind is 4, a missing interface 2).
func kernelError(verb string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("kernel %s: %w", verb, err)
}

func runKernelShow(cc *cli.Context) error {
	t, err := kernelTarget(cc, "show")
	if err != nil {
		return err
	}
	got, err := kernel.Show(t)
	if err != nil {
		return kernelError("show", err)
	}
	var stages []kernel.StageStats
	if cc.Bool("stats") || cc.Bool("json") {
		if stages, err = kernel.Stats(t); err != nil {
			return kernelError("show", err)
		}
	}
	w := cc.App.Writer
	if cc.Bool("json") {
		if stages == nil {
			stages = []kernel.StageStats{}
		}
		return writeJSON(w, struct {
			Iface  string              `json:"iface"`
			Netns  string              `json:"netns,omitempty"`
			Spec   string              `json:"spec"`
			Stages []kernel.StageStats `json:"stages"`
		}{t.Iface, t.Netns, got, stages})
	}
	if got == "" {
		fmt.Fprintf(cc.App.ErrWriter, "wanlab: %s has the kernel's default qdisc (no impairment)\n", t.Iface)
		return nil
	}
	fmt.Fprintln(w, got)
	for _, st := range stages {
		c := st.Counters
		what := st.Kind
		if st.Class {
			what = "class " + what
		}
		fmt.Fprintf(w, "  %s %s parent %s: sent %d bytes %d pkt (dropped %d, overlimits %d, requeues %d) backlog %db %dp\n",
			what, st.Handle, st.Parent, c.Bytes, c.Packets, c.Drops, c.Overlimits, c.Requeues, c.BacklogBytes, c.BacklogPackets)
	}
	return nil
}

// printWarnings writes one "warning: ..." line per spec warning (what a
// correlated netem probability really realizes); the spec was applied as
// written.
func printWarnings(w io.Writer, warnings []string) {
	for _, line := range warnings {
		fmt.Fprintf(w, "warning: %s\n", line)
	}
}
