// Command wanlab explains slow TCP transfers and shows what a bad network does
// to software: a userspace impairing router, a capture analyzer, a TCP tuner
// and benchmarks, in one binary.
package main

import (
	"context"
	"errors"
	"os"
	"runtime/pprof"
	"sort"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/wanlab/wanlab/internal/host"
	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/proxy/device"
	"github.com/wanlab/wanlab/tc/kernel"
)

// Exit codes. Scripts rely on them.
const (
	exitOK       = 0
	exitFailure  = 1 // the operation ran and failed (a target missed, a peer unreachable)
	exitUsage    = 2 // bad flags, bad spec, bad input file
	exitNoPerm   = 3 // needs root / CAP_NET_ADMIN
	exitNoKernel = 4 // the kernel lacks a feature (e.g. netem)
)

// commands is filled by each command file's init through register, so that
// adding a command never touches this file.
var commands []*cli.Command

func register(c *cli.Command) { commands = append(commands, c) }

// prepareOnce sets the commands to the command line's convention
// (usage.go) once: every app newApp makes shares them.
var prepareOnce sync.Once

func newApp() *cli.App {
	sort.Slice(commands, func(i, j int) bool { return commands[i].Name < commands[j].Name })
	prepareOnce.Do(func() { walkCommands(commands, "", prepareCommand) })
	// urfave/cli prefixes a command's HelpName with the app's each time an
	// app is set up: a second app in one process (tests) would show
	// "wanlab wanlab analyze".
	for _, c := range commands {
		c.HelpName = ""
	}
	app := &cli.App{
		Name:  "wanlab",
		Usage: "impair, capture, analyze and tune TCP paths on one machine",
		Description: "wanlab reproduces the classic 'why is this download slow' lab in userspace:\n" +
			"a TUN router that applies tc netem/tbf specs, an offline pcap analyzer that\n" +
			"draws tcptrace/Stevens/RTT/window graphs and diagnoses the limit, a tuner for\n" +
			"the sysctls that bound TCP throughput, and benchmarks of all of it.",
		Commands:             commands,
		EnableBashCompletion: true,
		// tc specs never contain commas, but a repeated --impair must never be
		// split on one either.
		DisableSliceFlagSeparator: true,
		ExitErrHandler:            func(*cli.Context, error) {}, // main maps errors to codes
	}
	prepareApp(app)
	return app
}

func main() {
	os.Exit(reportExit(os.Stderr, runCommandLine(context.Background(), newApp(), os.Args)))
}

// exitCode maps an error to the process exit status, for every command in
// one place: what the user typed or named (a bad flag, spec or file, an
// interface that does not exist) is 2, missing privileges 3, a feature the
// kernel lacks (a qdisc kind, the TUN driver) 4, anything else 1.
func exitCode(err error) int {
	var ec cli.ExitCoder
	switch {
	case errors.As(err, &ec):
		return ec.ExitCode()
	case errors.Is(err, ErrUsage), errors.Is(err, host.ErrNotFound),
		errors.Is(err, hostfile.ErrInput), errors.Is(err, hostfile.ErrExists):
		return exitUsage
	case errors.Is(err, os.ErrPermission):
		return exitNoPerm
	case errors.Is(err, ErrNoKernelSupport), errors.Is(err, kernel.ErrNotSupported), errors.Is(err, device.ErrUnavailable):
		return exitNoKernel
	}
	return exitFailure
}

// ErrUsage marks errors caused by what the user typed or supplied.
var ErrUsage = errors.New("usage")

// ErrNoKernelSupport marks errors where the running kernel lacks a feature.
var ErrNoKernelSupport = errors.New("kernel lacks feature")

// usageError wraps err so that exitCode maps it to exitUsage while the
// message stays the one-line text of err.
func usageError(err error) error {
	if err == nil {
		return nil
	}
	return &kindError{err: err, kind: ErrUsage}
}

type kindError struct {
	err  error
	kind error
}

func (e *kindError) Error() string { return e.err.Error() }
func (e *kindError) Unwrap() []error {
	return []error{e.err, e.kind}
}

// startCPUProfile writes a Go CPU profile to path (nothing when path is
// empty) until the returned stop is called: the hidden --cpuprofile of the
// commands whose speed matters.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := hostfile.CreateOutput(path, 0o600, true)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
