// Package vmtest boots the VMs of lab/vm for tests and skips (fails under
// CI) where they cannot run. It sits beside lab/vm, not in internal/testenv,
// so that nothing under internal/ depends on the lab above it.
package vmtest

import (
	"context"
	"os"
	"testing"

	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/lab/vm"
)

// EngineEnv names the variable that runs the tests which boot VMs on the
// auto engine on another one instead (kvm, uml or tcg), so that the same
// tests can be timed on each: WANLAB_TEST_VM_ENGINE=tcg go test ./...
const EngineEnv = "WANLAB_TEST_VM_ENGINE"

// Engine is the engine the tests boot where they would take the auto
// engine: EngineEnv's, or vm.EngineAuto. A bad value fails the test.
func Engine(t testing.TB) vm.Engine {
	t.Helper()
	e, err := vm.ParseEngine(os.Getenv(EngineEnv))
	if err != nil {
		t.Fatalf("%s: %v", EngineEnv, err)
	}
	return e
}

// RequireVM skips (fails under CI) unless a VM can be booted with the
// auto engine (or EngineEnv's): root, and UML usable or qemu installed
// with the cache prepared by `wanlab vm prepare`, which the README's test
// command runs.
func RequireVM(t testing.TB) {
	t.Helper()
	testenv.RequireRoot(t)
	switch Engine(t) {
	case vm.EngineUML:
		RequireUML(t)
		return
	case vm.EngineKVM, vm.EngineTCG:
		RequireQemu(t)
		return
	}
	if vm.UMLUsable() == nil {
		return
	}
	RequireQemu(t)
}

// RequireQemu skips (fails under CI) unless a qemu VM can be booted:
// root, qemu installed and the cache prepared by `wanlab vm prepare`.
func RequireQemu(t testing.TB) {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "qemu-system-x86_64")
	if _, err := vm.LoadPrepared(""); err != nil {
		testenv.Skip(t, "%v (the README's test command runs it)", err)
	}
}

// RequireUML skips (fails under CI) unless a UML guest can run: root,
// Debian's user-mode-linux installed, ptrace allowed.
func RequireUML(t testing.TB) {
	t.Helper()
	testenv.RequireRoot(t)
	if err := vm.UMLUsable(); err != nil {
		testenv.Skip(t, "%v (the README's test command installs user-mode-linux)", err)
	}
}

// VM boots a VM running a static build of this tree's wanlab and stops it
// when the test ends. cfg.Binary is filled in when empty.
func VM(t testing.TB, ctx context.Context, cfg vm.Config) *vm.VM {
	t.Helper()
	if cfg.Engine == vm.EngineAuto {
		cfg.Engine = Engine(t)
	}
	switch cfg.Engine {
	case vm.EngineUML:
		RequireUML(t)
	case vm.EngineKVM, vm.EngineTCG:
		RequireQemu(t)
	default:
		RequireVM(t)
	}
	if cfg.Binary == "" {
		cfg.Binary = testenv.StaticWanlab(t)
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
