package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/urfave/cli/v2"
)

// The command line's one convention, for every command and subcommand: a
// usage error (an unknown flag, a missing or extra argument, a bad value)
// exits 2 with one line naming what is wrong, then the command's usage, on
// standard error; --help prints on standard output and exits 0. urfave/cli
// prints the whole help on standard output after a bad flag, exits 3 for an
// unknown help topic and 1 for a missing required flag; prepareApp and
// prepareCommand replace those paths.

// commandUsageError is a usage error of one command: reportExit prints that
// command's usage under the error's line.
type commandUsageError struct {
	err   error
	path  string // "proxy set"; "" for wanlab itself
	usage string // the synopsis, one or more lines
}

func (e *commandUsageError) Error() string   { return e.err.Error() }
func (e *commandUsageError) Unwrap() []error { return []error{e.err, ErrUsage} }

// notFoundKey is the app's Metadata key under which an unknown help topic
// waits for runCommandLine (urfave/cli's CommandNotFound cannot return an error).
const notFoundKey = "wanlab.notFound"

// runCommandLine runs app on args (the program name first) with the flags
// of each command moved in front of its arguments.
func runCommandLine(ctx context.Context, app *cli.App, args []string) error {
	args, err := reorderArgs(app, args)
	if err != nil {
		return err
	}
	err = app.RunContext(ctx, args)
	if err == nil {
		if nf, ok := app.Metadata[notFoundKey].(error); ok {
			return nf
		}
	}
	return err
}

// reportExit writes err to w as main does (one line, then the usage when the
// command line was wrong) and returns the exit status.
func reportExit(w io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	// An exit code without a message (vm run passing on its command's)
	// prints nothing.
	if msg := err.Error(); msg != "" {
		fmt.Fprintf(w, "wanlab: %s\n", msg)
	}
	var cu *commandUsageError
	if errors.As(err, &cu) {
		lines := strings.Split(cu.usage, "\n")
		fmt.Fprintf(w, "usage: %s\n", lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "       %s\n", strings.TrimSpace(l))
		}
		fmt.Fprintf(w, "run '%s --help' for the flags and examples\n", strings.TrimSpace("wanlab "+cu.path))
	}
	return exitCode(err)
}

// prepareApp sets app itself to the convention above; prepareCommand sets
// each command.
func prepareApp(app *cli.App) {
	appUsage := "wanlab COMMAND [flags] [arguments]\ncommands: " + strings.Join(commandNames(app.Commands), ", ")
	app.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
		return &commandUsageError{err: errors.New(flagMessage(err)), usage: appUsage}
	}
	app.Action = func(cc *cli.Context) error {
		if cc.NArg() == 0 {
			return &commandUsageError{err: errors.New("missing COMMAND"), usage: appUsage}
		}
		return &commandUsageError{err: fmt.Errorf("unknown command %q", cc.Args().First()), usage: appUsage}
	}
	app.CommandNotFound = func(cc *cli.Context, name string) {
		if app.Metadata == nil {
			app.Metadata = map[string]interface{}{}
		}
		app.Metadata[notFoundKey] = &commandUsageError{err: fmt.Errorf("help: no command %q", name), usage: appUsage}
	}
}

// walkCommands calls fn for each command of cmds and their subcommands,
// with its path ("proxy set").
func walkCommands(cmds []*cli.Command, parent string, fn func(c *cli.Command, path string)) {
	for _, c := range cmds {
		// urfave/cli adds its help command at run time, to itself too.
		if c.Name == "help" {
			continue
		}
		path := strings.TrimSpace(parent + " " + c.Name)
		fn(c, path)
		walkCommands(c.Subcommands, path, fn)
	}
}

