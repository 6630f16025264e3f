package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// urfave/cli v2 parses a command's flags with Go's flag package, which
// stops at the first argument: `wanlab fit FILE --json` would take --json
// for a second FILE. reorderArgs moves every flag of a command in front of
// its arguments before the app parses, as tshark, tcpdump, go and git
// users expect, so flags go before or after the arguments alike. Which
// flags take a value comes from the command's own flag definitions.

// bashCompletionFlag is what urfave/cli appends to ask for completions; it
// must stay last.
const bashCompletionFlag = "--generate-bash-completion"

// endOfFlags ends a command's flags: nothing after it is wanlab's.
const endOfFlags = "--"

// commandLines are the commands whose arguments end in a program's command
// line (wanlab shell COMMAND, vm run COMMAND, lab exec HOST COMMAND), by
// their path, with the number of wanlab's own arguments before the
// program. From the program on, every token is the program's, as after
// "--": `wanlab shell curl -s URL` passes -s to curl.
var commandLines = map[string]int{
	"shell":    0,
	"vm run":   0,
	"lab exec": 1,
}

// reorderArgs returns args (the program name first) with each command's
// flags, and the values of those that take one, in front of its
// arguments; "--", and everything after it, stays in place. A flag that
// takes a value and ends the line is an error: moved in front, it would
// take an argument for its value.
func reorderArgs(app *cli.App, args []string) ([]string, error) {
	if len(args) == 0 {
		return args, nil
	}
	out := []string{args[0]}
	rest := args[1:]
	completing := len(rest) > 0 && rest[len(rest)-1] == bashCompletionFlag
	if completing {
		rest = rest[:len(rest)-1]
	}
	level, err := reorderLevel(&cli.Command{Flags: app.Flags, Subcommands: app.Commands}, "", rest)
	out = append(out, level...)
	if completing {
		out = append(out, bashCompletionFlag)
	}
	return out, err
}

// reorderLevel reorders the tokens of one command (path "" for the app):
// its flags first, then its arguments; the first argument that names a
// subcommand hands the tokens after it to that subcommand.
func reorderLevel(c *cli.Command, path string, tokens []string) ([]string, error) {
	takesValue := flagValues(c.Flags)
	program, isCommandLine := commandLines[path]
	var front, positional []string
	help := false
	// finish puts the flags in front; with --help only them: urfave/cli
	// would take an argument for a help topic ("FILE --help" is help).
	finish := func(rest []string) []string {
		if help {
			return front
		}
		return concat(front, positional, rest)
	}
	for i := 0; i < len(tokens); i++ {
		tok := tokens[i]
		if tok == endOfFlags {
			return finish(tokens[i:]), nil
		}
		if name, ok := flagName(tok); ok {
			help = help || isHelpFlag(name)
			switch {
			case !takesValue[name] || strings.Contains(tok, "="):
				front = append(front, tok)
			case i+1 < len(tokens):
				front = append(front, tok, tokens[i+1])
				i++
			default:
				return nil, &commandUsageError{err: fmt.Errorf("%s: flag %s needs a value", path, dashes(name)),
					path: path, usage: synopsis(c, path)}
			}
			continue
		}
		if len(positional) == 0 {
			if sub := findCommand(c.Subcommands, tok); sub != nil {
				if sub.SkipFlagParsing {
					return concat(front, []string{tok}, tokens[i+1:]), nil
				}
				rest, err := reorderLevel(sub, strings.TrimSpace(path+" "+sub.Name), tokens[i+1:])
				return concat(front, []string{tok}, rest), err
			}
		}
		if isCommandLine && len(positional) >= program {
			return finish(tokens[i:]), nil
		}
		positional = append(positional, tok)
	}
	return finish(nil), nil
}

// isHelpFlag says whether name is one of the help flag's names.
func isHelpFlag(name string) bool {
	for _, n := range cli.HelpFlag.Names() {
		if n == name {
			return true
		}
	}
	return false
}

// flagName is the name in a flag token ("-n", "--name", "--name=v"), and
// false for an argument ("-" is standard input, not a flag).
func flagName(tok string) (string, bool) {
	if len(tok) < 2 || tok[0] != '-' {
		return "", false
	}
	name := strings.TrimPrefix(tok[1:], "-")
	if name == "" {
		return "", false
	}
	name, _, _ = strings.Cut(name, "=")
	return name, true
}

// flagValues maps each name and alias of flags, and of the help flag
// urfave/cli adds, to whether the flag takes a value (a bool does not).
func flagValues(flags []cli.Flag) map[string]bool {
	m := make(map[string]bool)
	for _, f := range concatFlags(flags, cli.HelpFlag) {
		takes := true
		if d, ok := f.(cli.DocGenerationFlag); ok {
			takes = d.TakesValue()
		}
		for _, n := range f.Names() {
			m[n] = takes
		}
	}
	return m
}

// findCommand is the command of subs named or aliased name, or nil.
func findCommand(subs []*cli.Command, name string) *cli.Command {
	for _, c := range subs {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

func concatFlags(flags []cli.Flag, more ...cli.Flag) []cli.Flag {
	return append(append([]cli.Flag(nil), flags...), more...)
}

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
