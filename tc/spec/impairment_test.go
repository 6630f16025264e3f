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
		if _, plain := im.Pipeline(); err != nil || im.String() != want || !plain {
			t.Errorf("ParseImpairment(%q) = %q (pipeline %v), %v; want pipeline %q", text, im.String(), plain, err, want)
		}
	}
	im, err := ParseImpairment("htb default 2; class 1:1 htb rate 10mbit; class 1:2 parent 1:1 htb rate 5mbit; leaf 1:2 delay 5ms")
	if _, plain := im.Pipeline(); err != nil || im.Classes == nil || plain {
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

func TestHandle(t *testing.T) {
	for in, want := range map[string]string{"1:10": "1:10", "1:0A": "1:a", "1:": "1:", "1:0": "1:", "ffff:ffff": "ffff:ffff"} {
		h, err := ParseHandle(in)
		if err != nil || h.String() != want {
			t.Errorf("ParseHandle(%q) = %v, %v; want %s", in, h, err, want)
		}
	}
	if h := MakeHandle(1, 0x10); h.Major() != 1 || h.Minor() != 0x10 || uint32(h) != 0x10010 {
		t.Errorf("MakeHandle: %#x", uint32(h))
	}
	for _, bad := range []string{"", "1", ":1", "x:1", "1:x", "10000:1"} {
		if _, err := ParseHandle(bad); err == nil {
			t.Errorf("ParseHandle(%q) accepted", bad)
		}
	}
}
