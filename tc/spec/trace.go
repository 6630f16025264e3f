package spec

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/wanlab/wanlab/tc/trace"
)

// Trace is a trace-driven link stage: packets leave at the delivery
// opportunities of a mahimahi mm-link trace, OpportunityBytes per
// opportunity counted across packets, and an opportunity nobody uses is
// lost (package trace). The trace loops with its last timestamp as period
// unless Once.
//
// Its buffer is the stage after it when that is a queue kind (as tbf's
// child holds tbf's queue); without one, a tail-drop FIFO of
// DefaultTraceLimit packets.
//
// The stage carries the opportunities, not the file: "trace FILE" is read
// where it is typed (ResolveTraceFiles, called by the command line) and
// becomes "trace NAME data COUNTS", NAME being the file's base name, kept
// for display, and COUNTS trace.Encode's run-length form. Parse refuses
// "trace FILE" with ErrFileRef, as it refuses "@FILE".
type Trace struct {
	Name  string   // label shown in stats (the file's base name)
	Times []uint32 // opportunities in ms since the start (trace.Trace.Times)
	Once  bool     // no loop: after the last opportunity the link is gone
}

// DefaultTraceLimit is the trace stage's buffer in packets when no queue
// stage follows it. mahimahi's default is an unbounded tail-drop queue;
// here it is large but bounded, and what it refuses is counted as queue
// drops.
const DefaultTraceLimit = 10000

// Kind returns "trace".
func (*Trace) Kind() string { return "trace" }

// Trace returns the stage's trace.
func (t *Trace) Trace() *trace.Trace { return &trace.Trace{Times: t.Times} }

// String prints "trace NAME data COUNTS [once]".
func (t *Trace) String() string {
	s := "trace " + t.Name + " data " + t.Trace().Encode()
	if t.Once {
		s += " once"
	}
	return s
}

// Summary is a short description for tables: "trace NAME (N
// opportunities, mean RATE, period P[, once])".
func (t *Trace) Summary() string {
	tr := t.Trace()
	s := fmt.Sprintf("trace %s (%d opportunities, mean %s, period %s", t.Name, len(t.Times), tr.MeanRate().Human(), tr.Period())
	if t.Once {
		s += ", once"
	}
	return s + ")"
}

func (t *Trace) validate() error {
	if err := checkTraceName(t.Name); err != nil {
		return &ParseError{Token: t.Name, Msg: "trace: " + err.Error()}
	}
	if err := t.Trace().Check(); err != nil {
		return &ParseError{Token: "trace", Msg: "trace " + t.Name + ": " + err.Error()}
	}
	return nil
}

// checkTraceName accepts a label that reads back as one word of a spec in
// any text that carries one (a direction's "IFACE=", a class set's ";" and
// "#").
func checkTraceName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("missing NAME")
	case len(name) > 64:
		return fmt.Errorf("name %q: at most 64 characters", name[:64]+"...")
	case name == "data" || name == "once":
		return fmt.Errorf("name %q: a keyword", name)
	case strings.ContainsAny(name, "|=;#@\"'\\") || strings.IndexFunc(name, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0:
		return fmt.Errorf("name %q: use letters, digits and . _ - / : only", name)
	}
	return nil
}

func init() {
	registerKind("trace", stageParser{parse: func(k token, a []token) (Stage, error) { return parseTrace(k, a) }})
}

// parseTrace parses "trace NAME data COUNTS [once]". A NAME without data
// is a file reference: the error wraps ErrFileRef.
func parseTrace(kind token, toks []token) (*Trace, error) {
	if len(toks) == 0 {
		return nil, &ParseError{Pos: kind.pos, Token: kind.text, Msg: "trace: missing FILE"}
	}
	name := toks[0]
	st := &Trace{Name: name.text}
	if err := checkTraceName(name.text); err != nil {
		return nil, &ParseError{Pos: name.pos, Token: name.text, Msg: "trace: " + err.Error()}
	}
	given, err := keywords{
		"data": {once: true, read: arg("COUNTS", func(_, t token) (bool, error) {
			if times, ok := resolved.get(t.text); ok {
				st.Times = times // read from its file in this process: decoded once
				return true, nil
			}
			tr, err := trace.Decode(t.text)
			if err != nil {
				return true, &ParseError{Pos: t.pos, Token: short(t.text), Msg: "trace " + name.text + " data: " + err.Error(), Err: err}
			}
			st.Times = tr.Times
			return true, nil
		})},
		"once": {once: true, read: func(token, *cursor) (bool, error) {
			st.Once = true
			return true, nil
		}},
	}.read("trace", &cursor{toks: toks[1:]}, func(kw token) string {
		msg := fmt.Sprintf("unknown trace keyword %q (want once)", kw.text)
		if netemKeywords[kw.text] || tbfKeywords[kw.text] {
			msg += ` (start another stage with "|")`
		}
		return msg
	})
	if err != nil {
		return nil, err
	}
	if _, ok := given["data"]; !ok {
		return nil, &ParseError{Pos: name.pos, Token: name.text,
			Msg: fmt.Sprintf("trace %s: a trace file is read where it is typed, not here: send its opportunities inline (trace NAME data COUNTS, what the command line sends)", name.text),
			Err: ErrFileRef}
	}
	return st, nil
}

