package bench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/lab"
)

// A state directory whose lab is gone is removed; a live lab's is kept.
func TestCleanupRemovesStaleState(t *testing.T) {
	testenv.RequireRoot(t)
	l, err := lab.New(context.Background(), lab.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	dir := t.TempDir()
	stale, live := filepath.Join(dir, "zz0dead"), filepath.Join(dir, l.ID)
	for _, d := range []string{stale, live} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := cleanupIn(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(removed, "state "+stale) {
		t.Errorf("removed %v, want the stale %s", removed, stale)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("%s still there", stale)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the live lab's state went: %v", err)
	}
}
