package spec

import (
	"errors"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/units"
)

// seed004 is the seed's HTB tree as tc commands (rates in mbit, filters
// as u32 destination matches instead of route realms), pasted line by line.
const seed004 = `
tc qdisc add dev eth0 root handle 1: htb default 2
tc class add dev eth0 parent 1: classid 1:1 htb rate 100mbit ceil 100mbit
tc class add dev eth0 parent 1:1 classid 1:2 htb rate 20mbit ceil 20mbit
tc class add dev eth0 parent 1:1 classid 1:3 htb rate 50mbit ceil 50mbit
tc class add dev eth0 parent 1:1 classid 1:4 htb rate 20mbit ceil 20mbit
tc filter add dev eth0 parent 1:0 protocol ip prio 100 u32 match ip dst 10.0.2.0/24 flowid 1:2
tc filter add dev eth0 parent 1:0 protocol ip prio 100 u32 match ip dst 10.0.3.0/24 flowid 1:3
tc filter add dev eth0 parent 1:0 protocol ip prio 100 u32 match ip dst 10.0.4.0/24 flowid 1:4
tc qdisc add dev eth0 parent 1:3 handle 30: netem delay 10ms
`

func TestParseClassesSeed004(t *testing.T) {
	cs, err := ParseClasses(seed004)
	if err != nil {
		t.Fatal(err)
	}
	want := "default 1:2; class 1:1 htb rate 100mbit; class 1:2 parent 1:1 htb rate 20mbit; " +
		"class 1:3 parent 1:1 htb rate 50mbit; class 1:4 parent 1:1 htb rate 20mbit; " +
		"filter prio 100 dst 10.0.2.0/24 flowid 1:2; filter prio 100 dst 10.0.3.0/24 flowid 1:3; " +
		"filter prio 100 dst 10.0.4.0/24 flowid 1:4; leaf 1:3 delay 10ms"
	if got := cs.String(); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	again, err := ParseClasses(cs.String())
	if err != nil || again.String() != want {
		t.Fatalf("canonical form reads back as %v, %v", again, err)
	}
	if l := cs.Leaves(); strings.Join(l, ",") != "1:2,1:3,1:4" {
		t.Errorf("leaves %v", l)
	}
}

func TestParseClassesShortForm(t *testing.T) {
	cs, err := ParseClasses("htb default 20 r2q 100; class 1:1 htb rate 100mbit; " +
		"class 1:10 parent 1:1 htb rate 20mbit ceil 100mbit burst 15k prio 1 quantum 3000 limit 50\n" +
		"class 1:20 parent 1:1 htb rate 80mbit # bulk\n" +
		"filter dst 10.0.2.0/24 flowid 1:10; filter protocol udp dport 5000-6000 flowid 1:10\n" +
		"leaf 1:10 delay 10ms | tbf rate 10mbit burst 10kb limit 100kb")
	if err != nil {
		t.Fatal(err)
	}
	c := cs.Class("1:010")
	if c == nil || c.HTB.Ceil != 100*units.Mbit || c.HTB.Burst != 15*1024 || c.HTB.Prio != 1 || c.HTB.Quantum != 3000 || c.HTB.Limit != 50 || len(c.Spec.Stages) != 2 {
		t.Fatalf("class 1:10 = %+v %+v", c, c.HTB)
	}
	if cs.Default != "1:20" || cs.R2Q != 100 || len(cs.Filters) != 2 {
		t.Fatalf("%+v", cs)
	}
}

func TestParseClassesNoTree(t *testing.T) {
	cs, err := ParseClasses("class 1:1; class 1:2; filter dport 443 flowid 1:1; leaf 1:1 delay 50ms loss 1%; default 1:2")
	if err != nil {
		t.Fatal(err)
	}
	if cs.HasTree() || cs.Class("1:1").Spec.String() != "delay 50ms loss 1%" {
		t.Fatalf("%s", cs)
	}
}

