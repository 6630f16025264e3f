package testenv

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/wanlab/wanlab/lab"
)

// Lab builds a client-router-server lab (lab.New) that is removed when the
// test ends, also when it fails half-way. Without the privileges to build
// one the test skips (fails under CI).
func Lab(t testing.TB, ctx context.Context, cfg lab.Config) *lab.Lab {
	t.Helper()
	RequireRoot(t)
	l, err := lab.New(ctx, cfg)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			Skip(t, "cannot build a lab: %v (needs CAP_NET_ADMIN and CAP_SYS_ADMIN)", err)
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
