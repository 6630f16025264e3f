package kernel

import (
	"errors"
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/tc/spec"
)

// newTarget makes a namespace with a veth pair and returns the target for
// one end.
func newTarget(t *testing.T) Target {
	t.Helper()
	name, ns := testenv.NetNS(t)
	err := nsrun.Do(ns, func() error {
		// IPv6 off before the veth exists: otherwise the kernel sends
		// router solicitations and MLD reports through k0 at random times
		// after it comes up, and a qdisc's own counters (htb's direct_pkts
		// sits in its options) differ between two dumps of an unchanged
		// tree. The tests' traffic is IPv4.
		for _, k := range []string{"all", "default"} {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/disable_ipv6", []byte("1"), 0); err != nil {
				return err
			}
		}
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "k0", TxQLen: 1000}, PeerName: "k1"}); err != nil {
			return err
		}
		for _, n := range []string{"k0", "k1"} {
			l, err := netlink.LinkByName(n)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(l); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return Target{Iface: "k0", Netns: name, StateDir: t.TempDir()}
}

// tree renders the interface's egress qdiscs and classes.
func tree(t *testing.T, tg Target) string {
	t.Helper()
	var s string
	err := inNS(tg, func(ifindex int) error {
		q, err := dumpTree(ifindex)
		for _, x := range q {
			s += fmt.Sprintf("%s options %x\n", x, x.Options)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustParse(t *testing.T, s string) *spec.Spec {
	t.Helper()
	sp, err := spec.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func TestTBFApplyShowClear(t *testing.T) {
	tg := newTarget(t)
	before := tree(t, tg)
	for _, s := range []string{
		"tbf rate 50mbit burst 50kb limit 500kb",
		"tbf rate 100mbit burst 64kb limit 1mb",
		"tbf rate 1gbit burst 256kb limit 4mb",
		"tbf rate 8kbit burst 4kb limit 8kb",
		"tbf rate 10mbit burst 10kb latency 50ms",
		"tbf rate 100mbit burst 64kb latency 20ms peakrate 200mbit mtu 1500b",
		"tbf rate 1mbit burst 32kb limit 64kb mpu 64b",
		"tbf rate 40gbit burst 1mb limit 16mb",
		"tbf rate 100mbit burst 64kb/8 limit 1mb",
		"tbf rate 2mbit burst 16kb limit 32kb overhead 24 linklayer atm",
		"tbf rate 123456bit burst 10000b limit 20000b",
		"tbf rate 50mbit burst 50kb limit 500kb | tbf rate 10mbit burst 10kb limit 100kb",
	} {
		sp := mustParse(t, s)
		if err := Apply(tg, spec.PipelineImpairment(sp)); err != nil {
			t.Fatalf("apply %s: %v", s, err)
		}
		got, err := Show(tg)
		if err != nil {
			t.Fatal(err)
		}
		if got != sp.String() {
			t.Errorf("show after apply %q = %q", sp, got)
		}
		// Read back from the kernel's values alone (no record): the same,
		// except what the kernel does not keep (latency becomes the limit
		// it stands for, burst cells are dropped).
		rec, _ := loadRecord(tg.recordPath())
		os.Rename(tg.recordPath(), tg.recordPath()+".hidden")
		decoded, err := Show(tg)
		os.Rename(tg.recordPath()+".hidden", tg.recordPath())
		if err != nil {
			t.Fatal(err)
		}
		want := sp
		for _, st := range want.Stages {
			if b := st.(*spec.TBF); b.Latency != 0 || b.BurstCell != 0 {
				c := *b
				c.Limit, c.Latency, c.BurstCell = b.QueueLimit(), 0, 0
				want = &spec.Spec{Stages: []spec.Stage{&c}}
			}
		}
		if decoded != want.String() {
			t.Errorf("decoded from the kernel %q = %q", want, decoded)
		}
		if rec == nil || len(rec.Prev) != 1 || rec.Prev[0].Kind != "noqueue" {
			t.Errorf("record of the replaced tree: %+v", rec)
		}
	}
	if err := Clear(tg); err != nil {
		t.Fatal(err)
	}
	if after := tree(t, tg); after != before {
		t.Fatalf("clear did not restore:\nbefore %s\nafter  %s", before, after)
	}
	if got, err := Show(tg); err != nil || got != "" {
		t.Fatalf("show after clear: %q %v", got, err)
	}
	if _, err := os.Stat(tg.recordPath()); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("record left after clear")
	}
}

func TestNetemAbsentLeavesInterface(t *testing.T) {
	tg := newTarget(t)
	if err := Apply(tg, spec.PipelineImpairment(mustParse(t, "tbf rate 5mbit burst 10kb limit 50kb"))); err != nil {
		t.Fatal(err)
	}
	before := tree(t, tg)
	for _, s := range []string{
		"delay 100ms",
		"delay 100ms | tbf rate 50mbit burst 50kb limit 500kb",      // the seeds' tree: netem root
		"tbf rate 50mbit burst 50kb limit 500kb | netem delay 10ms", // root made, child refused
	} {
		err := Apply(tg, spec.PipelineImpairment(mustParse(t, s)))
		if netemAvailable(t) {
			t.Skip("this kernel has netem")
		}
		var nk *NoKindError
		if !errors.As(err, &nk) || !errors.Is(err, ErrNotSupported) ||
			err.Error() != "kernel has no netem qdisc (sch_netem not available): nothing changed" {
			t.Fatalf("%s: %v", s, err)
		}
		if after := tree(t, tg); after != before {
			t.Fatalf("%s changed the interface:\nbefore %s\nafter  %s", s, before, after)
		}
		if got, _ := Show(tg); got != "tbf rate 5mbit burst 10kb limit 50kb" {
			t.Fatalf("show after refused apply: %q", got)
		}
	}
	if err := Clear(tg); err != nil {
		t.Fatal(err)
	}
}

// netemAvailable probes whether the kernel has sch_netem.
func netemAvailable(t *testing.T) bool {
	_, err := os.Stat("/sys/module/sch_netem")
	return err == nil
}

// TestClearRestoresPreviousRoot: a tree someone else configured (htb
// with a class) comes back exactly after apply and clear.
func TestClearRestoresPreviousRoot(t *testing.T) {
	tg := newTarget(t)
	err := inNS(tg, func(ifindex int) error {
		q := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: ifindex, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT})
		if err := netlink.QdiscAdd(q); err != nil {
			return err
		}
		c := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: ifindex, Parent: netlink.MakeHandle(1, 0), Handle: netlink.MakeHandle(1, 1)},
			netlink.HtbClassAttrs{Rate: 10e6, Ceil: 20e6, Buffer: 20000, Cbuffer: 20000})
		return netlink.ClassAdd(c)
	})
	if err != nil {
		t.Fatal(err)
	}
	before := tree(t, tg)
	if got, err := Show(tg); err != nil || got != "class 1:1 htb rate 10mbit ceil 20mbit burst 20000b cburst 20000b" {
		t.Fatalf("show of a plain htb tree: %q %v", got, err)
	}
	// With a filter, which show does not read back, it is refused.
	err = inNS(tg, func(ifindex int) error {
		return netlink.FilterAdd(&netlink.U32{FilterAttrs: netlink.FilterAttrs{LinkIndex: ifindex, Parent: netlink.MakeHandle(1, 0),
			Priority: 1, Protocol: unix.ETH_P_IP}, ClassId: netlink.MakeHandle(1, 1)})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Show(tg); err == nil || err.Error() != `interface "k0": qdisc htb 1:0 parent root is not a netem/tbf chain` {
		t.Fatalf("show of an htb tree with a filter should say it is not a netem/tbf chain: %v", err)
	}
	if err := Clear(tg); err == nil {
		t.Fatal("clear without a record must refuse to remove an htb root")
	}
	for _, s := range []string{"tbf rate 50mbit burst 50kb limit 500kb", "tbf rate 1mbit burst 5kb limit 10kb | tbf rate 500kbit burst 5kb limit 10kb"} {
		if err := Apply(tg, spec.PipelineImpairment(mustParse(t, s))); err != nil {
			t.Fatal(err)
		}
	}
	if err := Clear(tg); err != nil {
		t.Fatal(err)
	}
	if after := tree(t, tg); after != before {
		t.Fatalf("clear did not restore:\nbefore %s\nafter  %s", before, after)
	}
}

func TestMissingInterface(t *testing.T) {
	tg := newTarget(t)
	tg.Iface = "eth9"
	err := Apply(tg, spec.PipelineImpairment(mustParse(t, "tbf rate 1mbit burst 5kb limit 10kb")))
	if err == nil || err.Error() != `interface "eth9": not found` {
		t.Fatalf("got %v", err)
	}
}

// TestStats sends datagrams into a small tbf and reads the kernel's
// counters back: everything offered is sent, dropped or queued.
func TestStats(t *testing.T) {
	tg := newTarget(t)
	if err := Apply(tg, spec.PipelineImpairment(mustParse(t, "tbf rate 8kbit burst 2kb limit 3kb"))); err != nil {
		t.Fatal(err)
	}
	const offered = 50
	err := inNS(tg, func(ifindex int) error {
		l, err := netlink.LinkByIndex(ifindex)
		if err != nil {
			return err
		}
		a, _ := netlink.ParseAddr("10.95.0.1/24")
		if err := netlink.AddrAdd(l, a); err != nil {
			return err
		}
		// A permanent neighbour, so packets reach the qdisc without ARP.
		if err := netlink.NeighAdd(&netlink.Neigh{LinkIndex: ifindex, State: netlink.NUD_PERMANENT,
			IP: net.ParseIP("10.95.0.2"), HardwareAddr: net.HardwareAddr{2, 0, 0, 0, 0, 2}}); err != nil {
			return err
		}
		c, err := net.Dial("udp4", "10.95.0.2:9")
		if err != nil {
			return err
		}
		defer c.Close()
		for range offered {
			if _, err := c.Write(make([]byte, 1000)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := Stats(tg)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].Kind != "tbf" {
		t.Fatalf("stats %+v", st)
	}
	c := st[0].Counters
	if c.Drops == 0 || c.Packets == 0 || c.Packets+uint64(c.Drops)+uint64(c.BacklogPackets) < offered {
		t.Fatalf("counters %+v for %d datagrams into an 8kbit tbf with a 3kb queue", c, offered)
	}
	t.Logf("%+v", c)
}

// TestCurrentNamedNamespace: apply without --netns from inside a named
// namespace ("ip netns exec NS wanlab kernel apply") shares its record with
// --netns NS, so show and clear by name see what apply did.
func TestCurrentNamedNamespace(t *testing.T) {
	tg := newTarget(t)
	before := tree(t, tg)
	inside := tg
	inside.Netns = ""
	sp := mustParse(t, "tbf rate 10mbit burst 10kb latency 50ms")
	h, err := nsrun.Open(tg.Netns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := nsrun.Do(h, func() error { return Apply(inside, spec.PipelineImpairment(sp)) }); err != nil {
		t.Fatal(err)
	}
	if got, err := Show(tg); err != nil || got != sp.String() {
		t.Fatalf("show by name: %q %v", got, err)
	}
	if err := Clear(tg); err != nil {
		t.Fatal(err)
	}
	if after := tree(t, tg); after != before {
		t.Fatalf("not restored:\nbefore %s\nafter  %s", before, after)
	}
}