func TestParseClassesErrors(t *testing.T) {
	for in, want := range map[string]struct{ tok, msg string }{
		"class 1:1 htb rate 10mbit; class 1:2 parent 1:1 htb rate 5mbit ceil 2mbit":                           {"", "class 1:2: ceil 2mbit is below rate 5mbit"},
		"class 1:1 htb rate 10mbit ceil 20mbt":                                                                {"20mbt", "statement 1, class 1:1: ceil"},
		"class 1:1 htb rate 10mbit; class 1:2 parent 1:9 htb rate 1mbit":                                      {"1:9", "class 1:2: parent 1:9: no such class"},
		"class 1:1 htb rate 10mbit; filter dst 10.0.0.0/33 flowid 1:1":                                        {"10.0.0.0/33", "statement 2, class 1:1: filter: dst"},
		"class 1:1 htb rate 10mbit; filter dst 10.0.0.0/8":                                                    {"10.0.0.0/8", "missing flowid"},
		"class 1:1 htb rate 10mbit; class 1:2 parent 1:1 htb rate 1mbit; filter dst 10.0.0.0/8 flowid 1:1":    {"1:1", "not a leaf class"},
		"class 1:1 htb rate 10mbit; leaf 1:1 delay 10ms lose 1%":                                              {"lose", "statement 2, class 1:1: leaf:"},
		"class 1:1 htb rate 10mbit bogus 3":                                                                   {"bogus", `unknown class option "bogus"`},
		"class 1:1 htb rate 10mbit; class 1:2":                                                                {"1:2", "either every class has htb rates or none"},
		"class 1:1 htb rate 10mbit; class 1:2 parent 1:1 htb rate 8mbit; class 1:3 parent 1:1 htb rate 8mbit": {"1:1", "children's rates add up to 16mbit"},
		"tc filter add dev eth0 parent 1:0 protocol ip prio 100 route to 2 flowid 1:2":                        {"route", `filter "route" is not supported`},
		"class 1:1 htb rate 10mbit; class 1:1 htb rate 1mbit":                                                 {"1:1", "defined twice"},
		"shape 1:1":                       {"shape", "unknown statement"},
		"class 1:1 htb rate 1mbit prio 9": {"9", "prio 9: must be 0-7"},
	} {
		_, err := ParseClasses(in)
		var pe *ParseError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), want.msg) || want.tok != "" && pe.Token != want.tok {
			t.Errorf("%q:\n got %v (token %q)\nwant %q (token %q)", in, err, tokOf(pe), want.msg, want.tok)
		}
	}
}

func tokOf(pe *ParseError) string {
	if pe == nil {
		return ""
	}
	return pe.Token
}

