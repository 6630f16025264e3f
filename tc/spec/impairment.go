package spec

import (
	"errors"
	"strings"
)

// Impairment is what one direction (or one interface's qdisc tree) is
// given: a pipeline of stages, or a class tree whose leaves each run one.
// It is parsed once, where text enters (the command line, the control API,
// an experiment's configuration), and travels inward as this value: no
// layer below parses spec text again or resolves "@FILE" in it.
//
// The zero value is no impairment.
type Impairment struct {
	Pipeline *Spec    // a plain pipeline; nil with Classes or for none
	Classes  *Classes // a class tree; nil for a pipeline
}

// ErrFileRef is matched (errors.Is) by the error for text that starts
// with '@': a file reference, which only the command line of the user who
// typed it resolves, before anything is parsed.
var ErrFileRef = errors.New("a spec starting with '@' names a file, and the proxy reads no files for its callers: " +
	"send the file's contents (the command line resolves @FILE on your side)")

// ParseImpairment parses a direction's text: a class set (IsClasses: htb,
// class, filter and leaf statements, tc class and filter commands, or
// YAML) or a pipeline (Parse). "" is no impairment. It reads no files.
func ParseImpairment(text string) (Impairment, error) {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "@") {
		return Impairment{}, ErrFileRef
	}
	if IsClasses(t) {
		cs, err := ParseClassesAuto([]byte(t))
		if err != nil {
			return Impairment{}, err
		}
		return Impairment{Classes: cs}, nil
	}
	s, err := Parse(t)
	if err != nil {
		return Impairment{}, err
	}
	return Impairment{Pipeline: s}, nil
}

// PipelineImpairment is the impairment of a pipeline (nil: none).
func PipelineImpairment(s *Spec) Impairment { return Impairment{Pipeline: s} }

// String is the canonical text: the class set's line form or the
// pipeline's canonical form ("" for none).
func (im Impairment) String() string {
	switch {
	case im.Classes != nil:
		return im.Classes.String()
	case im.Pipeline != nil:
		return im.Pipeline.String()
	}
	return ""
}

// MustParse is Parse for texts fixed in code (tests, built-in presets): it
// panics on an error.
func MustParse(text string) *Spec {
	s, err := Parse(text)
	if err != nil {
		panic("spec.MustParse(" + text + "): " + err.Error())
	}
	return s
}
