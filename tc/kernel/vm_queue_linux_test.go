package kernel

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/lab/vm"
	"github.com/wanlab/wanlab/tc/spec"
)

// vmQueues are the queue disciplines' stages the reference kernel gets:
// each kind with its defaults and with every option, as a root qdisc, as
// tbf's child (parent 1:1) and behind netem and tbf.
var vmQueues = []string{
	"pfifo limit 100",
	"bfifo limit 150kb",
	"codel",
	"codel limit 500 target 2ms interval 50ms ce_threshold 1ms ecn",
	"fq_codel",
	"fq_codel limit 1000 flows 64 quantum 300 target 10ms interval 50ms memory_limit 4mb ce_threshold 3ms noecn drop_batch 8",
	"pie",
	"pie limit 500 target 20ms tupdate 32ms alpha 4 beta 30 ecn bytemode dq_rate_estimator",
	"red limit 400kb min 30kb max 90kb avpkt 1000 burst 55 bandwidth 10mbit ecn",
	"red limit 500kb min 20kb max 100kb avpkt 1000 probability 0.1 bandwidth 100mbit ecn harddrop nodrop",
	"red limit 1mb avpkt 1500 adaptive",
	"tbf rate 10mbit burst 10kb limit 1mb | fq_codel",
	"tbf rate 10mbit burst 10kb limit 1mb | pie ecn",
	"delay 100ms | tbf rate 50mbit burst 50kb limit 500kb | fq_codel",
	"delay 20ms | codel target 10ms",
	"tbf rate 20mbit burst 20kb limit 1mb | red limit 200kb avpkt 1500 ecn",
}

// vmHZ is the reference kernel's CONFIG_HZ: 250 in Debian's cloud kernels,
// 100 in its user-mode-linux. pie keeps tupdate in jiffies, so 15 ms reads
// back as 16 ms (20 ms under UML).
func vmHZ(v *vm.VM) int {
	if v.Engine == vm.EngineUML {
		return 100
	}
	return 250
}

// decodedQueue is what "kernel show" decodes from the kernel's values
// alone for a queue stage: the stage, with pie's tupdate in whole
// jiffies, and red with what red_dump keeps (no avpkt, burst or
// bandwidth; an adaptive red's probability moves, and is left out).
func decodedQueue(st spec.Stage, hz int) string {
	switch q := st.(type) {
	case *spec.PIE:
		c := *q
		jiffy := time.Second / time.Duration(hz)
		c.TUpdate = (q.TUpdateTime() + jiffy - 1) / jiffy * jiffy
		if c.TUpdate == spec.DefaultPIETUpdate {
			c.TUpdate = 0
		}
		return c.String()
	case *spec.RED:
		b, _ := DefaultClock.EncodeRED(q)
		d, _ := DecodeRED(b)
		if q.Adaptive {
			d.Probability = 0
		}
		return d.String()
	}
	return st.String()
}