func TestParseClassesYAML(t *testing.T) {
	y := `
default: "1:4"
classes:
  - id: "1:1"
    rate: 100mbit
  - id: "1:2"
    parent: "1:1"
    rate: 20mbit
    ceil: 100mbit
    match: dst 10.0.2.0/24
  - id: "1:3"
    parent: "1:1"
    rate: 50mbit
    ceil: 100mbit
    prio: 1
    match: [dst 10.0.3.0/24, dst fd00:3::/64]
    spec: delay 10ms
  - id: "1:4"
    parent: "1:1"
    rate: 20mbit
filters:
  - {prio: 5, match: "protocol udp", flowid: "1:2"}
`
	cs, err := ParseClassesAuto([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	want := "default 1:4; class 1:1 htb rate 100mbit; class 1:2 parent 1:1 htb rate 20mbit ceil 100mbit; " +
		"class 1:3 parent 1:1 htb rate 50mbit ceil 100mbit prio 1; class 1:4 parent 1:1 htb rate 20mbit; " +
		"filter dst 10.0.2.0/24 flowid 1:2; filter dst 10.0.3.0/24 flowid 1:3; filter dst fd00:3::/64 flowid 1:3; " +
		"filter prio 5 protocol udp flowid 1:2; leaf 1:3 delay 10ms"
	if got := cs.String(); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	_, err = ParseClassesYAML([]byte("classes:\n  - id: \"1:1\"\n    rate: 10mbit\n    colour: red\n"))
	if err == nil || !strings.Contains(err.Error(), "colour") {
		t.Errorf("unknown YAML field: %v", err)
	}
	_, err = ParseClassesYAML([]byte("classes:\n  - id: \"1:1\"\n    rate: 10mbit\n    ceil: 1mbit\n"))
	if err == nil || !strings.Contains(err.Error(), "class 1:1: ceil 1mbit is below rate 10mbit") {
		t.Errorf("YAML ceil below rate: %v", err)
	}
}

func FuzzParseClasses(f *testing.F) {
	f.Add(seed004)
	f.Add("htb default 20 r2q 100; class 1:1 htb rate 100mbit; class 1:10 parent 1:1 htb rate 20mbit ceil 100mbit burst 15k prio 1; filter dst 10.0.2.0/24 flowid 1:10; leaf 1:10 delay 10ms")
	f.Add("class 1:1; class 1:2; filter dport 443 flowid 1:1; default 1:2")
	f.Add("htb default 20; class 1:1 htb rate 100mbit; class 1:20 parent 1:1 htb rate 80mbit; leaf 1:20 fq_codel target 10ms")
	f.Add("htb default 2; class 1:2 htb rate 10mbit; leaf 1:2 delay 5ms | red limit 100kb avpkt 1000 ecn")
	f.Fuzz(func(t *testing.T, s string) {
		cs, err := ParseClasses(s)
		if err != nil {
			return
		}
		again, err := ParseClasses(cs.String())
		if err != nil {
			t.Fatalf("%q printed as %q which fails: %v", s, cs.String(), err)
		}
		if again.String() != cs.String() {
			t.Fatalf("%q: %q reads back as %q", s, cs.String(), again.String())
		}
	})
}

func TestClassesPatch(t *testing.T) {
	cs, err := ParseClasses(seed004)
	if err != nil {
		t.Fatal(err)
	}
	n, err := cs.Patch("class 1:2 parent 1:1 htb rate 30mbit ceil 100mbit; leaf 1:3 delay 20ms")
	if err != nil {
		t.Fatal(err)
	}
	if h := n.Class("1:2").HTB; h.Rate != 30*units.Mbit || h.Ceil != 100*units.Mbit || n.Class("1:3").Spec.String() != "delay 20ms" || len(n.Filters) != 3 {
		t.Fatalf("patched: %s", n)
	}
	if cs.Class("1:2").HTB.Rate != 20*units.Mbit {
		t.Fatal("Patch changed the original")
	}
	if _, err := cs.Patch("class 1:2 parent 1:1 htb rate 60mbit"); err == nil || !strings.Contains(err.Error(), "children's rates add up to 130mbit") {
		t.Errorf("over-committed patch: %v", err)
	}
	for text, want := range map[string]bool{seed004: true, "class 1:1 htb rate 1mbit": true, "delay 10ms": false,
		"tc qdisc add dev eth0 root netem delay 1ms": false, "classes:\n - id: 1:1": true, "tbf rate 1mbit burst 1kb limit 1kb": false} {
		if IsClasses(text) != want {
			t.Errorf("IsClasses(%q) = %v", text, !want)
		}
	}
}

func TestParseClassesYAMLErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"classes:\n  - id: \"1:1\"\n    rate: fast\n", "class 1:1: rate"},
		{"classes:\n  - id: \"1:1\"\n    rate: 1mbit\n    prio: 9\n", "class 1:1: prio 9: must be 0-7"},
		{"classes:\n  - id: \"1:1\"\n    ceil: 1mbit\n", "class 1:1: htb class needs a rate"},
		{"classes:\n  - id: \"1:0\"\n    rate: 1mbit\n", "class 1:: minor number 0"},
		{"classes:\n  - id: \"1:1\"\n  - id: \"1:1\"\n", "class 1:1: defined twice"},
		{"classes:\n  - id: \"1:1\"\n    parent: \"2:\"\n", "class 1:1: parent 2: is not this qdisc"},
		{"classes:\n  - id: \"1:1\"\n    spec: delay soon\n", "class 1:1: spec:"},
		{"classes:\n  - id: \"1:1\"\n    match: dport many\n", "class 1:1: match \"dport many\""},
		{"classes:\n  - id: \"1:1\"\nfilters:\n  - {match: dport 53, flowid: \"1:9\"}\n", "flowid 1:9"},
		{"classes:\n  - rate: 1mbit\n", "class 1: no id"},
	} {
		_, err := ParseClassesYAML([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want one line containing %q", c.yaml, err, c.want)
		}
	}
}

