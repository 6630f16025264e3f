package proxy

import (
	"strings"
	"testing"
)

// A direction's spec may be a class tree; set replaces it whole, changes
// one class of it, or turns it back into a plain spec.
func TestClassesSetAndPatch(t *testing.T) {
	tree := "htb default 2; class 1:1 htb rate 100mbit; class 1:2 parent 1:1 htb rate 20mbit ceil 100mbit; " +
		"class 1:3 parent 1:1 htb rate 50mbit; filter dst 10.0.3.0/24 flowid 1:3"
	p, _ := fakeProxy(t, [2]string{"", tree})
	if got := p.Specs()["eth-b"]; !strings.Contains(got, "class 1:3 parent 1:1 htb rate 50mbit") {
		t.Fatalf("started with %q", got)
	}
	if err := p.SetSpec("eth-b", "class 1:3 parent 1:1 htb rate 60mbit; leaf 1:3 delay 5ms"); err != nil {
		t.Fatal(err)
	}
	got := p.Specs()["eth-b"]
	if !strings.Contains(got, "class 1:3 parent 1:1 htb rate 60mbit") || !strings.Contains(got, "leaf 1:3 delay 5ms") ||
		!strings.Contains(got, "filter dst 10.0.3.0/24 flowid 1:3") {
		t.Fatalf("after a patch: %q", got)
	}
	names := []string{}
	for _, c := range p.Stats().Directions[1].Engine.Classes {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "1:2,1:3" {
		t.Errorf("engine classes %v, want 1:2 (default) and 1:3", names)
	}
	err := p.SetSpec("eth-b", "class 1:3 parent 1:1 htb rate 90mbit")
	if err == nil || !strings.Contains(err.Error(), "children's rates add up to 110mbit") {
		t.Errorf("over-committed change: %v", err)
	}
	if got2 := p.Specs()["eth-b"]; got2 != got {
		t.Errorf("a refused change altered the tree: %q", got2)
	}
	if err := p.SetSpec("eth-b", "delay 10ms"); err != nil {
		t.Fatal(err)
	}
	if got := p.Specs()["eth-b"]; got != "delay 10ms" {
		t.Errorf("back to a plain spec: %q", got)
	}
	if err := p.SetSpec("eth-b", "class 1:1 htb rate 1mbit ceil 1kbit"); err == nil || !strings.Contains(err.Error(), "ceil 1kbit is below rate 1mbit") {
		t.Errorf("bad tree: %v", err)
	}
}
