package route

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/internal/testenv"
)

// TestReadOnlySysctls: in a container /proc/sys is read-only. With the
// forwarding and reverse-path settings preset (docker run --sysctl
// net.ipv4.conf.all.forwarding=1 ...) the proxy's routing needs no write
// and applies; without them it fails in one line naming the sysctl to
// preset, and leaves the namespace as it was.
func TestReadOnlySysctls(t *testing.T) {
	t.Run("preset", func(t *testing.T) {
		r := newRouter(t)
		for _, kv := range [][2]string{
			{"net/ipv4/conf/all/forwarding", "1"}, {"net/ipv6/conf/all/forwarding", "1"},
			{"net/ipv4/conf/all/rp_filter", "0"}, {"net/ipv4/conf/default/rp_filter", "0"},
		} {
			r.Sysctl(t, kv[0], kv[1])
		}
		r.openTUNs(t) // created after the presets, so they inherit default's
		r.cfg.hooks.sysctlReadOnly = true
		before := r.Snapshot(t)
		a, err := Apply(r.cfg)
		if err != nil {
			t.Fatalf("Apply on a read-only /proc/sys with the presets: %v", err)
		}
		during := r.Snapshot(t)
		tables, prio := a.Tables()
		for _, want := range []string{
			fmt.Sprintf("rule fam 2 %d iif \"ra\" oif \"\" table %d", prio, tables[1]),
			fmt.Sprintf("rule fam 10 %d iif \"rb\" oif \"\" table %d", prio, tables[0]),
		} {
			if !strings.Contains(during, want) {
				t.Errorf("after Apply, missing %q", want)
			}
		}
		if err := a.Undo(); err != nil {
			t.Fatal(err)
		}
		if after := r.Snapshot(t); after != before {
			t.Errorf("Undo did not restore:\n%s", testenv.DiffLines(before, after))
		}
	})
	t.Run("missing", func(t *testing.T) {
		r := newRouter(t)
		r.openTUNs(t)
		r.cfg.hooks.sysctlReadOnly = true
		before := r.Snapshot(t)
		_, err := Apply(r.cfg)
		if err == nil || !strings.Contains(err.Error(), "/proc/sys is read-only") ||
			!strings.Contains(err.Error(), ".conf.all.") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("Apply on a read-only /proc/sys without presets: %v", err)
		}
		if after := r.Snapshot(t); after != before {
			t.Errorf("a failed Apply changed the namespace:\n%s", testenv.DiffLines(before, after))
		}
	})
}
