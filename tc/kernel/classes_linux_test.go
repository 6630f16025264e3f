package kernel

import (
	"os/exec"

	"encoding/binary"
	"errors"
	"fmt"
	"github.com/wanlab/wanlab/internal/testenv"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/tc/classify"
	"github.com/wanlab/wanlab/tc/spec"
)

func mustClasses(t *testing.T, s string) *spec.Classes {
	t.Helper()
	cs, err := spec.ParseClasses(s)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

const seedTree = "htb default 2; class 1:1 htb rate 100mbit; class 1:2 parent 1:1 htb rate 20mbit; " +
	"class 1:3 parent 1:1 htb rate 50mbit; class 1:4 parent 1:1 htb rate 20mbit"

// A tree with a netem leaf on a kernel without netem: the missing part
// is named and the interface untouched. A tree the kernel can build (htb,
// a tbf leaf, u32 filters) is built as tc builds it and cleared.
func TestApplyClasses(t *testing.T) {
	testenv.RequireCommand(t, "tc")
	tg := newTarget(t)
	before := tree(t, tg)
	if !kernelHas(t, "netem") {
		full := mustClasses(t, seedTree+"; filter dst 10.0.2.0/24 flowid 1:2; leaf 1:3 delay 10ms; leaf 1:4 tbf rate 10mbit burst 10kb limit 100kb")
		err := Apply(tg, spec.Impairment{Classes: full})
		var me *MissingError
		if !errors.As(err, &me) || !errors.Is(err, ErrNotSupported) {
			t.Fatalf("got %v, want a MissingError", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "no netem qdisc (sch_netem) for leaf 1:3 netem delay 10ms") ||
			!strings.Contains(msg, "nothing changed") || strings.Contains(msg, "tbf") {
			t.Errorf("error %q: want netem named for leaf 1:3, tbf not", msg)
		}
		if after := tree(t, tg); after != before {
			t.Fatalf("a refused apply changed the interface:\n%s", after)
		}
	}
	cs := mustClasses(t, seedTree+"; filter dst 10.0.2.0/24 flowid 1:2; filter protocol tcp dport 5201 flowid 1:3; "+
		"filter src fd00::/8 dscp ef flowid 1:4; leaf 1:4 tbf rate 10mbit burst 10kb limit 100kb")
	if err := Apply(tg, spec.Impairment{Classes: cs}); err != nil {
		if errors.Is(err, ErrNotSupported) {
			// CI's kernel has htb, tbf and cls_u32: there this must run.
			testenv.Skip(t, "kernel lacks part of htb/tbf/u32: %v", err)
		}
		t.Fatal(err)
	}
	got := tree(t, tg)
	for _, want := range []string{"qdisc htb 1:0 parent root", "class htb 1:1 parent root", "class htb 1:3 parent 1:1", "qdisc tbf 100:0 parent 1:4"} {
		if !strings.Contains(got, want) {
			t.Errorf("tree lacks %q:\n%s", want, got)
		}
	}
	// The same filters typed as tc commands on k1 dump the same.
	tc := func(args string) string {
		out, err := exec.Command("ip", append([]string{"netns", "exec", tg.Netns, "tc"}, strings.Fields(args)...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tc %s: %v: %s", args, err, out)
		}
		return string(out)
	}
	tc("qdisc add dev k1 root handle 1: htb default 2")
	tc("class add dev k1 parent 1: classid 1:1 htb rate 100mbit")
	// A run of one protocol shares a prio, its filters in order by
	// handle (node ids 1, 2, ...); the next protocol takes the next prio.
	for _, f := range []string{
		"prio 1 handle ::1 protocol ip u32 match ip dst 10.0.2.0/24 flowid 1:2",
		"prio 1 handle ::2 protocol ip u32 match ip protocol 6 0xff match ip dport 5201 0xffff flowid 1:3",
		"prio 2 handle ::1 protocol ipv6 u32 match ip6 protocol 6 0xff match ip6 dport 5201 0xffff flowid 1:3",
		"prio 2 handle ::2 protocol ipv6 u32 match ip6 src fd00::/8 match ip6 priority 0xb8 0xfc flowid 1:4",
	} {
		tc("filter add dev k1 parent 1: " + f)
	}
	ours := strings.ReplaceAll(tc("filter show dev k0"), "k0", "DEV")
	theirs := strings.ReplaceAll(tc("filter show dev k1"), "k1", "DEV")
	if ours != theirs {
		t.Errorf("filters differ from tc's:\nours:\n%s\ntc's:\n%s", ours, theirs)
	}
	if err := Clear(tg); err != nil {
		t.Fatal(err)
	}
	if after := tree(t, tg); after != before {
		t.Fatalf("clear did not restore:\n%s\nwant\n%s", after, before)
	}
}

func kernelHas(t *testing.T, kind string) bool {
	t.Helper()
	plan := &plan{objs: []tcObject{{q: qdisc{Kind: kind, Handle: 0x10000, Parent: tcHRoot}, what: kind, needs: kind}}}
	if kind == "netem" {
		opt, _ := EncodeNetem(&spec.Netem{})
		plan.objs[0].q.Options = opt
	}
	return probe(plan) == nil
}

// The u32 keys are what q_u32.c packs for "match ip dst 10.0.2.0/24",
// "match ip dport 80 0xffff", "match ip protocol 6 0xff" and the ip6
// forms.
func TestU32Selectors(t *testing.T) {
	m, err := classify.ParseMatch(strings.Fields("dst 10.0.2.0/24 protocol tcp dport 80 sport 1024-2047"))
	if err != nil {
		t.Fatal(err)
	}
	sels, err := u32Selectors(m)
	if err != nil || len(sels) != 1 || sels[0].ethertype != ethPIP {
		t.Fatalf("%v %v", sels, err)
	}
	keys := decodeKeys(sels[0].sel)
	want := []string{"16:ffffff00/0a000200", "8:00ff0000/00060000", "20:fc00ffff/04000050"}
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("keys %v, want %v", keys, want)
	}
	m, _ = classify.ParseMatch(strings.Fields("dst fd00:2::/64 dscp ef"))
	sels, _ = u32Selectors(m)
	if len(sels) != 1 || sels[0].ethertype != ethPIPv6 {
		t.Fatalf("%v", sels)
	}
	want = []string{"24:ffffffff/fd000002", "28:ffffffff/00000000", "0:0fc00000/0b800000"}
	if got := decodeKeys(sels[0].sel); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("v6 keys %v, want %v", got, want)
	}
	m, _ = classify.ParseMatch(strings.Fields("protocol udp"))
	if sels, _ = u32Selectors(m); len(sels) != 2 {
		t.Errorf("a match without addresses: %d selectors, want v4 and v6", len(sels))
	}
	m, _ = classify.ParseMatch(strings.Fields("dport 5000-5010"))
	if _, err := u32Selectors(m); err == nil || !strings.Contains(err.Error(), "5000-5010 is not one u32 mask") {
		t.Errorf("range: %v", err)
	}
}

func decodeKeys(sel []byte) []string {
	var out []string
	n := int(sel[2])
	for i := 0; i < n; i++ {
		k := sel[16+16*i:]
		mask, val := binary.BigEndian.Uint32(k), binary.BigEndian.Uint32(k[4:])
		off := int32(native.Uint32(k[8:]))
		out = append(out, itoa(off)+":"+hex8(mask)+"/"+hex8(val))
	}
	return out
}

func itoa(v int32) string { return fmt.Sprint(v) }

func hex8(v uint32) string { return fmt.Sprintf("%08x", v) }
