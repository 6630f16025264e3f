package kernel

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/lab/vm"
	"github.com/wanlab/wanlab/lab/vm/vmtest"
	"github.com/wanlab/wanlab/tc/spec"
)

// vmCorpus is every netem stage the parser's tests hold against tc (the
// tc-netem(8) examples, the golden encodings, and one stage per feature),
// each once, as canonical single-stage specs.
func vmCorpus(t *testing.T) []*spec.Spec {
	var texts []string
	f, err := os.Open("../spec/testdata/manpage_examples.txt")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if _, args, ok := strings.Cut(sc.Text(), " netem "); ok && !strings.HasPrefix(sc.Text(), "#") {
			texts = append(texts, args)
		}
	}
	f.Close()
	g, err := os.ReadFile("testdata/tc-options.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(g), "\n") {
		if stage, _, ok := strings.Cut(line, "\t"); ok && strings.HasPrefix(stage, "netem ") {
			texts = append(texts, strings.TrimPrefix(stage, "netem "))
		}
	}
	texts = append(texts,
		// each distribution, and jitter with a correlation
		"delay 20ms 5ms distribution pareto", "delay 20ms 5ms 30% distribution paretonormal", "delay 1s 500ms",
		// loss models with correlations, ecn
		"loss 0.3% 25% ecn", "loss state 5% 20% 3% 40% 1% ecn", "loss state 2% 30%", "loss gemodel 1% 10% 70% 0.1% ecn",
		"loss gemodel 3% 20%",
		"duplicate 1% 10%", "corrupt 5% 25%", "delay 10ms reorder 25% 50% gap 5", "delay 10ms reorder 1%",
		"rate 1gbit -14", "rate 1gbit 0 53 -5", "rate 10mbit 20 100 5",
		"slot distribution pareto 800us 100us bytes 1500", "slot 5ms 1ms", "slot 2ms 4ms packets 20",
		"loss 1% seed 42", "limit 1k delay 1ms", "limit 10 rate 1mbit",
		"delay 50ms 10ms 25% loss 1% 10% duplicate 0.5% 5% reorder 10% 20% gap 3 corrupt 0.2% 1% rate 20mbit 14 ecn",
	)
	var out []*spec.Spec
	seen := map[string]bool{}
	for _, s := range texts {
		sp, err := spec.Parse(s)
		if err != nil {
			continue // the man page's "gap 5 delay 10ms", which tc rejects too
		}
		if CheckNetem(sp.Stages[0].(*spec.Netem)) != nil {
			continue // jitter beyond the kernel's 32 bits (delay 5s 3s)
		}
		if !seen[sp.String()] {
			seen[sp.String()] = true
			out = append(out, sp)
		}
	}
	return out
}

// tcNetemSpec turns the first line "tc qdisc show" prints for a netem
// qdisc ("qdisc netem 1: root refcnt 2 limit 1000 delay 100ms  10ms") into
// spec syntax: tc labels what the spec writes by position
// (loss state and gemodel parameters, rate overheads) and names no slot
// distribution, which the kernel does not dump.
func tcNetemSpec(line string) string {
	f := strings.Fields(line)
	if len(f) >= 3 && f[0] == "qdisc" {
		f = f[3:] // "qdisc netem 1:"
	}
	for len(f) >= 2 && (f[0] == "root" || f[0] == "refcnt" || f[0] == "parent") {
		if f[0] == "root" {
			f = f[1:]
		} else {
			f = f[2:]
		}
	}
	var out []string
	for i := 0; i < len(f); i++ {
		switch w := f[i]; {
		case w == "p13" || w == "p31" || w == "p32" || w == "p23" || w == "p14" ||
			w == "p" || w == "r" || w == "1-h" || w == "1-k":
			// labels of the loss models' positional values
		case w == "packetoverhead" || w == "cellsize" || w == "celloverhead":
			// rate overheads are positional after the rate: fill the
			// ones tc leaves out (it prints only non-zero ones)
			vals := map[string]string{"packetoverhead": "0", "cellsize": "0", "celloverhead": "0"}
			for ; i+1 < len(f) && vals[f[i]] != ""; i += 2 {
				vals[f[i]] = f[i+1]
			}
			i--
			out = append(out, vals["packetoverhead"], vals["cellsize"], vals["celloverhead"])
		case w == "distribution" && i > 0 && f[i-1] == "slot":
			out = append(out, w, "uniform")
		default:
			out = append(out, w)
		}
	}
	return strings.Join(out, " ")
}

