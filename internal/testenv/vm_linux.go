package testenv

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var staticWanlab struct {
	once sync.Once
	path string
	err  error
}

// StaticWanlab builds cmd/wanlab once per test process with CGO_ENABLED=0,
// as the VM's agent must be, and returns the executable's path.
func StaticWanlab(t testing.TB) string {
	t.Helper()
	s := &staticWanlab
	s.once.Do(func() {
		gomod, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			s.err = err
			return
		}
		root := filepath.Dir(strings.TrimSpace(string(gomod)))
		// Each test process builds its own; those of processes long
		// gone (no test runs for an hour) are removed here.
		old, _ := filepath.Glob(filepath.Join(os.TempDir(), "wanlab-static-*"))
		for _, d := range old {
			if st, err := os.Stat(d); err == nil && time.Since(st.ModTime()) > time.Hour {
				os.RemoveAll(d)
			}
		}
		dir, err := os.MkdirTemp("", "wanlab-static-")
		if err != nil {
			s.err = err
			return
		}
		s.path = filepath.Join(dir, "wanlab")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", s.path, "./cmd/wanlab")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			s.err = errors.New("go build ./cmd/wanlab: " + err.Error() + ": " + string(out))
		}
	})
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.path
}
