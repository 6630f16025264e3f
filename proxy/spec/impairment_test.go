package spec

import (
	"errors"
	"testing"
)

func TestParseImpairment(t *testing.T) {
	for text, want := range map[string]string{
		"":                "",
		"  delay   50ms ": "delay 50ms",
		"delay 1ms | tbf rate 1mbit burst 10kb limit 100kb": "delay 1ms | tbf rate 1mbit burst 10kb limit 100kb",
	} {
		im, err := ParseImpairment(text)
		if err != nil || im.String() != want || im.Classes != nil {
			t.Errorf("ParseImpairment(%q) = %q (classes %v), %v; want pipeline %q", text, im.String(), im.Classes != nil, err, want)
		}
	}
	im, err := ParseImpairment("htb default 2; class 1:1 htb rate 10mbit; class 1:2 parent 1:1 htb rate 5mbit; leaf 1:2 delay 5ms")
	if err != nil || im.Classes == nil || im.Pipeline != nil {
		t.Fatalf("class set: %+v, %v", im, err)
	}
	if again, err := ParseImpairment(im.String()); err != nil || again.String() != im.String() {
		t.Fatalf("class set does not round-trip: %q -> %q, %v", im.String(), again.String(), err)
	}
	for _, text := range []string{"@/etc/shadow", "  @x"} {
		if _, err := ParseImpairment(text); !errors.Is(err, ErrFileRef) {
			t.Errorf("ParseImpairment(%q): %v, want ErrFileRef", text, err)
		}
	}
	if _, err := ParseImpairment("dela 1ms"); err == nil {
		t.Error("a bad spec parsed")
	}
}
