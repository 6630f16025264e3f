package spec

import (
	"reflect"
	"strings"
	"testing"
)

// TestQueueKindsRoundTrip parses each queue discipline and checks its
// canonical form (defaults left out, tc's print order) and that the
// canonical form parses back to the same stage.
func TestQueueKindsRoundTrip(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"pfifo", "pfifo"},
		{"pfifo limit 100", "pfifo limit 100"},
		{"pfifo limit 1000", "pfifo"},
		{"bfifo limit 150kb", "bfifo limit 150kb"},
		{"bfifo limit 1514000", "bfifo"},
		{"codel", "codel"},
		{"codel target 5ms interval 100ms limit 1000 noecn", "codel"},
		{"codel limit 500 target 2ms interval 50ms ecn ce_threshold 1ms", "codel limit 500 target 2ms interval 50ms ce_threshold 1ms ecn"},
		{"codel target 2500", "codel target 2500us"},
		{"fq_codel", "fq_codel"},
		{"fq_codel limit 10240 flows 1024 quantum 1514 target 5ms interval 100ms memory_limit 32mb ecn drop_batch 64", "fq_codel"},
		{"fq_codel noecn flows 16 quantum 300 drop_batch 8 memory_limit 4mb ce_threshold 3ms", "fq_codel flows 16 quantum 300 memory_limit 4mb ce_threshold 3ms noecn drop_batch 8"},
		{"tbf rate 10mbit burst 10kb limit 1mb | fq_codel", "tbf rate 10mbit burst 10kb limit 1mb | fq_codel"},
		{"delay 100ms | tbf rate 50mbit burst 50kb limit 500kb | fq_codel target 10ms", "delay 100ms | tbf rate 50mbit burst 50kb limit 500kb | fq_codel target 10ms"},
		{"tc qdisc add dev eth0 parent 1:1 handle 10: codel", "codel"},
	} {
		sp, err := Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if got := sp.String(); got != c.want {
			t.Errorf("Parse(%q).String() = %q, want %q", c.in, got, c.want)
		}
		again, err := Parse(sp.String())
		if err != nil || !reflect.DeepEqual(again, sp) {
			t.Errorf("round trip of %q: %v %v", c.in, again, err)
		}
		if err := sp.Validate(); err != nil {
			t.Errorf("Validate(%q): %v", c.in, err)
		}
	}
}

func TestQueueKindErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"pfifo limit 0", "limit 0: must be 1b-4294967295b at position 3"},
		{"codel | delay 10ms", "stage 2: codel is classless: it must be the last stage (no qdisc can hang from it) at position 2"},
		{"codel target 0", "target 0: must be at least 1us at position 3"},
		{"codel target 1ns", "target 1ns: takes s, ms or us, not ns at position 3"},
		{"codel rate 1mbit", `unknown codel keyword "rate"`},
		{"fq_codel flows 0", "flows 0: must be 1-65536 at position 3"},
		{"fq_codel quantum 100", "quantum 100: must be 256-1048576 at position 3"},
		{"fq_codel target", "target: missing TIME at position 2"},
	} {
		_, err := Parse(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want %q", c.in, err, c.want)
		}
	}
}

func TestREDParamsAsTC(t *testing.T) {
	// tc qdisc add dev X root red limit 400000 min 30000 max 90000 avpkt
	// 1000 burst 55 ecn adaptive bandwidth 10Mbit: tc -d prints "ewma 5
	// probability 0.02 Scell_log 21" (tc_red.c's arithmetic, checked by
	// hand here: W = 2^-5 is the first with 56 - 30 <= (1-(1-W)^55)/W).
	sp, err := Parse("red limit 400000 min 30000 max 90000 avpkt 1000 burst 55 ecn adaptive bandwidth 10mbit")
	if err != nil {
		t.Fatal(err)
	}
	r := sp.Stages[0].(*RED)
	p, err := r.Params(defaultTickInUsec)
	if err != nil {
		t.Fatal(err)
	}
	if p.Wlog != 5 || p.QthMin != 30000 || p.QthMax != 90000 || p.MaxP != 85899345 {
		t.Errorf("params %+v", p)
	}
	// Plog: 0.02/60000 doubled until above 1: 2^22 * 3.33e-7 = 1.4.
	if p.Plog != 22 {
		t.Errorf("Plog %d, want 22", p.Plog)
	}
	if got := sp.String(); got != "red limit 400000b min 30000b max 90000b avpkt 1000b burst 55 ecn adaptive" {
		t.Errorf("canonical %q", got)
	}
}
