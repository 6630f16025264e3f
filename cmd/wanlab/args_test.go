package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// runSplit runs wanlab as main does and returns its standard output, its
// standard error and its exit status.
func runSplit(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	app := newApp()
	var out, errb bytes.Buffer
	app.Writer, app.ErrWriter = &out, &errb
	code = reportExit(&errb, runCommandLine(context.Background(), app, append([]string{"wanlab"}, args...)))
	return out.String(), errb.String(), code
}

// leafCommand is a command of the app that runs (has an action), with its
// path.
type leafCommand struct {
	path string
	cmd  *cli.Command
}

func appCommands() []leafCommand {
	newApp()
	var all []leafCommand
	walkCommands(commands, "", func(c *cli.Command, path string) {
		if c.Action != nil && !c.SkipFlagParsing {
			all = append(all, leafCommand{path, c})
		}
	})
	return all
}

// flagValue is a value each kind of flag parses.
func flagValue(f cli.Flag) string {
	if _, ok := f.(*cli.DurationFlag); ok {
		return "1s"
	}
	return "1"
}

// TestFlagsAfterArguments runs every command and subcommand of the app
// with each of its flags before and after an argument: the command sees
// the flag set and the argument alone, either way. A new command is
// covered by being registered.
func TestFlagsAfterArguments(t *testing.T) {
	for _, lc := range appCommands() {
		lc := lc
		t.Run(strings.ReplaceAll(lc.path, " ", "_"), func(t *testing.T) {
			var gotArgs []string
			var set bool
			var name string
			// The action records what it got; the checks before it
			// (required flags, arity) have tests of their own.
			saved, savedBefore := lc.cmd.Action, lc.cmd.Before
			lc.cmd.Action = func(cc *cli.Context) error {
				gotArgs, set = cc.Args().Slice(), cc.IsSet(name)
				return nil
			}
			lc.cmd.Before = nil
			t.Cleanup(func() { lc.cmd.Action, lc.cmd.Before = saved, savedBefore })
			// A command that runs a program (shell, vm run, lab exec) takes
			// its own fixed arguments first; the program comes after "--".
			fixed := 1
			if n, ok := commandLines[lc.path]; ok {
				fixed = n
			}
			args := []string{"ARG", "ARG2"}[:fixed]
			for _, f := range lc.cmd.Flags {
				name = f.Names()[0]
				if isHelpFlag(name) { // urfave/cli's, added at run time
					continue
				}
				tokens := []string{"--" + name}
				if d, ok := f.(cli.DocGenerationFlag); ok && d.TakesValue() {
					tokens = append(tokens, flagValue(f))
				}
				path := strings.Fields(lc.path)
				for _, order := range [][]string{
					concat(path, tokens, args),
					concat(path, args, tokens),
				} {
					gotArgs, set = nil, false
					if _, stderr, code := runSplit(t, order...); code != exitOK {
						t.Fatalf("wanlab %s: exit %d: %s", strings.Join(order, " "), code, stderr)
					}
					if !set || !reflect.DeepEqual(gotArgs, args) && len(args)+len(gotArgs) > 0 {
						t.Errorf("wanlab %s: flag set %v, arguments %q; want set and %q", strings.Join(order, " "), set, gotArgs, args)
					}
				}
			}
		})
	}
}