// testVMQueues applies every vmQueues spec in the reference kernel and
// reads it back: "kernel show" with apply's record (as typed) and without
// it (decoded from the kernel's dump), and tc's own view of red's
// computed parameters (ewma, Scell_log).
func testVMQueues(t *testing.T, ctx context.Context, v *vm.VM) {
	var script strings.Builder
	script.WriteString("i=0\nwhile IFS= read -r s; do\ni=$((i+1))\n" +
		"echo \"@@$i apply\"; wanlab kernel apply --iface eth0 --state-dir /tmp/k \"$s\" 2>/tmp/apply.err\n" +
		"echo \"@@$i applyerr\"; cat /tmp/apply.err\n" +
		"echo \"@@$i show\"; wanlab kernel show --iface eth0 --state-dir /tmp/k 2>&1\n" +
		"echo \"@@$i decoded\"; wanlab kernel show --iface eth0 --state-dir /tmp/none 2>&1\n" +
		"echo \"@@$i tc\"; /usr/sbin/tc -d qdisc show dev eth0\n" +
		"wanlab kernel clear --iface eth0 --state-dir /tmp/k 2>&1\n" +
		"done <<'EOF'\n")
	var specs []*spec.Spec
	for _, s := range vmQueues {
		sp, err := spec.Parse(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		specs = append(specs, sp)
		script.WriteString(sp.String() + "\n")
	}
	const tree = "htb default 20; class 1:1 htb rate 100mbit; class 1:20 parent 1:1 htb rate 80mbit; leaf 1:20 fq_codel target 10ms"
	script.WriteString("EOF\n" +
		"echo @@htb; wanlab kernel apply --iface eth0 --state-dir /tmp/k '" + tree + "' 2>&1\n" +
		"echo @@htbtc; /usr/sbin/tc qdisc show dev eth0\n" +
		"wanlab kernel clear --iface eth0 --state-dir /tmp/k 2>&1\n" +
		"echo @@after; /usr/sbin/tc qdisc show dev eth0\n")
	out := vmSections(t, ctx, v, script.String())
	for i, sp := range specs {
		get := func(what string) string { return strings.TrimSpace(out[fmt.Sprintf("%d %s", i+1, what)]) }
		if get("apply") != sp.String() || get("show") != sp.String() {
			t.Errorf("%s: apply printed %q, show %q", sp, get("apply"), get("show"))
		}
		// Standard error holds warnings only (a delay whose limit
		// cannot hold its load warns, as the proxy does).
		for _, line := range strings.Split(get("applyerr"), "\n") {
			if line != "" && !strings.HasPrefix(line, "warning: ") {
				t.Errorf("%s: apply's standard error %q", sp, get("applyerr"))
				break
			}
		}
		var want []string
		for _, st := range sp.Stages {
			want = append(want, decodedQueue(st, vmHZ(v)))
		}
		wantDecoded := strings.Join(want, " | ")
		if d := get("decoded"); d != wantDecoded && d != strings.TrimPrefix(wantDecoded, "netem ") {
			t.Errorf("%s: decoded from the kernel %q, want %q", sp, d, wantDecoded)
		}
		last := sp.Stages[len(sp.Stages)-1]
		tcOut := get("tc")
		if !strings.Contains(tcOut, "qdisc "+last.Kind()+" ") {
			t.Errorf("%s: tc shows no %s:\n%s", sp, last.Kind(), tcOut)
		}
		if len(sp.Stages) > 1 && !strings.Contains(tcOut, "parent ") {
			t.Errorf("%s: %s is not a child:\n%s", sp, last.Kind(), tcOut)
		}
		if r, ok := last.(*spec.RED); ok {
			p, _ := r.Params(DefaultClock.TickInUsec)
			if w := fmt.Sprintf("ewma %d ", p.Wlog); !strings.Contains(tcOut, w) || !strings.Contains(tcOut, fmt.Sprintf("Scell_log %d", p.ScellLog)) {
				t.Errorf("%s: tc -d shows %q, want %q and Scell_log %d", sp, tcOut, w, p.ScellLog)
			}
		}
	}
	if !strings.Contains(out["htb"], "htb tree applied") || !strings.Contains(out["htbtc"], "qdisc fq_codel") ||
		!strings.Contains(out["htbtc"], "parent 1:20") || !strings.Contains(out["htbtc"], "target 10") {
		t.Errorf("htb leaf fq_codel: apply %q, tc shows\n%s", out["htb"], out["htbtc"])
	}
	// After clear: the VM's default root qdisc (its default_qdisc,
	// fq_codel, with handle 0:), nothing of ours.
	if strings.Contains(out["after"], "htb") || strings.Contains(out["after"], "parent") || !strings.Contains(out["after"], " 0: root") {
		t.Errorf("after clear: %s", out["after"])
	}
	if t.Failed() {
		t.Logf("VM output: %v", out)
	}
}
