package main

import (
	"path/filepath"

	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/proxy/spec"
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
