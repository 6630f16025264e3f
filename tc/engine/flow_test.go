package engine

import (
	"strings"
	"testing"
)

func TestParseFlowErrors(t *testing.T) {
	for in, want := range map[string]string{
		"dst=10.0.0.1":                        "needs dst=ADDRESS and rate=RATE",
		"dst=10.0.0.1,rate=1mbit,x=1":         `unknown key "x"`,
		"dst=10.0.0.300,rate=1mbit":           `dst "10.0.0.300"`,
		"dst=10.0.0.1,rate=1mbit,size=10":     "must be 48-65535",
		"dst=fd00::1,src=10.0.0.1,rate=1mbit": "different families",
	} {
		if _, err := ParseFlow(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}

// FuzzParseFlow: ParseFlow never panics, and what it prints it reads back.
func FuzzParseFlow(f *testing.F) {
	for _, s := range []string{"dst=10.0.2.1,rate=50mbit", "dst=fd00::2,rate=1mbit,proto=tcp,sport=1,dport=80,dscp=46,size=600,start=1s,stop=2s",
		"dst=10.0.0.1,src=10.0.0.9,rate=1gbit", "dst=10.0.0.1", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fl, err := ParseFlow(s)
		if err != nil {
			return
		}
		if _, err := ParseFlow(fl.String()); err != nil {
			t.Fatalf("%q: printed as %q, which does not parse: %v", s, fl.String(), err)
		}
	})
}
