package proxy

import (
	"fmt"
	"os"
	"strings"

	"github.com/wanlab/wanlab/proxy/engine"
	"github.com/wanlab/wanlab/proxy/htb"
	"github.com/wanlab/wanlab/proxy/release"
	"github.com/wanlab/wanlab/proxy/spec"
)

// Traffic classes (issue 8): a direction's spec text may be a class set
// (spec.IsClasses: htb/class/filter/leaf statements, tc class and filter
// commands, or YAML), or "@FILE" naming a file holding one. The
// direction's pipeline then classifies packets, runs each leaf's own
// stages and shares the link through an htb tree.

// htbOverhead is what each packet is charged on top of its IP length in
// the htb buckets: none, so class rates count IP bytes as the engine's
// tbf does (a tc htb on an Ethernet interface also counts the 14 bytes of
// the link-layer header, which a TUN packet does not have).
const htbOverhead = 0

// readClassesText resolves "@FILE".
func readClassesText(text string) (string, error) {
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, "@") {
		return text, nil
	}
	b, err := os.ReadFile(t[1:])
	if err != nil {
		return "", fmt.Errorf("classes file: %w", err)
	}
	return string(b), nil
}

// isClassesText reports whether a spec text is a class set or a file.
func isClassesText(text string) bool {
	t := strings.TrimSpace(text)
	return strings.HasPrefix(t, "@") || spec.IsClasses(t)
}

// parseClassesText reads a class set (line form, tc commands or YAML).
func parseClassesText(text string) (*spec.Classes, error) {
	t, err := readClassesText(text)
	if err != nil {
		return nil, err
	}
	return spec.ParseClassesAuto([]byte(t))
}

// classOptions fills opt with text's classes.
func classOptions(text string, opt engine.Options) (engine.Options, *spec.Classes, error) {
	cs, err := parseClassesText(text)
	if err != nil {
		return opt, nil, err
	}
	s, err := htb.NewSetup(cs, htb.Options{Overhead: htbOverhead, Now: release.MonotonicNow()})
	if err != nil {
		return opt, nil, err
	}
	return s.Options(opt), cs, nil
}

// setClasses replaces d's classes with text: a whole set when d has none
// or text defines a root class (or is YAML or a file), otherwise a change
// of the running set (spec.Classes.Patch). The swap is atomic
// (engine.Pipeline.Replace).
func (d *direction) setClasses(text string) error {
	cur := d.classes.Load()
	var cs *spec.Classes
	var err error
	whole := cur == nil || strings.HasPrefix(strings.TrimSpace(text), "@")
	if !whole {
		if full, perr := parseClassesText(text); perr == nil && hasRoot(full) {
			whole, cs = true, full
		}
	}
	switch {
	case cs != nil:
	case whole:
		cs, err = parseClassesText(text)
	default:
		cs, err = cur.Patch(text)
	}
	if err != nil {
		return err
	}
	now := release.MonotonicNow()
	if err := htb.Replace(d.pl, cs, htb.Options{Overhead: htbOverhead, Now: now}); err != nil {
		return err
	}
	d.classes.Store(cs)
	return nil
}

func hasRoot(cs *spec.Classes) bool {
	for _, c := range cs.Classes {
		if c.Parent == "" {
			return true
		}
	}
	return false
}

// setPlain replaces d's classes by one plain spec.
func (d *direction) setPlain(s *spec.Spec) error {
	if err := d.pl.Replace([]engine.ClassSpec{{Name: "default", Spec: s}}, nil, nil, release.MonotonicNow()); err != nil {
		return err
	}
	d.classes.Store(nil)
	return nil
}

// specText is d's spec in canonical form: its classes' line form when it
// has classes.
func (d *direction) specText() string {
	if cs := d.classes.Load(); cs != nil {
		return cs.String()
	}
	return d.pl.Spec().String()
}
