package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/nsrun"
)

// snapshotSysctls are the per-interface settings a router setup may
// change: forwarding, reverse-path filtering, accepting its own source
// addresses, and IPv6 on or off.
var snapshotSysctls = []string{
	"net/ipv4/ip_forward", "net/ipv4/conf/*/forwarding", "net/ipv4/conf/*/rp_filter",
	"net/ipv4/conf/*/accept_local", "net/ipv6/conf/*/forwarding", "net/ipv6/conf/*/force_forwarding",
	"net/ipv6/conf/*/disable_ipv6", "net/ipv6/conf/*/addr_gen_mode",
}

// Snapshot renders the netlink state of n, one sorted line per object:
// links, addresses, routes of every table and rules of both families, and
// the sysctls in snapshotSysctls for every interface. Two equal snapshots
// mean the namespace is as it was; DiffLines shows where two differ.
func (n *Node) Snapshot(t testing.TB) string {
	t.Helper()
	var lines []string
	add := func(format string, a ...any) { lines = append(lines, fmt.Sprintf(format, a...)) }
	links, err := n.NL.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		a := l.Attrs()
		add("link %d %s %s mtu %d flags %v txqlen %d master %d", a.Index, a.Name, l.Type(), a.MTU, a.Flags, a.TxQLen, a.MasterIndex)
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		addrs, err := n.NL.AddrList(nil, fam)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			add("addr %d %s flags %d scope %d", a.LinkIndex, a.IPNet, a.Flags, a.Scope)
		}
		routes, err := n.NL.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range routes {
			add("route fam %d table %d dst %v src %v gw %v dev %d proto %d scope %d type %d prio %d",
				fam, r.Table, r.Dst, r.Src, r.Gw, r.LinkIndex, r.Protocol, r.Scope, r.Type, r.Priority)
		}
		rules, err := n.NL.RuleList(fam)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			add("rule fam %d %d iif %q oif %q table %d src %v dst %v", fam, r.Priority, r.IifName, r.OifName, r.Table, r.Src, r.Dst)
		}
	}
	err = nsrun.Do(n.NS, func() error {
		for _, pattern := range snapshotSysctls {
			files, _ := filepath.Glob(filepath.Join("/proc/sys", pattern))
			for _, f := range files {
				v, err := os.ReadFile(f)
				if err != nil {
					return err
				}
				add("sysctl %s=%s", strings.TrimPrefix(f, "/proc/sys/"), strings.TrimSpace(string(v)))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// RequireSnapshot stops the test unless n's Snapshot equals want, naming
// what went wrong ("not restored") and listing the lines that differ.
func (n *Node) RequireSnapshot(t testing.TB, want, what string) {
	t.Helper()
	if got := n.Snapshot(t); got != want {
		t.Fatalf("%s:\n%s", what, DiffLines(want, got))
	}
}

// DiffLines lists the lines only in a ("- ...") and only in b ("+ ..."),
// sorted: what changed between two snapshots.
func DiffLines(a, b string) string {
	set := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ma, mb := set(a), set(b)
	var out []string
	for l := range ma {
		if !mb[l] {
			out = append(out, "- "+l)
		}
	}
	for l := range mb {
		if !ma[l] {
			out = append(out, "+ "+l)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
