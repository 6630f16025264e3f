package fit

import (
	"strings"
	"testing"
	"time"
)

// TestIntervalsWithinDomain: a fit of two data segments, none lost or
// reordered, bounds the loss and reordering shares by the rule of three,
// 300/n %, which for n = 2 is 150 %: every interval stays within what its
// parameter can be (a share 0 to 100 %, anything else at least 0).
func TestIntervalsWithinDomain(t *testing.T) {
	ms := time.Millisecond
	path := writeCapture(t, []pkt{
		{dir: 0, syn: true, seq: 99, at: 0},
		{dir: 1, syn: true, ack: true, seq: 4999, acknum: 100, at: 30 * ms},
		{dir: 0, ack: true, seq: 100, acknum: 5000, at: 30*ms + 100*time.Microsecond},
		{dir: 1, ack: true, seq: 5000, acknum: 100, payload: 1000, at: 31 * ms},
		{dir: 1, ack: true, seq: 6000, acknum: 100, payload: 1000, at: 31*ms + 10*time.Microsecond},
		{dir: 0, ack: true, seq: 100, acknum: 7000, at: 61 * ms},
		{dir: 1, ack: true, fin: true, seq: 7000, acknum: 100, at: 62 * ms},
	})
	f, err := File(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	shares := 0
	for _, d := range f.Directions {
		for name, p := range d.Params {
			top := 1e300
			if strings.HasSuffix(name, "_percent") {
				top = percentMax
				shares++
			}
			for what, v := range map[string]float64{"value": p.Value, "low": p.Low, "high": p.High} {
				if v < 0 || v > top {
					t.Errorf("%s->%s %s: %s %g outside [0, %g]", d.From, d.To, name, what, v, top)
				}
			}
		}
	}
	if shares == 0 {
		t.Fatal("no share fitted: the test needs one bounded by few samples")
	}
	if ruleOfThree(2) != percentMax || ruleOfThree(300) != 1 {
		t.Errorf("ruleOfThree(2) = %g, (300) = %g", ruleOfThree(2), ruleOfThree(300))
	}
}
