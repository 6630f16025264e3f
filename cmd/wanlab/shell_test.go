package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestShellAndLabUsageErrors: what the user typed wrong is one line naming
// it, exit 2, before anything is built.
func TestShellAndLabUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"shell", "--impair", "up=delay fast"}, "shell: --impair for up: delay"},
		{[]string{"shell", "--impair", "sideways=delay 1ms"}, `"sideways" is not one of`},
		{[]string{"shell", "--", "wanlab-no-such-command"}, `command "wanlab-no-such-command"`},
		{[]string{"lab", "up", "--name", "Bad!"}, `--name "Bad!"`},
		{[]string{"lab", "up", "--impair", "to-client=loss 200%"}, "lab up: --impair for to-client"},
		{[]string{"lab", "up", "--preset", "no-such-preset"}, "lab up: --preset"},
		{[]string{"lab", "up", "extra"}, `unexpected argument "extra"`},
		{[]string{"lab", "exec"}, "lab exec: want client, router or server"},
		{[]string{"lab", "capture"}, "lab capture: want one FILE"},
	} {
		app := newApp()
		var out, errb bytes.Buffer
		app.Writer, app.ErrWriter = &out, &errb
		err := runCommandLine(context.Background(), app, append([]string{"wanlab"}, c.args...))
		if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("wanlab %v: %v (exit %d); want one line naming %q, exit %d", c.args, err, exitCode(err), c.want, exitUsage)
		}
	}
}
