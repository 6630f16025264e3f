package engine

import (
	"strings"
	"testing"

	"github.com/wanlab/wanlab/tc/spec"
)

// TestDelayLimitWarnings: a delay warns when the packets inside it (the
// rate reaching it times delay plus jitter) exceed its limit, with the
// limit that holds them; simulate's open load is slowed only by rate
// stages before the delay, a link's TCP load by its slowest rate.
func TestDelayLimitWarnings(t *testing.T) {
	for _, c := range []struct {
		spec string
		load OfferedLoad
		want string // "" for no warning
	}{
		{"delay 20ms", SimLoad(100000, 1500), "about 2000 packets are inside at once and the rest are dropped, as netem drops them: write 'limit 2000' or more"},
		{"delay 20ms limit 2000", SimLoad(100000, 1500), ""},
		{"delay 15ms 5ms", SimLoad(100000, 1500), "delay 15ms 5ms: its limit of 1000 packets holds 20ms of 50000 packets/s"},
		{"delay 5ms", SimLoad(100000, 1500), ""},
		{"tbf rate 100mbit burst 32kb limit 1mb | netem delay 20ms", SimLoad(100000, 1500), ""},
		{"delay 20ms | tbf rate 100mbit burst 32kb limit 1mb", SimLoad(100000, 1500), "write 'limit 2000'"},
		{"delay 20ms", linkLoad(t, "delay 20ms"), "(the spec has no rate, so a flood at 1gbit line rate of 1500-byte packets is assumed) about 1670 packets are inside at once and the rest are dropped, as netem drops them: write 'limit 1667' or more"},
		{"delay 10ms", linkLoad(t, "delay 10ms"), ""},
		{"delay 20ms | tbf rate 100mbit burst 32kb limit 1mb", linkLoad(t, "delay 20ms | tbf rate 100mbit burst 32kb limit 1mb"), ""},
		{"delay 200ms | tbf rate 100mbit burst 32kb limit 1mb", linkLoad(t, "delay 200ms | tbf rate 100mbit burst 32kb limit 1mb"),
			"(TCP filling the link at its tbf rate 100mbit in 1500-byte packets) about 1670 packets are inside at once"},
		{"delay 1e9s limit 4294967295", SimLoad(10, 1500), "no limit holds it (netem's largest is 4294967295): shorten the delay"},
	} {
		s, err := spec.Parse(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		w := DelayLimitWarnings(s, c.load)
		switch {
		case c.want == "" && len(w) != 0:
			t.Errorf("%s: warnings %q, want none", c.spec, w)
		case c.want != "" && (len(w) != 1 || !strings.Contains(w[0], c.want)):
			t.Errorf("%s: warnings %q, want one with %q", c.spec, w, c.want)
		}
	}
}

func linkLoad(t *testing.T, text string) OfferedLoad {
	t.Helper()
	s, err := spec.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return LinkLoad(s, 0)
}

// TestDelayLimitWarningsOfClasses: a direction without an impairment has
// nothing to warn of; an htb leaf's ceil is the rate its delay is offered.
func TestDelayLimitWarningsOfClasses(t *testing.T) {
	empty, err := spec.ParseImpairment("")
	if err != nil {
		t.Fatal(err)
	}
	if w := DelayLimitWarningsOfClasses(empty.Classes); len(w) != 0 {
		t.Fatalf("empty spec: %q", w)
	}
	plain, err := spec.ParseImpairment("delay 20ms")
	if err != nil {
		t.Fatal(err)
	}
	if w := DelayLimitWarningsOfClasses(plain.Classes); len(w) != 1 || !strings.Contains(w[0], "write 'limit 1667'") {
		t.Fatalf("delay 20ms: %q", w)
	}
	// At the leaf's 10mbit ceil, 833 packets/s: 300 ms holds 250.
	for _, c := range []struct {
		text  string
		warns bool
	}{
		{"htb default 2; class 1:1 htb rate 10mbit; class 1:2 parent 1:1 htb rate 5mbit ceil 10mbit; leaf 1:2 delay 300ms", false},
		{"htb default 2; class 1:1 htb rate 10mbit; class 1:2 parent 1:1 htb rate 5mbit ceil 10mbit; leaf 1:2 delay 300ms limit 200", true},
	} {
		tree, err := spec.ParseImpairment(c.text)
		if err != nil {
			t.Fatal(err)
		}
		w := DelayLimitWarningsOfClasses(tree.Classes)
		if c.warns != (len(w) == 1 && strings.HasPrefix(w[0], "leaf 1:2: delay 300ms") && strings.Contains(w[0], "htb ceil 10mbit")) || !c.warns && len(w) != 0 {
			t.Errorf("%s: %q", c.text, w)
		}
	}
}