// TestUsageErrorEveryCommand: an unknown flag on any command, after its
// arguments, exits 2 with one line naming it and the usage on standard
// error, nothing on standard output; --help prints on standard output and
// exits 0.
func TestUsageErrorEveryCommand(t *testing.T) {
	for _, lc := range appCommands() {
		path := strings.Fields(lc.path)
		// After the command's own arguments: shell and vm run take none,
		// their program's flags are the program's.
		args := []string{"ARG"}
		if n, ok := commandLines[lc.path]; ok {
			args = args[:n]
		}
		stdout, stderr, code := runSplit(t, concat(path, args, []string{"--no-such-flag"})...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != exitUsage || stdout != "" || len(lines) < 2 ||
			lines[0] != "wanlab: "+lc.path+": unknown flag --no-such-flag" || !strings.HasPrefix(lines[1], "usage: ") {
			t.Errorf("wanlab %s %v --no-such-flag: exit %d\nstdout %q\nstderr %q", lc.path, args, code, stdout, stderr)
		}
		// After the arguments too: "FILE --help" is help, not a topic.
		stdout, stderr, code = runSplit(t, concat(path, args, []string{"--help"})...)
		if code != exitOK || stderr != "" || !strings.Contains(stdout, "NAME:\n   wanlab "+lc.path+" - ") {
			t.Errorf("wanlab %s ARG --help: exit %d\nstdout %q\nstderr %q", lc.path, code, stdout, stderr)
		}
	}
}

// TestExtraArgument: every command that takes no argument (Args unset)
// refuses one with exit 2 before its action runs, the usage on standard
// error; a command is covered by being registered.
func TestExtraArgument(t *testing.T) {
	for _, lc := range appCommands() {
		if lc.cmd.Args || len(lc.cmd.Subcommands) > 0 {
			continue
		}
		ran := false
		saved := lc.cmd.Action
		lc.cmd.Action = func(*cli.Context) error { ran = true; return nil }
		stdout, stderr, code := runSplit(t, append(strings.Fields(lc.path), "EXTRA")...)
		lc.cmd.Action = saved
		lines := strings.Split(stderr, "\n")
		if ran || code != exitUsage || stdout != "" || !strings.HasPrefix(lines[0], "wanlab: "+lc.path+": ") ||
			len(lines) < 2 || !strings.HasPrefix(lines[1], "usage: ") {
			t.Errorf("wanlab %s EXTRA: ran %v, exit %d\nstdout %q\nstderr %q", lc.path, ran, code, stdout, stderr)
		}
	}
}

// TestExitCodes: each kind of usage error exits 2 with its one line first
// and the usage under it, on standard error only.
func TestExitCodes(t *testing.T) {
	for _, c := range []struct {
		args  []string
		first string
	}{
		{nil, "wanlab: missing COMMAND"},
		{[]string{"nosuch"}, `wanlab: unknown command "nosuch"`},
		{[]string{"help", "nosuch"}, `wanlab: help: no command "nosuch"`},
		{[]string{"tune"}, "wanlab: tune: missing subcommand (one of show, plan, apply, revert)"},
		{[]string{"tune", "frob"}, `wanlab: tune: unknown subcommand "frob" (one of show, plan, apply, revert)`},
		{[]string{"analyze"}, "wanlab: analyze: want exactly one capture FILE"},
		{[]string{"analyze", analyzeCapture, "extra.pcap"}, "wanlab: analyze: want exactly one capture FILE"},
		{[]string{"analyze", analyzeCapture, "--max-points"}, "wanlab: analyze: flag --max-points needs a value"},
		{[]string{"analyze", analyzeCapture, "--max-points", "many"}, `wanlab: analyze: --max-points: invalid value "many" (parse error)`},
		{[]string{"analyze", analyzeCapture, "--json", "--format", "csv"}, "wanlab: analyze: --json and --format csv: choose one"},
		{[]string{"fit", analyzeCapture, "--window-ratio", "2"}, "wanlab: fit: --window-ratio 2: want a share between 0 and 1"},
		{[]string{"simulate", "--spec", "dela 20ms"}, `wanlab: simulate: --spec: unknown keyword "dela" at position 1`},
		{[]string{"trace", "constant", "--duration", "1s"}, "wanlab: trace constant: --rate is required"},
		{[]string{"trace", "stats", "/nonexistent/lte.down"}, "wanlab: trace stats: open /nonexistent/lte.down: no such file or directory"},
		{[]string{"analyze", "/nonexistent/x.pcap", "--json"}, "wanlab: analyze: stat /nonexistent/x.pcap: no such file or directory"},
		{[]string{"simulate", "--spec", "delay 1ms", "extra"}, `wanlab: simulate: unexpected argument "extra" (this command takes flags only)`},
	} {
		stdout, stderr, code := runSplit(t, c.args...)
		lines := strings.Split(stderr, "\n")
		if code != exitUsage || stdout != "" || lines[0] != c.first || len(lines) < 2 || !strings.HasPrefix(lines[1], "usage: ") {
			t.Errorf("wanlab %q: exit %d, want 2\nstdout %q\nstderr %q\nwant first line %q", c.args, code, stdout, stderr, c.first)
		}
	}
	// The issue's own case: the report flag after the file.
	report := filepath.Join(t.TempDir(), "r.html")
	if _, stderr, code := runSplit(t, "analyze", analyzeCapture, "--report", report); code != exitOK {
		t.Errorf("wanlab analyze FILE --report r.html: exit %d: %s", code, stderr)
	} else if fi, err := os.Stat(report); err != nil || fi.Size() == 0 {
		t.Errorf("wanlab analyze FILE --report r.html: no report: %v", err)
	}
	if stdout, stderr, code := runSplit(t, "help", "analyze"); code != exitOK || stderr != "" || !strings.Contains(stdout, "wanlab analyze") {
		t.Errorf("wanlab help analyze: exit %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}
}

// TestJSONSwitch: --json prints JSON on every command whose output can be
// JSON, after the file as before it, and analyze's --json is --format json.
func TestJSONSwitch(t *testing.T) {
	for _, lc := range appCommands() {
		var format, jsonSwitch bool
		for _, f := range lc.cmd.Flags {
			for _, n := range f.Names() {
				format = format || n == "format"
				jsonSwitch = jsonSwitch || n == "json"
			}
		}
		if format && !jsonSwitch {
			t.Errorf("wanlab %s has --format but no --json", lc.path)
		}
	}
	want, _, code := runSplit(t, "analyze", "--format", "json", analyzeCapture)
	if code != exitOK {
		t.Fatalf("analyze --format json: exit %d", code)
	}
	for _, args := range [][]string{
		{"analyze", analyzeCapture, "--json"},
		{"analyze", "--json", analyzeCapture},
		{"analyze", analyzeCapture, "--format", "json"},
	} {
		got, stderr, code := runSplit(t, args...)
		if code != exitOK || got != want {
			t.Errorf("wanlab %q: exit %d, output differs from --format json (%d against %d bytes): %s", args, code, len(got), len(want), stderr)
		}
	}
	for _, args := range [][]string{
		{"fit", analyzeCapture, "--json"},
		{"simulate", "--spec", "delay 10ms", "--packets", "100", "--json"},
		{"tune", "plan", "--rtt", "35ms", "--rate", "100MBps", "--json"},
	} {
		out, stderr, code := runSplit(t, args...)
		if code != exitOK || !json.Valid([]byte(out)) {
			t.Errorf("wanlab %q: exit %d, not JSON on standard output: %.200s\nstderr %.300s", args, code, out, stderr)
		}
	}
}

// TestReorderArgs: what stays in place: "--" and everything after it, a
// command line's program and its flags, a value that starts with a dash.
func TestReorderArgs(t *testing.T) {
	app := newApp()
	for _, c := range []struct{ in, want string }{
		{"fit FILE --json", "fit --json FILE"},
		{"analyze FILE --report r.html --flow=2", "analyze --report r.html --flow=2 FILE"},
		{"analyze - --json", "analyze --json -"},
		{"shell --impair X -- curl -s --impair Y", "shell --impair X -- curl -s --impair Y"},
		{"shell curl -s --pcap p", "shell curl -s --pcap p"},
		{"shell --quiet curl --quiet", "shell --quiet curl --quiet"},
		{"vm run -- tc qdisc show --mem 5", "vm run -- tc qdisc show --mem 5"},
		{"lab exec client --name n -- ls -l", "lab exec --name n client -- ls -l"},
		{"lab exec client ls --name n", "lab exec client ls --name n"},
		{"experiment --client-cmd -R --preset p", "experiment --client-cmd -R --preset p"},
		{"proxy set 'delay 1ms' --control c", "proxy set --control c 'delay 1ms'"},
		{"trace stats FILE --json", "trace stats --json FILE"},
		{"kernel apply delay 10ms --iface eth1", "kernel apply --iface eth1 delay 10ms"},
		{"analyze FILE --generate-bash-completion", "analyze FILE --generate-bash-completion"},
		{"vm uml-exec -- --foo x", "vm uml-exec -- --foo x"},
		{"analyze FILE --help", "analyze --help"},
		{"fit FILE -h --json", "fit -h --json"},
		{"shell --help -- curl", "shell --help"},
		{"proxy --help set", "proxy --help set"},
	} {
		out, err := reorderArgs(app, append([]string{"wanlab"}, strings.Fields(c.in)...))
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		got := strings.Join(out[1:], " ")
		if got != c.want {
			t.Errorf("%s: got %s, want %s", c.in, got, c.want)
		}
	}
}

// TestCommandLinesExist: every command commandLines names is one of the
// app's, so a rename cannot silently reorder a program's flags.
func TestCommandLinesExist(t *testing.T) {
	have := map[string]bool{}
	for _, lc := range appCommands() {
		have[lc.path] = true
	}
	for path := range commandLines {
		if !have[path] {
			t.Errorf("commandLines names %q, which is no command", path)
		}
	}
}
