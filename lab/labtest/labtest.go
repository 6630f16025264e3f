// Package labtest builds the labs of lab.New for tests and checks that a
// closed one left nothing behind. It sits beside lab, not in internal/testenv,
// so that nothing under internal/ depends on the lab above it.
package labtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/lab"
)

// Lab builds a client-router-server lab (lab.New) that is removed when the
// test ends, also when it fails half-way. Without the privileges to build
// one the test skips (fails under CI).
func Lab(t testing.TB, ctx context.Context, cfg lab.Config) *lab.Lab {
	t.Helper()
	testenv.RequireRoot(t)
	l, err := lab.New(ctx, cfg)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			testenv.Skip(t, "cannot build a lab: %v (needs CAP_NET_ADMIN and CAP_SYS_ADMIN)", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("lab cleanup: %v", err)
		}
	})
	return l
}

// AssertLabGone reports as test errors anything of lab id still there:
// its namespaces (which it then deletes, so one failure does not leak into
// the next test), its state file, or a link named after it in the test's
// own namespace, where a lab must never create one.
func AssertLabGone(t testing.TB, id string) {
	t.Helper()
	if id == "" {
		t.Fatal("no lab id")
	}
	for _, role := range []string{lab.RoleClient, lab.RoleRouter, lab.RoleServer} {
		if ns := lab.NamePrefix + id + "-" + role; nsrun.Exists(ns) {
			t.Errorf("namespace %s left behind", ns)
			_ = nsrun.Delete(ns)
		}
	}
	if _, err := os.Stat(filepath.Join(lab.DefaultStateDir, id+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file of lab %s: %v, want it removed", id, err)
	}
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if n := l.Attrs().Name; strings.Contains(n, id) {
			t.Errorf("link %s of lab %s in the test's namespace", n, id)
		}
	}
}