var stageMark = regexp.MustCompile(`^@@(\d+) (\w+)$`)

// TestNetemAgainstRealKernel runs the kernel path against the real
// sch_netem of the reference VM, in one boot: the netem corpus stage by
// stage, seed 002's netem and tbf chain, an htb tree with netem leaves,
// and the queue disciplines (codel, fq_codel, pie, red, pfifo, bfifo)
// alone, as tbf's child and as an htb leaf.
func TestNetemAgainstRealKernel(t *testing.T) {
	vmtest.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// WANLAB_VM_CACHE picks another prepared cache than the default
	// (one built from a tree whose guest modules changed).
	v := vmtest.VM(t, ctx, vm.Config{CacheDir: os.Getenv("WANLAB_VM_CACHE")})
	t.Run("corpus", func(t *testing.T) { testVMCorpus(t, ctx, v) })
	t.Run("trees", func(t *testing.T) { testVMTrees(t, ctx, v) })
	t.Run("queues", func(t *testing.T) { testVMQueues(t, ctx, v) })
}

// TestNetemTreesTCG runs the trees on qemu's emulation of Debian's cloud
// kernel, where the test above runs on the auto engine (User-Mode Linux
// where KVM is missing): the qemu guest's kernel path stays tested.
func TestNetemTreesTCG(t *testing.T) {
	vmtest.RequireQemu(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	v := vmtest.VM(t, ctx, vm.Config{CacheDir: os.Getenv("WANLAB_VM_CACHE"), Engine: vm.EngineTCG})
	testVMTrees(t, ctx, v)
}

// testVMCorpus sends every netem stage of the corpus through "wanlab
// kernel apply" (one batch) and checks that it reads back the same:
// "kernel show" with apply's record (the spec as typed), without it
// (decoded from the kernel's dump alone: no distribution tables), and tc's
// own reading of the qdisc.
func testVMCorpus(t *testing.T, ctx context.Context, v *vm.VM) {
	corpus := vmCorpus(t)
	if len(corpus) < 40 {
		t.Fatalf("corpus of %d stages", len(corpus))
	}

	var script strings.Builder
	script.WriteString("i=0\nwhile IFS= read -r s; do\ni=$((i+1))\n" +
		"echo \"@@$i apply\"; wanlab kernel apply --iface eth0 --state-dir /tmp/k \"$s\" 2>&1\n" +
		"echo \"@@$i show\"; wanlab kernel show --iface eth0 --state-dir /tmp/k 2>&1\n" +
		"echo \"@@$i decoded\"; wanlab kernel show --iface eth0 --state-dir /tmp/none 2>&1\n" +
		"echo \"@@$i tc\"; /usr/sbin/tc -s qdisc show dev eth0\n" +
		"wanlab kernel clear --iface eth0 --state-dir /tmp/k 2>&1\n" +
		"done <<'EOF'\n")
	for _, sp := range corpus {
		script.WriteString(sp.String() + "\n")
	}
	script.WriteString("EOF\n")
	start := time.Now()
	r, err := v.Run(ctx, "sh", "-c", script.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d stages through the VM's sch_netem in %v", len(corpus), time.Since(start).Round(time.Millisecond))
	got := map[string]string{}
	var key string
	for _, line := range strings.Split(string(r.Stdout), "\n") {
		if m := stageMark.FindStringSubmatch(line); m != nil {
			key = m[1] + " " + m[2]
			continue
		}
		// kernel apply warns (on stderr, which the VM's agent merges)
		// about correlated probabilities; the spec is applied as written.
		if key != "" && line != "" && !strings.HasPrefix(line, "warning: ") {
			got[key] += line + "\n"
		}
	}
	for i, sp := range corpus {
		n := sp.Stages[0].(*spec.Netem)
		out := func(what string) string { return strings.TrimSpace(got[fmt.Sprintf("%d %s", i+1, what)]) }
		tcLine, _, _ := strings.Cut(out("tc"), "\n")
		if n.HasSeed {
			// This kernel (6.1) predates netem's seed: apply must say
			// so and change nothing.
			if !strings.Contains(out("apply"), "kernel ignored netem seed") || strings.Contains(tcLine, "netem") {
				t.Errorf("%s: apply %q, tc %q; want the seed named as ignored and no netem left", sp, out("apply"), tcLine)
			}
			continue
		}
		want := (&spec.Spec{Stages: []spec.Stage{withoutTables(n)}}).String()
		if out("apply") != sp.String() || out("show") != sp.String() {
			t.Errorf("%s: apply printed %q, show %q", sp, out("apply"), out("show"))
		}
		if out("decoded") != want {
			t.Errorf("%s: decoded from the kernel %q, want %q", sp, out("decoded"), want)
		}
		fromTC, err := spec.Parse(tcNetemSpec(tcLine))
		if err != nil {
			t.Errorf("%s: tc shows %q: %v", sp, tcLine, err)
		} else if fromTC.String() != want {
			t.Errorf("%s: tc shows %q (%s), want %s", sp, tcLine, fromTC, want)
		}
	}
	if t.Failed() {
		t.Logf("VM output:\n%s\n%s", r.Stdout, r.Stderr)
	}
}

// vmSections runs script in the VM and splits its output at "@@NAME"
// lines.
func vmSections(t *testing.T, ctx context.Context, v *vm.VM, script string) map[string]string {
	t.Helper()
	r, err := v.Run(ctx, "sh", "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	key := ""
	for _, line := range strings.Split(string(r.Stdout)+string(r.Stderr), "\n") {
		if k, ok := strings.CutPrefix(line, "@@"); ok {
			key = k
			continue
		}
		if strings.TrimSpace(line) != "" {
			out[key] += line + "\n"
		}
	}
	return out
}

// qdiscLines returns tc's first line of each qdisc, by kind and handle
// ("netem 100:").
func qdiscLines(tcOut string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(tcOut, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "qdisc" {
			m[f[1]+" "+f[2]] = l
		}
	}
	return m
}

// testVMTrees builds seed 002's chain and an htb tree with netem leaves and
// reads both back through wanlab and through tc.
func testVMTrees(t *testing.T, ctx context.Context, v *vm.VM) {
	const seed002 = "delay 100ms | tbf rate 50mbit burst 50kb limit 500kb"
	const tree = "htb default 20; class 1:1 htb rate 100mbit; class 1:10 parent 1:1 htb rate 20mbit; " +
		"class 1:20 parent 1:1 htb rate 80mbit; filter dst 10.0.2.0/24 flowid 1:10; " +
		"leaf 1:10 delay 10ms loss 1% | tbf rate 10mbit burst 10kb limit 100kb; leaf 1:20 delay 20ms 5ms distribution normal"
	k := "wanlab kernel %s --iface eth0 --state-dir /tmp/k"
	script := strings.Join([]string{
		"echo @@apply; " + fmt.Sprintf(k, "apply") + " '" + seed002 + "'",
		"echo @@decoded; wanlab kernel show --iface eth0 --state-dir /tmp/none",
		"echo @@tc; /usr/sbin/tc -s qdisc show dev eth0",
		fmt.Sprintf(k, "clear"),
		"echo @@htb; " + fmt.Sprintf(k, "apply") + " '" + tree + "'",
		"echo @@htbtc; /usr/sbin/tc -s qdisc show dev eth0",
		"echo @@class; /usr/sbin/tc class show dev eth0",
		"echo @@filter; /usr/sbin/tc filter show dev eth0",
		fmt.Sprintf(k, "clear"),
		"echo @@after; /usr/sbin/tc qdisc show dev eth0",
		// A duplicating netem replacing another netem: the kernel refuses
		// one beside another in the same tree.
		fmt.Sprintf(k, "apply") + " 'delay 10ms'",
		"echo @@dup; " + fmt.Sprintf(k, "apply") + " 'duplicate 1% | tbf rate 10mbit burst 10kb limit 100kb' 2>&1",
		"echo @@duptc; /usr/sbin/tc qdisc show dev eth0",
		"echo @@overdup; " + fmt.Sprintf(k, "apply") + " 'delay 5ms' 2>&1",
		fmt.Sprintf(k, "clear"),
	}, "\n")
	out := vmSections(t, ctx, v, script)
	if got := strings.TrimSpace(out["apply"]); got != seed002 {
		t.Errorf("seed 002: apply printed %q", got)
	}
	if got := strings.TrimSpace(out["decoded"]); got != seed002 {
		t.Errorf("seed 002: decoded from the kernel %q", got)
	}
	q := qdiscLines(out["tc"])
	if !strings.Contains(q["netem 1:"], " root ") || tcNetemSpec(q["netem 1:"]) != "limit 1000 delay 100ms" ||
		!strings.Contains(q["tbf 10:"], "parent 1:1 rate 50Mbit burst 50Kb") {
		t.Errorf("seed 002: tc shows\n%s", out["tc"])
	}

	if !strings.Contains(out["htb"], "htb tree applied") {
		t.Fatalf("htb tree: %s", out["htb"])
	}
	q = qdiscLines(out["htbtc"])
	leaves := map[string]string{"1:10": "delay 10ms loss 1%", "1:20": "delay 20ms 5ms"}
	netems := 0
	for _, l := range q {
		f := strings.Fields(l)
		if f[1] != "netem" {
			continue
		}
		netems++
		parent := f[4]
		sp, err := spec.Parse(tcNetemSpec(l))
		if want, ok := leaves[parent]; !ok || err != nil || sp.String() != want {
			t.Errorf("htb tree: netem leaf %q reads %v %v, want %q under %s", l, sp, err, leaves[parent], parent)
		}
	}
	if netems != 2 || !strings.Contains(q["htb 1:"], "root") || !strings.Contains(out["htbtc"], "qdisc tbf") {
		t.Errorf("htb tree: tc shows\n%s", out["htbtc"])
	}
	for _, want := range []string{"class htb 1:1 root rate 100Mbit", "class htb 1:10 parent 1:1 leaf", "rate 20Mbit",
		"class htb 1:20 parent 1:1 leaf", "rate 80Mbit"} {
		if !strings.Contains(out["class"], want) {
			t.Errorf("htb tree: tc class show lacks %q:\n%s", want, out["class"])
		}
	}
	if !strings.Contains(out["filter"], "flowid 1:10") || !strings.Contains(out["filter"], "match 0a000200/ffffff00 at 16") {
		t.Errorf("htb tree: tc filter show:\n%s", out["filter"])
	}
	if strings.Contains(out["after"], "htb") || strings.Contains(out["after"], "netem") {
		t.Errorf("after clear: %s", out["after"])
	}
	if got := strings.TrimSpace(out["dup"]); got != "duplicate 1% | tbf rate 10mbit burst 10kb limit 100kb" ||
		strings.Count(out["duptc"], "qdisc netem") != 1 {
		t.Errorf("duplicate over delay: apply %q, tc shows\n%s", got, out["duptc"])
	}
	if got := strings.TrimSpace(out["overdup"]); got != "delay 5ms" {
		t.Errorf("delay over duplicate: apply %q", got)
	}
}