// prepareCommand makes c's flag errors, missing required flags, an
// argument it does not take (c.Args false) and the usage errors its
// action returns carry c's usage, and gives a command that only groups
// subcommands an action naming a missing or unknown one.
func prepareCommand(c *cli.Command, path string) {
	usage := synopsis(c, path)
	fail := func(err error) error { return &commandUsageError{err: err, path: path, usage: usage} }
	c.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
		return fail(fmt.Errorf("%s: %s", path, flagMessage(err)))
	}
	required := clearRequired(c.Flags)
	action := c.Action
	if action == nil && len(c.Subcommands) > 0 {
		names := strings.Join(commandNames(c.Subcommands), ", ")
		action = func(cc *cli.Context) error {
			if cc.NArg() == 0 {
				return usageError(fmt.Errorf("%s: missing subcommand (one of %s)", path, names))
			}
			return usageError(fmt.Errorf("%s: unknown subcommand %q (one of %s)", path, cc.Args().First(), names))
		}
	}
	if action == nil {
		return
	}
	// Checked before the action runs: required flags, and no argument
	// where the command takes none (Args unset, no subcommand to name).
	before := c.Before
	leaf := len(c.Subcommands) == 0 && !c.SkipFlagParsing
	c.Before = func(cc *cli.Context) error {
		for _, name := range required {
			if !cc.IsSet(name) {
				return fail(fmt.Errorf("%s: --%s is required", path, name))
			}
		}
		if leaf && !c.Args && cc.NArg() > 0 {
			return fail(fmt.Errorf("%s: unexpected argument %q (this command takes flags only)", path, cc.Args().First()))
		}
		if before != nil {
			return before(cc)
		}
		return nil
	}
	c.Action = func(cc *cli.Context) error {
		err := action(cc)
		var cu *commandUsageError
		if errors.Is(err, ErrUsage) && !errors.As(err, &cu) {
			return fail(err)
		}
		return err
	}
}

// synopsis is how c is called: the first paragraph of its UsageText, or
// one line built from its name, flags and arguments.
func synopsis(c *cli.Command, path string) string {
	if c.UsageText != "" {
		first, _, _ := strings.Cut(c.UsageText, "\n\n")
		return first
	}
	s := "wanlab " + path
	if len(c.Subcommands) > 0 {
		s += " " + strings.Join(commandNames(c.Subcommands), "|")
	}
	if len(c.Flags) > 0 {
		s += " [flags]"
	}
	if c.ArgsUsage != "" {
		s += " " + c.ArgsUsage
	}
	return s
}

// commandNames are the names of the visible commands of cmds.
func commandNames(cmds []*cli.Command) []string {
	var names []string
	for _, c := range cmds {
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	return names
}

// flagMessage rewrites the flag package's messages in the spelling users
// type: "flag provided but not defined: -jsn" as "unknown flag --jsn".
func flagMessage(err error) string {
	msg := err.Error()
	// invalid value "x" for flag -max-points: parse error
	if rest, ok := strings.CutPrefix(msg, "invalid value "); ok {
		if value, rest, ok := strings.Cut(rest, " for flag -"); ok {
			name, why, _ := strings.Cut(rest, ": ")
			return fmt.Sprintf("%s: invalid value %s (%s)", dashes(name), value, why)
		}
	}
	for _, r := range []struct{ prefix, format string }{
		{"flag provided but not defined: -", "unknown flag %s"},
		{"flag needs an argument: -", "flag %s needs a value"},
	} {
		if name, ok := strings.CutPrefix(msg, r.prefix); ok {
			return fmt.Sprintf(r.format, dashes(name))
		}
	}
	return msg
}

// dashes is a flag's name as typed: -q, --json.
func dashes(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// clearRequired returns the names of flags marked Required and unmarks
// them: urfave/cli would answer a missing one with the whole help on
// standard output and exit 1; prepareCommand checks them instead.
func clearRequired(flags []cli.Flag) []string {
	var names []string
	for _, f := range flags {
		r, ok := f.(cli.RequiredFlag)
		if !ok || !r.IsRequired() {
			continue
		}
		field := reflect.ValueOf(f).Elem().FieldByName("Required")
		if !field.IsValid() || !field.CanSet() {
			continue
		}
		field.SetBool(false)
		names = append(names, f.Names()[0])
	}
	return names
}
