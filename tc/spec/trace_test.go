package spec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/tc/trace"
)

func TestParseTrace(t *testing.T) {
	s, err := Parse("delay 20ms | trace lte.down data 0,1x3,0,2 once")
	if err != nil {
		t.Fatal(err)
	}
	tr := s.Stages[1].(*Trace)
	if tr.Name != "lte.down" || !tr.Once || !reflect.DeepEqual(tr.Times, []uint32{1, 2, 3, 5, 5}) {
		t.Fatalf("parsed %+v", tr)
	}
	if got, want := s.String(), "delay 20ms | trace lte.down data 0,1x3,0,2 once"; got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := tr.Summary(); got != "trace lte.down (5 opportunities, mean 12Mbit/s, period 5ms, once)" {
		t.Fatalf("Summary = %q", got)
	}
}

func TestParseTraceErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"trace", "trace: missing FILE at position 1"},
		{"trace lte.down data", "data: missing COUNTS at position 3"},
		{"trace x data 1", "trace x data: trace must last for a nonzero amount of time at position 4"},
		{"trace x data 0,1 once once", "trace: once given twice (first at position 5) at position 6"},
		{"trace x data 0,1 delay 1ms", `unknown trace keyword "delay" (want once) (start another stage with "|") at position 5`},
		{"trace a=b data 0,1", `trace: name "a=b": use letters, digits and . _ - / : only at position 2`},
	} {
		_, err := Parse(c.in)
		if err == nil || err.Error() != c.want {
			t.Errorf("Parse(%q) = %v, want %q", c.in, err, c.want)
		}
	}
	_, err := ParseImpairment("delay 1ms | trace lte.down")
	if !errors.Is(err, ErrFileRef) {
		t.Fatalf("trace FILE: %v, want ErrFileRef", err)
	}
}

func TestResolveTraceFiles(t *testing.T) {
	dir := t.TempDir()
	up := filepath.Join(dir, "lte.up")
	if err := os.WriteFile(up, []byte("1\n2\n2\n4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in := "eth0=delay 20ms|trace " + up + " once | trace keep data 0,1\nleaf 1:2 trace " + up
	got, err := ResolveTraceFiles(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "eth0=delay 20ms|trace lte.up data 0,1,2,0,1 once | trace keep data 0,1\nleaf 1:2 trace lte.up data 0,1,2,0,1"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if _, err := ResolveTraceFiles("trace "+filepath.Join(dir, "missing"), nil); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("1\n0\n"), 0o644)
	if _, err := ResolveTraceFiles("trace "+bad, nil); err == nil || err.Error() != bad+":2: 0 after 1: timestamps must be monotonically nondecreasing" {
		t.Fatalf("bad file: %v", err)
	}
	// A name that is not a valid label is cleaned.
	if got := baseName("/x/my trace=1"); got != "my_trace_1" {
		t.Fatalf("baseName = %q", got)
	}
}

// TestResolvedTraceDecodedOnce: the text ResolveTraceFiles returns parses,
// in the same process, to the opportunities read from the file (the same
// slice each time, not a decoding of the inline list), equal to what
// decoding the list gives; a memo of traceMemoSize forgets the oldest.
func TestResolvedTraceDecodedOnce(t *testing.T) {
	file := filepath.Join(t.TempDir(), "link.trace")
	if err := os.WriteFile(file, []byte("1\n1\n3\n7\n7\n9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	text, err := ResolveTraceFiles("delay 1ms | trace "+file, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := MustParse(text).Stages[1].(*Trace), MustParse(text).Stages[1].(*Trace)
	if &a.Times[0] != &b.Times[0] {
		t.Fatal("the resolved trace was decoded again")
	}
	dec, err := trace.Decode(a.Trace().Encode())
	if err != nil || !slices.Equal(dec.Times, a.Times) {
		t.Fatalf("decoded %v (%v), read %v", dec, err, a.Times)
	}
	var m traceMemo
	for i := range traceMemoSize + 1 {
		m.put(fmt.Sprint(i), []uint32{uint32(i)})
	}
	if _, ok := m.get("0"); ok || len(m.m) != traceMemoSize {
		t.Fatalf("memo of %d holds %d entries, the oldest %v", traceMemoSize, len(m.m), ok)
	}
	if times, ok := m.get(fmt.Sprint(traceMemoSize)); !ok || times[0] != traceMemoSize {
		t.Fatal("the newest entry is missing")
	}
	m.put("big", make([]uint32, trace.MaxOpportunities))
	if _, ok := m.get("big"); !ok || len(m.m) != 1 || m.n != trace.MaxOpportunities {
		t.Fatalf("after a trace of the most opportunities the memo holds %d entries, %d opportunities: want it alone", len(m.m), m.n)
	}
}

// TestResolveTraceNamedTrace: an inline trace named "trace" is left alone
// (its name is not taken for another "trace FILE").
func TestResolveTraceNamedTrace(t *testing.T) {
	in := "delay 1ms | trace trace data 0,1x3"
	got, err := ResolveTraceFiles(in, func(string) ([]byte, error) { return nil, errors.New("read") })
	if err != nil || got != in {
		t.Fatalf("got %q, %v: want %q unchanged", got, err, in)
	}
}
