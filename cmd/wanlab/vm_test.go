package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/lab/vm/vmtest"
)

func vmCmd(t *testing.T, args ...string) (string, int) {
	t.Helper()
	app := newApp()
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, &out
	err := runCommandLine(context.Background(), app, append([]string{"wanlab", "vm"}, args...))
	if err != nil {
		out.WriteString(err.Error())
		return out.String(), exitCode(err)
	}
	return out.String(), exitOK
}

func TestVMCommandErrors(t *testing.T) {
	if os.Geteuid() != 0 {
		out, code := vmCmd(t, "run", "--", "true")
		if code != exitNoPerm {
			t.Errorf("vm run as non-root: exit %d (%s), want %d", code, out, exitNoPerm)
		}
		return
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run"}, exitUsage, "COMMAND is required"},
		{[]string{"run", "--netns", "x", "--", "true"}, exitUsage, "--netns and --tap go together"},
		{[]string{"run", "--engine", "fast", "--", "true"}, exitUsage, `--engine "fast": want auto, kvm, uml or tcg`},
		{[]string{"run", "--accel", "fast", "--", "true"}, exitUsage, `--engine "fast"`},
		{[]string{"prepare", "--engine", "qemu"}, exitUsage, `--engine "qemu"`},
		{[]string{"run", "--engine", "tcg", "--cache-dir", t.TempDir(), "--", "true"}, exitFailure, "run `wanlab vm prepare`"},
		{[]string{"info", "--engine", "kvm", "--cache-dir", t.TempDir()}, exitFailure, "run `wanlab vm prepare`"},
	} {
		out, code := vmCmd(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("vm %s: exit %d %q; want exit %d and %q", strings.Join(tc.args, " "), code, out, tc.code, tc.want)
		}
	}
}

// TestVMRunExitCode boots the VM once: output is printed and the command's
// exit code becomes wanlab's.
func TestVMRunExitCode(t *testing.T) {
	vmtest.RequireVM(t)
	bin := testenv.StaticWanlab(t)
	out, code := vmCmd(t, "run", "--binary", bin, "--", "sh", "-c", "echo hello from $(uname -r); exit 5")
	if code != 5 || !strings.Contains(out, "hello from 6.1.") || !strings.Contains(out, "booted under") {
		t.Errorf("vm run: exit %d, output %q; want exit 5, the greeting and the boot line", code, out)
	}
}
