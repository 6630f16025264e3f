package kernel

import (
	"testing"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// TestHTBSeedTree builds seed 004's tree with the htb encoders (a 100
// Mbyte/s class with children of 20, 50 and 20 Mbyte/s) and reads each
// class back from the kernel: the rates, and the 1600b bursts the seed's
// "tc -s class ls" shows.
func TestHTBSeedTree(t *testing.T) {
	tg := newTarget(t)
	want := map[uint32]HTBClass{
		0x10001: {HTBClass: spec.HTBClass{Rate: 800 * units.Mbit, Ceil: 800 * units.Mbit}},
		0x10002: {HTBClass: spec.HTBClass{Rate: 160 * units.Mbit, Ceil: 160 * units.Mbit}},
		0x10003: {HTBClass: spec.HTBClass{Rate: 400 * units.Mbit, Ceil: 400 * units.Mbit}},
		0x10004: {HTBClass: spec.HTBClass{Rate: 160 * units.Mbit, Ceil: 160 * units.Mbit}},
	}
	err := inNS(tg, func(ifindex int) error {
		if err := addQdisc(ifindex, qdisc{Kind: "htb", Handle: 0x10000, Parent: tcHRoot,
			Options: EncodeHTBQdisc(HTBQdisc{Default: 2})}, 0); err != nil {
			return err
		}
		for _, id := range []uint32{0x10001, 0x10002, 0x10003, 0x10004} {
			opt, err := DefaultClock.EncodeHTBClass(want[id])
			if err != nil {
				return err
			}
			parent := uint32(0x10001)
			if id == 0x10001 {
				parent = 0x10000
			}
			if err := addQdisc(ifindex, qdisc{Class: true, Kind: "htb", Handle: id, Parent: parent, Options: opt}, 0); err != nil {
				return err
			}
		}
		tree, err := dumpTree(ifindex)
		if err != nil {
			return err
		}
		seen := 0
		for _, q := range tree {
			if !q.Class {
				continue
			}
			got, err := DefaultClock.DecodeHTBClass(q.Options)
			if err != nil {
				return err
			}
			w := want[q.Handle]
			if got.Rate != w.Rate || got.Ceil != w.Ceil || got.Burst != 1600 || got.CBurst != 1600 || got.Quantum == 0 {
				t.Errorf("class %x: read back %+v, configured %+v", q.Handle, got, w)
			}
			seen++
		}
		if seen != len(want) {
			t.Errorf("%d classes read back, want %d", seen, len(want))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Our own apply on top and clear bring the whole tree back.
	before := tree(t, tg)
	if err := Apply(tg, spec.PipelineImpairment(mustParse(t, "tbf rate 10mbit burst 10kb limit 100kb"))); err != nil {
		t.Fatal(err)
	}
	if err := Clear(tg); err != nil {
		t.Fatal(err)
	}
	if after := tree(t, tg); after != before {
		t.Fatalf("clear did not restore the seed tree:\nbefore %s\nafter  %s", before, after)
	}
}
