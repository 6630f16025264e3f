package kernel

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/tc/spec"
)

// Applies over an earlier apply, ours or a user's tree: each replaces
// what is there, and clear puts back what was there before the first.

const (
	treeA = seedTree + "; filter dst 10.0.2.0/24 flowid 1:2; leaf 1:4 tbf rate 10mbit burst 10kb limit 100kb"
	treeB = "htb default 3; class 1:1 htb rate 50mbit; class 1:2 parent 1:1 htb rate 10mbit; class 1:3 parent 1:1 htb rate 30mbit; " +
		"filter dst 10.0.3.0/24 flowid 1:2; leaf 1:2 tbf rate 5mbit burst 10kb limit 50kb; leaf 1:3 tbf rate 20mbit burst 20kb limit 200kb"
)

// userTree configures a tree as someone else would have, "tc qdisc add
// ... root handle 1: htb default 3", classes 1:1, 1:2 and 1:3 and "tc
// qdisc add ... parent 1:3 handle 100: tbf ...", and returns it as dumped.
func userTree(t *testing.T, tg Target) string {
	t.Helper()
	tbf, err := encodeStage(DefaultClock, mustParse(t, "tbf rate 1mbit burst 10kb limit 10kb").Stages[0])
	if err != nil {
		t.Fatal(err)
	}
	class := func(rate string) []byte {
		cs := mustClasses(t, "class 1:1 htb rate "+rate)
		b, err := DefaultClock.EncodeHTBClass(HTBClass{HTBClass: *cs.Classes[0].HTB})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	err = inNS(tg, func(ifindex int) error {
		for _, q := range []qdisc{
			{Kind: "htb", Handle: 0x10000, Parent: tcHRoot, Options: EncodeHTBQdisc(HTBQdisc{Default: 3})},
			{Class: true, Kind: "htb", Handle: 0x10001, Parent: 0x10000, Options: class("10mbit")},
			{Class: true, Kind: "htb", Handle: 0x10002, Parent: 0x10001, Options: class("2mbit")},
			{Class: true, Kind: "htb", Handle: 0x10003, Parent: 0x10001, Options: class("3mbit")},
			{Kind: "tbf", Handle: 0x1000000, Parent: 0x10003, Options: tbf},
		} {
			if err := addQdisc(ifindex, q, unix.NLM_F_EXCL); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree(t, tg)
}

// applyOK applies s, a pipeline or a class tree.
func applyOK(t *testing.T, tg Target, s string) {
	t.Helper()
	im, err := spec.ParseImpairment(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(tg, im); err != nil {
		t.Fatalf("apply %s: %v", s, err)
	}
}

// holdsTree fails unless the device holds the class tree s.
func holdsTree(t *testing.T, tg Target, s string) {
	t.Helper()
	p, err := planClasses(DefaultClock, mustClasses(t, s))
	if err != nil {
		t.Fatal(err)
	}
	err = inNS(tg, func(ifindex int) error {
		cur, err := dumpTree(ifindex)
		if err == nil && !p.holds(cur) {
			t.Errorf("device does not hold %s:\n%s", s, tree(t, tg))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func clearRestores(t *testing.T, tg Target, before string) {
	t.Helper()
	if err := Clear(tg); err != nil {
		t.Fatal(err)
	}
	if after := tree(t, tg); after != before {
		t.Fatalf("clear did not restore:\nbefore %s\nafter  %s", before, after)
	}
}

// TestTreeOverTree: a tree replaces our tree and our chain with the same
// root handle (which the kernel refuses to replace in place), and clear
// restores the kernel's default.
func TestTreeOverTree(t *testing.T) {
	tg := newTarget(t)
	before := tree(t, tg)
	applyOK(t, tg, treeA)
	applyOK(t, tg, treeB)
	holdsTree(t, tg, treeB)
	applyOK(t, tg, treeA)
	holdsTree(t, tg, treeA)
	clearRestores(t, tg, before)
	applyOK(t, tg, "tbf rate 10mbit burst 10kb limit 100kb") // root 1:, the tree's
	applyOK(t, tg, treeB)
	holdsTree(t, tg, treeB)
	clearRestores(t, tg, before)
}

// TestPipelineOverOurTree: a chain over our tree records what was there
// before the tree, not the tree, and clear restores that.
func TestPipelineOverOurTree(t *testing.T) {
	tg := newTarget(t)
	before := tree(t, tg)
	applyOK(t, tg, treeA)
	applyOK(t, tg, "tbf rate 10mbit burst 10kb limit 100kb")
	applyOK(t, tg, treeB)
	applyOK(t, tg, "tbf rate 10mbit burst 10kb limit 100kb | tbf rate 5mbit burst 10kb limit 50kb")
	if rec, err := loadRecord(tg.recordPath()); err != nil || rec == nil || len(rec.Prev) != 1 || rec.Prev[0].Kind != "noqueue" {
		t.Errorf("record of the replaced tree: %+v %v", rec, err)
	}
	clearRestores(t, tg, before)
}

// TestUserHTBTreeRestored: a user's htb tree with a leaf qdisc comes back
// after our chains and trees (one with its root handle) over it.
func TestUserHTBTreeRestored(t *testing.T) {
	tg := newTarget(t)
	before := userTree(t, tg)
	applyOK(t, tg, "tbf rate 10mbit burst 10kb limit 100kb")
	clearRestores(t, tg, before)
	applyOK(t, tg, treeA)
	holdsTree(t, tg, treeA)
	applyOK(t, tg, treeB)
	applyOK(t, tg, "tbf rate 10mbit burst 10kb limit 100kb")
	applyOK(t, tg, treeA)
	clearRestores(t, tg, before)
}

// TestFailedTreeOverTreeRollsBack: a tree that fails part way over our
// tree (a leaf under a class the plan lacks) puts our tree back whole,
// filters included, and the record as it was.
func TestFailedTreeOverTreeRollsBack(t *testing.T) {
	tc := func(tg Target, args string) string {
		out, err := exec.Command("ip", append([]string{"netns", "exec", tg.Netns, "tc"}, strings.Fields(args)...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tc %s: %v: %s", args, err, out)
		}
		return string(out)
	}
	if _, err := exec.LookPath("tc"); err != nil {
		t.Skip("no tc")
	}
	tg := newTarget(t)
	before := tree(t, tg)
	applyOK(t, tg, treeA)
	want, wantFilters := tree(t, tg), tc(tg, "filter show dev k0")
	if !strings.Contains(wantFilters, "flowid 1:2") {
		t.Fatalf("filters of %s:\n%s", treeA, wantFilters)
	}
	p, err := planClasses(DefaultClock, mustClasses(t, treeB))
	if err != nil {
		t.Fatal(err)
	}
	last := p.objs[len(p.objs)-1]
	last.q.Parent, last.q.Handle, last.what = 0x1ffff, 0x7000000, "leaf 1:ffff"
	p.objs = append(p.objs, last)
	err = apply(tg, DefaultClock, p)
	if err == nil || !strings.Contains(err.Error(), "leaf 1:ffff") {
		t.Fatalf("apply with a leaf under no class: %v", err)
	}
	if got := tree(t, tg); got != want {
		t.Errorf("not rolled back:\nwant %s\ngot  %s", want, got)
	}
	if got := tc(tg, "filter show dev k0"); got != wantFilters {
		t.Errorf("filters not rolled back:\nwant %s\ngot  %s", wantFilters, got)
	}
	if rec, err := loadRecord(tg.recordPath()); err != nil || rec == nil || rec.Spec != mustClasses(t, treeA).String() {
		t.Errorf("record after a failed apply: %+v %v", rec, err)
	}
	clearRestores(t, tg, before)
}

// TestShowTree: show prints our tree as applied, and a plain htb tree
// (here a user's, and ours without its record) decoded from the kernel's
// values in the same class-set form, which applies back to the same
// tree; stats gives each qdisc's and class's counters.
func TestShowTree(t *testing.T) {
	tg := newTarget(t)
	before := tree(t, tg)
	applyOK(t, tg, treeA)
	if got, err := Show(tg); err != nil || got != mustClasses(t, treeA).String() {
		t.Errorf("show of our tree: %q %v", got, err)
	}
	st, err := Stats(tg)
	if err != nil || len(st) != 6 || st[0].Kind != "htb" || st[0].Class || st[1].Handle != "100:0" || !st[2].Class || st[2].Handle != "1:1" {
		t.Errorf("stats of our tree: %+v %v", st, err)
	}
	clearRestores(t, tg, before)

	userTree(t, tg)
	const user = "default 1:3; class 1:1 htb rate 10mbit; class 1:2 parent 1:1 htb rate 2mbit; class 1:3 parent 1:1 htb rate 3mbit; " +
		"leaf 1:3 tbf rate 1mbit burst 10kb limit 10kb"
	if got, err := Show(tg); err != nil || got != user {
		t.Errorf("show of a user's tree: %q %v\nwant %q", got, err, user)
	}
	if st, err := Stats(tg); err != nil || len(st) != 5 {
		t.Errorf("stats of a user's tree: %+v %v", st, err)
	}
	applyOK(t, tg, user)
	os.Rename(tg.recordPath(), tg.recordPath()+".hidden")
	got, err := Show(tg)
	os.Rename(tg.recordPath()+".hidden", tg.recordPath())
	if err != nil || got != user {
		t.Errorf("show of the user's tree applied again, without its record: %q %v", got, err)
	}
}
