package main

import (
	"path/filepath"

	"github.com/wanlab/wanlab/tc/schedule"
)

// readSchedule reads and parses a schedule file at the edge: "trace FILE"
// in its steps is read here too, FILE relative to the schedule's
// directory.
func readSchedule(path string) (*schedule.Schedule, error) {
	data, err := readInput(path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	resolve := func(text string) (string, error) { return resolveTraces(text, dir) }
	s, err := schedule.Parse(path, data, resolve)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// scheduleHelp describes the schedule file for the commands that take one.
const scheduleHelp = "\n\nA schedule file (--schedule) steps a direction's whole spec over time: lines of\n" +
	"\"AT SPEC\" (AT after the start, e.g. 10s; SPEC a pipeline, empty for none), then \"loop\n" +
	"PERIOD\" to start again or \"end\" to keep the last step; # starts a comment. Each step\n" +
	"replaces the spec as `proxy set` does: packets already inside keep their timing."