// FuzzParseClassesYAML checks that any tree the YAML form accepts prints
// as line form that reads back to the same tree.
func FuzzParseClassesYAML(f *testing.F) {
	f.Add("default: \"1:2\"\nclasses:\n  - id: \"1:1\"\n    rate: 100mbit\n  - id: \"1:2\"\n    parent: \"1:1\"\n    rate: 20mbit\n    match: dst 10.0.2.0/24\n    spec: delay 10ms\n")
	f.Add("classes:\n  - id: \"1:1\"\n  - id: \"1:2\"\nfilters:\n  - {prio: 2, match: \"protocol udp dport 53\", flowid: \"1:2\"}\n")
	f.Fuzz(func(t *testing.T, s string) {
		cs, err := ParseClassesYAML([]byte(s))
		if err != nil {
			if strings.Contains(err.Error(), "\n") && !strings.Contains(err.Error(), "yaml:") {
				t.Fatalf("%q: error of several lines: %v", s, err)
			}
			return
		}
		again, err := ParseClasses(cs.String())
		if err != nil {
			t.Fatalf("%q printed as %q which fails: %v", s, cs.String(), err)
		}
		if again.String() != cs.String() {
			t.Fatalf("%q: %q reads back as %q", s, cs.String(), again.String())
		}
	})
}

// TestParseChange: text for a running direction is parsed once; a
// pipeline or a set with a root replaces what runs, other class
// statements patch the tree in force, and with no tree they are a whole
// set that fails as one would.
func TestParseChange(t *testing.T) {
	tree := "htb default 2; class 1:1 htb rate 100mbit; class 1:2 parent 1:1 htb rate 20mbit ceil 100mbit"
	cur, err := ParseClasses(tree)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ text, want, err string }{
		{"delay 10ms", "delay 10ms", ""},
		{tree, cur.String(), ""},
		{"class 1:2 parent 1:1 htb rate 30mbit ceil 100mbit", "class 1:2 parent 1:1 htb rate 30mbit ceil 100mbit", ""},
		{"class 1:2 parent 1:1 htb rate 1mbit ceil 1kbit", "", "ceil 1kbit is below rate 1mbit"},
	} {
		ch, err := ParseChange(c.text)
		if err != nil {
			t.Fatalf("%q: %v", c.text, err)
		}
		im, err := ch.Apply(cur)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: error %v, want %q", c.text, err, c.err)
		case c.err == "" && (err != nil || !strings.Contains(im.String(), c.want)):
			t.Errorf("%q: %v, %q; want %q", c.text, err, im.String(), c.want)
		}
	}
	// A patch with no tree running is a whole set, and fails as
	// ParseImpairment does.
	ch, _ := ParseChange("class 1:3 parent 1:9 htb rate 1mbit")
	_, err1 := ch.Apply(nil)
	_, err2 := ParseImpairment("class 1:3 parent 1:9 htb rate 1mbit")
	if err1 == nil || err2 == nil || err1.Error() != err2.Error() {
		t.Errorf("patch of no tree: %v; ParseImpairment: %v", err1, err2)
	}
	if _, err := ParseChange("@/etc/passwd"); !errors.Is(err, ErrFileRef) {
		t.Errorf("@FILE: %v", err)
	}
}

// FuzzParseChange: whatever ParseChange takes applies to a running tree
// and to none without panicking, and what applies prints as text that
// parses as the same impairment.
//
//	go test ./tc/spec -run '^$' -fuzz FuzzParseChange -fuzztime 1m
func FuzzParseChange(f *testing.F) {
	f.Add(seed004)
	f.Add("class 1:2 parent 1:1 htb rate 30mbit ceil 100mbit; leaf 1:3 delay 20ms")
	f.Add("delay 10ms | tbf rate 1mbit burst 10kb limit 100kb")
	f.Add("default 1:3")
	f.Add("@x")
	cur, err := ParseClasses(seed004)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ch, err := ParseChange(s)
		if err != nil {
			return
		}
		for _, c := range []*Classes{cur, nil} {
			im, err := ch.Apply(c)
			if err != nil {
				continue
			}
			again, err := ParseImpairment(im.String())
			if err != nil || again.String() != im.String() {
				t.Fatalf("%q applied gives %q, which reads back as %q (%v)", s, im.String(), again.String(), err)
			}
		}
	})
}
