package kernel

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/tc/spec"
)

// TestPlanClassesManyFilters: thousands of filters keep their order in
// few u32 prios (each prio is one of the kernel's 2047 u32 hash tables,
// each holds 4095 node ids), and the probe builds one object per kind.
func TestPlanClassesManyFilters(t *testing.T) {
	var b strings.Builder
	b.WriteString("htb default 2; class 1:1 htb rate 10gbit")
	const n = 5000
	for i := 2; i < n+2; i++ {
		fmt.Fprintf(&b, "; class 1:%x parent 1:1 htb rate 1mbit ceil 10gbit", i)
	}
	for i := 2; i < n+2; i++ {
		fmt.Fprintf(&b, "; filter dst 10.%d.%d.0/24 flowid 1:%x", i/250, i%250, i)
	}
	b.WriteString("; filter src fd00::/8 flowid 1:2; filter dst 10.255.0.0/16 flowid 1:3")
	cs, err := spec.ParseClasses(b.String())
	if err != nil {
		t.Fatal(err)
	}
	plan, err := planClasses(DefaultClock, cs)
	if err != nil {
		t.Fatal(err)
	}
	var prios []uint32
	lastPrio, lastNode := uint32(0), uint32(0)
	for _, o := range plan.objs {
		if !o.filter {
			continue
		}
		prio := o.info >> 16
		if prio != lastPrio {
			prios = append(prios, prio)
			lastNode = 0
		}
		if o.q.Handle != lastNode+1 || o.q.Handle > maxU32Node {
			t.Fatalf("filter %s: node %#x after %#x in prio %d", o.what, o.q.Handle, lastNode, prio)
		}
		lastPrio, lastNode = prio, o.q.Handle
	}
	// 5000 IPv4 filters: 4095 + 905; then IPv6, then IPv4 again.
	if fmt.Sprint(prios) != "[1 2 3 4]" {
		t.Fatalf("prios %v, want [1 2 3 4]", prios)
	}
	if s := probeSample(plan); len(s.objs) != 3 {
		t.Fatalf("probe sample of %d objects, want the root, one class and one filter", len(s.objs))
	}
}
