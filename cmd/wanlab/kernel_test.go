package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/internal/testenv"
)

// kernelCmd runs "wanlab kernel ..." and returns its output and exit code.
func kernelCmd(t *testing.T, args ...string) (string, int) {
	t.Helper()
	app := newApp()
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	err := runCommandLine(context.Background(), app, append([]string{"wanlab", "kernel"}, args...))
	if err != nil {
		out.WriteString("error: " + err.Error() + "\n")
		return out.String(), exitCode(err)
	}
	return out.String(), exitOK
}

func TestKernelCommand(t *testing.T) {
	name, ns := testenv.NetNS(t)
	err := nsrun.Do(ns, func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "kc0"}, PeerName: "kc1"}); err != nil {
			return err
		}
		l, err := netlink.LinkByName("kc0")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	})
	if err != nil {
		t.Fatal(err)
	}
	target := []string{"--iface", "kc0", "--netns", name, "--state-dir", t.TempDir()}
	for _, c := range []struct {
		args []string
		out  string
		code int
	}{
		{[]string{"apply"}, "error: kernel apply: SPEC is required", exitUsage},
		{[]string{"apply", "tbf rate 50mbit burst 50kb"}, "error: kernel apply: tbf: limit or latency is required", exitUsage},
		{[]string{"apply", "tbf", "rate", "50mbit", "burst", "50kb", "limit", "500kb"}, "tbf rate 50mbit burst 50kb limit 500kb\n", exitOK},
		{[]string{"show"}, "tbf rate 50mbit burst 50kb limit 500kb\n", exitOK},
		{[]string{"show", "--stats"}, "tbf rate 50mbit burst 50kb limit 500kb\n  tbf 1:0 parent root: sent 0 bytes 0 pkt (dropped 0, overlimits 0, requeues 0) backlog 0b 0p\n", exitOK},
		{[]string{"apply", "delay 100ms | tbf rate 50mbit burst 50kb limit 500kb"},
			"error: kernel apply: kernel has no netem qdisc (sch_netem not available): nothing changed\n", exitNoKernel},
		{[]string{"show"}, "tbf rate 50mbit burst 50kb limit 500kb\n", exitOK},
		{[]string{"apply", "tbf rate 10mbit burst 10kb latency 50ms peakrate 20mbit mtu 1500"},
			"tbf rate 10mbit burst 10kb latency 50ms peakrate 20mbit mtu 1500b\n", exitOK},
		{[]string{"clear"}, "", exitOK},
		{[]string{"show"}, "wanlab: kc0 has the kernel's default qdisc (no impairment)\n", exitOK},
	} {
		args := append([]string{c.args[0]}, target...)
		args = append(args, c.args[1:]...)
		out, code := kernelCmd(t, args...)
		if code != c.code || !strings.HasPrefix(out, c.out) || (c.code == exitOK && out != c.out) {
			if c.code == exitNoKernel && code == exitOK {
				t.Skip("this kernel has netem")
			}
			t.Errorf("wanlab kernel %s: exit %d %q, want exit %d %q", strings.Join(c.args, " "), code, out, c.code, c.out)
		}
	}
	// A correlated probability that realizes far less: warned, and the
	// spec applied as written (here the kernel may lack netem).
	out, code := kernelCmd(t, append([]string{"apply"}, append(target, "loss 10% 50%")...)...)
	if !strings.HasPrefix(out, "warning: loss 10% 50% realizes about 0.108%") || (code != exitOK && code != exitNoKernel) {
		t.Errorf("kernel apply 'loss 10%% 50%%': exit %d %q, want the realized-loss warning first", code, out)
	}
	// @FILE holding a pipeline (not a class tree) is read on the command
	// line and applied as the pipeline it is.
	f := filepath.Join(t.TempDir(), "spec")
	if err := os.WriteFile(f, []byte("tbf rate 20mbit burst 20kb limit 200kb\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := kernelCmd(t, append([]string{"apply"}, append(target, "@"+f)...)...); code != exitOK || out != "tbf rate 20mbit burst 20kb limit 200kb\n" {
		t.Errorf("kernel apply @FILE: exit %d %q", code, out)
	}
	out, code = kernelCmd(t, append([]string{"apply"}, append(target, "tbf rate 8kbit burst 2kb limit 3kb")...)...)
	if code != exitOK {
		t.Fatal(out)
	}
	out, code = kernelCmd(t, append([]string{"show", "--json"}, target...)...)
	var shown struct {
		Iface, Spec string
		Stages      []struct {
			Kind     string
			Counters map[string]uint64
		}
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil || code != exitOK || shown.Spec != "tbf rate 8kbit burst 2kb limit 3kb" ||
		len(shown.Stages) != 1 || shown.Stages[0].Kind != "tbf" || len(shown.Stages[0].Counters) != 7 {
		t.Errorf("show --json: exit %d %v %s", code, err, out)
	}
	if out, code := kernelCmd(t, "apply", "--iface", "eth9", "--netns", name, "--state-dir", t.TempDir(), "tbf rate 1mbit burst 5kb limit 10kb"); code != exitUsage ||
		out != "error: kernel apply: interface \"eth9\": not found\n" {
		t.Errorf("missing interface: exit %d %q", code, out)
	}
	// A class tree goes through the same apply: a leaf of a kind the
	// kernel lacks is named and nothing changes; a tree it can build is
	// said to be applied, and clear puts back what the first apply
	// replaced.
	const classes = "htb default 2; class 1:1 htb rate 100mbit; class 1:2 parent 1:1 htb rate 20mbit; leaf 1:2 "
	out, code = kernelCmd(t, append([]string{"apply"}, append(target, classes+"delay 10ms")...)...)
	if code != exitOK && (code != exitNoKernel ||
		out != "error: kernel apply: kernel cannot build this class tree: no netem qdisc (sch_netem) for leaf 1:2 netem delay 10ms: nothing changed\n") {
		t.Errorf("kernel apply of a netem leaf: exit %d %q", code, out)
	}
	out, code = kernelCmd(t, append([]string{"apply"}, append(target, classes+"tbf rate 10mbit burst 10kb limit 100kb")...)...)
	if want := "kc0: htb tree applied: default 1:2; class 1:1 htb rate 100mbit; class 1:2 parent 1:1 htb rate 20mbit; " +
		"leaf 1:2 tbf rate 10mbit burst 10kb limit 100kb\n"; code != exitOK || out != want {
		t.Errorf("kernel apply of a class tree: exit %d %q, want %q", code, out, want)
	}
	// show prints the tree as applied; --stats adds each qdisc's and
	// class's counters.
	const tree = "default 1:2; class 1:1 htb rate 100mbit; class 1:2 parent 1:1 htb rate 20mbit; leaf 1:2 tbf rate 10mbit burst 10kb limit 100kb\n"
	if out, code := kernelCmd(t, append([]string{"show"}, target...)...); code != exitOK || out != tree {
		t.Errorf("kernel show of a tree: exit %d %q", code, out)
	}
	const counters = ": sent 0 bytes 0 pkt (dropped 0, overlimits 0, requeues 0) backlog 0b 0p\n"
	if out, code := kernelCmd(t, append([]string{"show", "--stats"}, target...)...); code != exitOK ||
		out != tree+"  htb 1:0 parent root"+counters+"  tbf 100:0 parent 1:2"+counters+"  class htb 1:1 parent root"+counters+"  class htb 1:2 parent 1:1"+counters {
		t.Errorf("kernel show --stats of a tree: exit %d %q", code, out)
	}
	if out, code := kernelCmd(t, append([]string{"clear"}, target...)...); code != exitOK || out != "" {
		t.Errorf("kernel clear after a tree: exit %d %q", code, out)
	}
	if out, _ := kernelCmd(t, append([]string{"show"}, target...)...); out != "wanlab: kc0 has the kernel's default qdisc (no impairment)\n" {
		t.Errorf("kernel show after clear: %q", out)
	}
}
