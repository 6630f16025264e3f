package testenv

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wanlab/wanlab/lab/vm"
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

// RequireVM skips (fails under CI) unless a VM can be booted with the
// auto engine: root, and UML usable or qemu installed with the cache
// prepared by `wanlab vm prepare`, which the README's test command runs.
func RequireVM(t testing.TB) {
	t.Helper()
	RequireRoot(t)
	if vm.UMLUsable() == nil {
		return
	}
	RequireQemu(t)
}

// RequireQemu skips (fails under CI) unless a qemu VM can be booted:
// root, qemu installed and the cache prepared by `wanlab vm prepare`.
func RequireQemu(t testing.TB) {
	t.Helper()
	RequireRoot(t)
	RequireCommand(t, "qemu-system-x86_64")
	if _, err := vm.LoadPrepared(""); err != nil {
		Skip(t, "%v (the README's test command runs it)", err)
	}
}

// RequireUML skips (fails under CI) unless a UML guest can run: root,
// Debian's user-mode-linux installed, ptrace allowed.
func RequireUML(t testing.TB) {
	t.Helper()
	RequireRoot(t)
	if err := vm.UMLUsable(); err != nil {
		Skip(t, "%v (the README's test command installs user-mode-linux)", err)
	}
}

// VM boots a VM running a static build of this tree's wanlab and stops it
// when the test ends. cfg.Binary is filled in when empty.
func VM(t testing.TB, ctx context.Context, cfg vm.Config) *vm.VM {
	t.Helper()
	switch cfg.Engine {
	case vm.EngineUML:
		RequireUML(t)
	case vm.EngineKVM, vm.EngineTCG:
		RequireQemu(t)
	default:
		RequireVM(t)
	}
	if cfg.Binary == "" {
		cfg.Binary = StaticWanlab(t)
	}
	v, err := vm.Boot(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("vm %s: %s under %s, booted in %v", v.ID, v.Hello.Release, v.Engine, v.BootTime.Round(1e6))
	t.Cleanup(func() {
		if err := v.Close(); err != nil {
			t.Errorf("vm cleanup: %v", err)
		}
	})
	return v
}
