package testenv_test

import (
	"strings"
	"testing"

	"github.com/wanlab/wanlab/internal/testenv"
)

func TestDiffLines(t *testing.T) {
	a := "link 1 lo\naddr 1 127.0.0.1/8\nsysctl net/ipv4/ip_forward=0\n"
	b := "link 1 lo\nsysctl net/ipv4/ip_forward=1\nroute fam 2 table 254\n"
	want := "+ route fam 2 table 254\n+ sysctl net/ipv4/ip_forward=1\n- addr 1 127.0.0.1/8\n- sysctl net/ipv4/ip_forward=0"
	if got := testenv.DiffLines(a, b); got != want {
		t.Errorf("DiffLines =\n%s\nwant\n%s", got, want)
	}
	if got := testenv.DiffLines(a, a); got != "" {
		t.Errorf("DiffLines of equal snapshots = %q", got)
	}
}

// The snapshot sees each kind of object a router setup changes, and is
// equal again once the change is undone.
func TestSnapshotSeesChanges(t *testing.T) {
	n := testenv.NewNode(t)
	n.Veth(t, "va", "vb", nil)
	n.WaitSettled(t, "va", "vb")
	before := n.Snapshot(t)
	if before != n.Snapshot(t) {
		t.Fatal("two snapshots of an idle namespace differ")
	}
	// A new namespace may inherit the host's sysctls: flip what is there.
	fwd, accept := "1", "1"
	if strings.Contains(before, "sysctl net/ipv4/ip_forward=1\n") {
		fwd = "0"
	}
	if strings.Contains(before, "sysctl net/ipv4/conf/va/accept_local=1\n") {
		accept = "0"
	}
	n.Addr(t, "va", "10.94.0.1/24")
	n.DefaultVia(t, "10.94.0.2")
	n.Sysctl(t, "net/ipv4/conf/va/accept_local", accept)
	n.Sysctl(t, "net/ipv4/ip_forward", fwd)
	changed := testenv.DiffLines(before, n.Snapshot(t))
	for _, want := range []string{"+ addr ", "10.94.0.1/24", "+ route fam 2 table 254 dst 0.0.0.0/0",
		"+ sysctl net/ipv4/conf/va/accept_local=" + accept, "+ sysctl net/ipv4/ip_forward=" + fwd} {
		if !strings.Contains(changed, want) {
			t.Errorf("diff lacks %q:\n%s", want, changed)
		}
	}
	l, err := n.NL.LinkByName("va")
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := n.NL.AddrList(l, 2)
	if err != nil || len(addrs) != 1 {
		t.Fatalf("addresses of va: %v, %v", addrs, err)
	}
	// Deleting the address takes its routes with it.
	if err := n.NL.AddrDel(l, &addrs[0]); err != nil {
		t.Fatal(err)
	}
	n.Sysctl(t, "net/ipv4/ip_forward", map[string]string{"0": "1", "1": "0"}[fwd])
	n.Sysctl(t, "net/ipv4/conf/va/accept_local", map[string]string{"0": "1", "1": "0"}[accept])
	n.RequireSnapshot(t, before, "not restored")
}