func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// ResolveTraceFiles reads the file of every "trace FILE" in text (a
// pipeline or a class set) with read (os.ReadFile when nil) and replaces
// FILE by "NAME data COUNTS", NAME the file's base name: the form the
// proxy, its API and Parse take. A "trace NAME data ..." already inline is
// left alone; everything else in text is kept as it was. Errors name the
// file and line (trace.Read).
func ResolveTraceFiles(text string, read func(name string) ([]byte, error)) (string, error) {
	if read == nil {
		read = os.ReadFile
	}
	return rewriteAfter(text, "trace", func(file, after string) (string, error) {
		if _, w2, _ := nextWord(after); file == "" || w2 == "data" {
			return file, nil
		}
		data, err := read(file)
		if err != nil {
			return "", fmt.Errorf("trace %s: %w", file, err)
		}
		tr, err := trace.Read(strings.NewReader(string(data)), file)
		if err != nil {
			return "", err
		}
		enc := tr.Encode()
		resolved.put(enc, tr.Times)
		return baseName(file) + " data " + enc, nil
	})
}

// rewriteAfter replaces the word after each whole word w of text (and
// the blanks before it, kept) by what f makes of it and of the text after
// it; the rest of text is kept as it was.
func rewriteAfter(text, w string, f func(word, after string) (string, error)) (string, error) {
	var b strings.Builder
	rest := text
	for {
		i := findWord(rest, w)
		if i < 0 {
			b.WriteString(rest)
			return b.String(), nil
		}
		b.WriteString(rest[:i+len(w)])
		ws, word, after := nextWord(rest[i+len(w):])
		word, err := f(word, after)
		if err != nil {
			return "", err
		}
		b.WriteString(ws + word)
		rest = after
	}
}

// resolved holds the opportunities of the last traces ResolveTraceFiles
// read, by their inline form: parsing the text it returned, in the same
// process, takes them as they were read instead of decoding the list the
// file became (trace.Decode gives the same opportunities back for the
// inline form of any trace trace.Read accepts). Stages share the slices,
// which nothing changes.
var resolved traceMemo

// traceMemo maps inline opportunity lists to their opportunities, keeping
// the last traceMemoSize and at most trace.MaxOpportunities in all (the
// most one trace holds), so a long-running process keeps little.
type traceMemo struct {
	mu   sync.Mutex
	keys []string
	m    map[string][]uint32
	n    int // opportunities held
}

const traceMemoSize = 16

func (t *traceMemo) put(enc string, times []uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string][]uint32{}
	}
	if _, ok := t.m[enc]; ok {
		return
	}
	for len(t.keys) > 0 && (len(t.keys) == traceMemoSize || t.n+len(times) > trace.MaxOpportunities) {
		t.n -= len(t.m[t.keys[0]])
		delete(t.m, t.keys[0])
		t.keys = t.keys[1:]
	}
	t.keys = append(t.keys, enc)
	t.m[enc] = slices.Clip(times)
	t.n += len(times)
}

func (t *traceMemo) get(enc string) ([]uint32, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	times, ok := t.m[enc]
	return times, ok
}

// isWordSep reports whether c ends a word of spec text.
func isWordSep(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '|' || c == ';'
}

// findWord is the index of the first occurrence of w in s as a whole word
// (which may follow the "=" of "IFACE=").
func findWord(s, w string) int {
	off := 0
	for {
		i := strings.Index(s[off:], w)
		if i < 0 {
			return -1
		}
		i += off
		end := i + len(w)
		if (i == 0 || isWordSep(s[i-1]) || s[i-1] == '=') && (end == len(s) || isWordSep(s[end])) {
			return i
		}
		off = end
	}
}

// nextWord splits s into the blanks before its first word, the word, and
// what follows it ("" as word when s has only blanks or the next thing is
// a separator).
func nextWord(s string) (ws, word, rest string) {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	j := i
	for j < len(s) && !isWordSep(s[j]) {
		j++
	}
	return s[:i], s[i:j], s[j:]
}

// baseName is the last element of a path, with characters a trace name
// may not hold replaced by "_".
func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 && i < len(p)-1 {
		p = p[i+1:]
	}
	b := []byte(p)
	for i, c := range b {
		if c <= ' ' || c > '~' || strings.IndexByte("|=;#@\"'\\", c) >= 0 {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	s := string(b)
	if s == "data" || s == "once" || s == "" {
		s = "_" + s
	}
	return s
}

// Abbrev shortens the inline opportunity lists of the trace stages in a
// canonical spec text for tables and logs: "trace lte.down data
// 0,1x1000,2,…" keeps the first 24 characters of each list. The result
// is for people, not for Parse.
func Abbrev(text string) string {
	const keep = 24
	s, _ := rewriteAfter(text, "data", func(w, _ string) (string, error) {
		if len(w) > keep {
			w = w[:keep] + "…"
		}
		return w, nil
	})
	return s
}
