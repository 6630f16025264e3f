package main

import (
	"fmt"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// readInput reads a spec, class tree, schedule or config file named on the
// command line: a regular file of at most hostfile.MaxInput, else an error
// naming the file and the limit (exit 2).
func readInput(path string) ([]byte, error) { return hostfile.ReadInput(path, hostfile.MaxInput) }

// readTraceFile reads the FILE of a "trace FILE" stage: a regular file of
// at most hostfile.MaxTrace.
func readTraceFile(path string) ([]byte, error) { return hostfile.ReadInput(path, hostfile.MaxTrace) }

// resolveTraces is spec.ResolveTraceFiles reading traces through
// readTraceFile, FILE relative to dir when dir is not empty.
func resolveTraces(text, dir string) (string, error) {
	return spec.ResolveTraceFiles(text, func(name string) ([]byte, error) {
		if dir != "" && !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		return readTraceFile(name)
	})
}

// queueMemoryFlag is the --queue-memory flag of the proxy and simulate.
func queueMemoryFlag() cli.Flag {
	return &cli.StringFlag{Name: "queue-memory", EnvVars: []string{"WANLAB_QUEUE_MEMORY"},
		Usage: "the most memory queued packets may take (`SIZE`, tc size syntax, e.g. 512mb; default a quarter of this machine's memory): packets beyond it are dropped and counted as queue drops, and a spec whose queues could hold more is warned about"}
}

// queueMemory reads --queue-memory (its default when not set).
func queueMemory(cc *cli.Context) (units.Size, error) {
	if !cc.IsSet("queue-memory") {
		return engine.DefaultQueueMemory(), nil
	}
	v, err := units.ParseSize(cc.String("queue-memory"))
	if err != nil {
		return 0, fmt.Errorf("--queue-memory: %w", err)
	}
	if v < engine.MinQueueMemory {
		return 0, fmt.Errorf("--queue-memory %s: at least %s", v.Human(), engine.MinQueueMemory.Human())
	}
	return v, nil
}
