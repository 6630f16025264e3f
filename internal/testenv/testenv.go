// Package testenv gives tests one way to ask for privileges and to build
// what network tests stand on: a fresh namespace or Node, a
// snapshot of a namespace's netlink state to prove it was left as it was
// (Snapshot, DiffLines), a tcpdump capture, and a poll with a deadline
// (WaitFor). Without root a privileged test skips with a hint; under CI (CI
// or WANLAB_REQUIRE_PRIVILEGED set) it fails instead, so a CI run can never
// pass by skipping what it was meant to check.
package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/wanlab/wanlab/internal/nsrun"
)

// Strict reports whether skipped privileged tests must fail.
func Strict() bool {
	return os.Getenv("CI") != "" || os.Getenv("WANLAB_REQUIRE_PRIVILEGED") != ""
}

// Skip skips the test, or fails it under CI.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	if Strict() {
		t.Fatalf("privileged test cannot run under CI: "+format, args...)
	}
	t.Skipf(format, args...)
}

// RequireRoot skips (fails under CI) unless the process can administer
// networking: it must be root and able to create a network namespace.
func RequireRoot(t testing.TB) {
	t.Helper()
	if testing.Short() && !Strict() {
		t.Skip("privileged test skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		Skip(t, "needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN); run as root or with sudo")
	}
}

// RequireCommand skips (fails under CI) when a command the test compares
// against is not installed; the README's test command installs them.
func RequireCommand(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Skip(t, "%s not installed (the README's test command installs it)", name)
	}
	return p
}

// UniqueName returns prefix followed by 6 random hex digits: short enough
// for interface names (15 bytes) when prefix is at most 8 bytes.
func UniqueName(prefix string) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// NetNS creates a fresh named network namespace for the test and removes it
// when the test ends, whether it passed or failed.
func NetNS(t testing.TB) (name string, h netns.NsHandle) {
	t.Helper()
	RequireRoot(t)
	name = UniqueName("wlt")
	h, err := nsrun.Create(name)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			Skip(t, "cannot create a network namespace: %v (needs CAP_SYS_ADMIN)", err)
		}
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		h.Close()
		if err := nsrun.Delete(name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return name, h
}
