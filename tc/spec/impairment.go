package spec

import (
	"errors"
	"strings"
)

// Impairment is what one direction (or one interface's qdisc tree) is
// given: a class tree whose leaves each run a pipeline of stages. A plain
// pipeline is the tree of one leaf (PipelineClasses). It is parsed once,
// where text enters (the command line, the control API, an experiment's
// configuration), and travels inward as this value: no layer below parses
// spec text again or resolves "@FILE" in it.
//
// The zero value is no impairment.
type Impairment struct {
	Classes *Classes // nil: none
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
	ch, err := ParseChange(text)
	if err != nil {
		return Impairment{}, err
	}
	return ch.Apply(nil) // no tree runs: class statements are a whole set
}

// Change is what text sent to a running direction says, parsed once where
// it arrives (ParseChange): a whole impairment (a pipeline, or a class set
// with a root class, or YAML), or a change of the classes the direction
// runs (a class, leaf, filter, default or htb statement for a tree in
// force: Classes.Patch). Which one it is depends on what runs, so Apply
// decides.
type Change struct {
	text  string
	whole Impairment
	err   error // the whole parse's error
	// patch is true when text is class statements without a root class:
	// a change of a running tree (or, for a direction without one, a set
	// that fails as a whole with err).
	patch bool
}

// ParseChange parses text for a running direction: "" is no impairment,
// a pipeline or a class set with a root is whole, and other class
// statements change the classes in force. It reads no files; "@FILE" is
// ErrFileRef.
func ParseChange(text string) (Change, error) {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "@") {
		return Change{}, ErrFileRef
	}
	if !IsClasses(t) {
		s, err := Parse(t)
		if err != nil {
			return Change{}, err
		}
		return Change{whole: PipelineImpairment(s)}, nil
	}
	ch := Change{text: t}
	cs, err := ParseClassesAuto([]byte(t))
	if err == nil && cs.hasRoot() {
		ch.whole.Classes = cs
		return ch, nil
	}
	ch.whole.Classes, ch.err, ch.patch = cs, err, true
	return ch, nil
}

// Apply is the impairment the change makes of cur, what the direction
// runs now (nil: no class set): the change itself when it is whole, else
// cur patched (a patch of no set, or of a plain pipeline, is the text as
// a whole set, and fails as that would). Nothing is changed in cur.
func (ch Change) Apply(cur *Classes) (Impairment, error) {
	if _, plain := cur.Pipeline(); plain {
		cur = nil
	}
	switch {
	case !ch.patch:
		return ch.whole, nil
	case cur == nil && ch.err != nil:
		return Impairment{}, ch.err
	case cur == nil:
		return ch.whole, nil
	}
	cs, err := cur.Patch(ch.text)
	return Impairment{Classes: cs}, err
}

// hasRoot reports whether the set has a root class (one without parent).
func (c *Classes) hasRoot() bool {
	for _, x := range c.Classes {
		if x.Parent == "" {
			return true
		}
	}
	return false
}

// PipelineImpairment is the impairment of a pipeline, the tree of one
// leaf (nil: none).
func PipelineImpairment(s *Spec) Impairment {
	if s == nil {
		return Impairment{}
	}
	return Impairment{Classes: PipelineClasses(s)}
}

// Pipeline is the pipeline of an impairment that is one (Classes.Pipeline;
// none is the empty pipeline, nil).
func (im Impairment) Pipeline() (*Spec, bool) { return im.Classes.Pipeline() }

// IsEmpty reports whether im impairs nothing: none, or an empty pipeline.
func (im Impairment) IsEmpty() bool {
	s, plain := im.Pipeline()
	return plain && s.IsEmpty()
}

// String is the canonical text: the class set's line form, a plain
// pipeline's canonical form ("" for none).
func (im Impairment) String() string { return im.Classes.String() }

// MustParse is Parse for texts fixed in code (tests, built-in presets): it
// panics on an error.
func MustParse(text string) *Spec {
	s, err := Parse(text)
	if err != nil {
		panic("spec.MustParse(" + text + "): " + err.Error())
	}
	return s
}
