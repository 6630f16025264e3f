package fit

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/tc/spec"
)

// fieldDir holds public captures of real transfers that other people
// made, beside the clone (the analyzer's field test reads the same).
const fieldDir = "../../shared/captures/field"

// fieldReadingsSource is the analyzer's field test, which holds an
// expert's reading of each field capture (fieldReadings).
const fieldReadingsSource = "../analyzer/field_test.go"

// fieldSides reads, from the analyzer's field test, where the expert
// found each field capture taken: near the main transfer's "sender",
// "receiver", or "unknown" (a LAN). One reading serves both tests.
func fieldSides(t *testing.T) map[string]string {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), fieldReadingsSource, nil, 0)
	if err != nil {
		t.Fatalf("the expert's readings: %v", err)
	}
	sides := map[string]string{}
	ast.Inspect(file, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "fieldReadings" || len(vs.Values) != 1 {
			return true
		}
		list, _ := vs.Values[0].(*ast.CompositeLit)
		for _, e := range list.Elts {
			if r, ok := e.(*ast.CompositeLit); ok && len(r.Elts) >= 2 {
				name, err1 := stringLit(r.Elts[0])
				near, err2 := stringLit(r.Elts[1])
				if err1 != nil || err2 != nil {
					t.Fatalf("%s: a reading without a file and a side: %v", fieldReadingsSource, errors.Join(err1, err2))
				}
				sides[name] = near
			}
		}
		return false
	})
	if len(sides) == 0 {
		t.Fatalf("%s: no fieldReadings", fieldReadingsSource)
	}
	return sides
}

func stringLit(e ast.Expr) (string, error) {
	b, ok := e.(*ast.BasicLit)
	if !ok || b.Kind != token.STRING {
		return "", errors.New("not a string literal")
	}
	return strconv.Unquote(b.Value)
}

// TestFieldCapturesCheckThemselves fits every field capture: each fit
// returns, carries a self-check that ran, is placed where the expert
// read it (analyzer/field_test.go), predicts the path's delay within
// the self-check's timing tolerance (a quarter of the round trip, 2 ms
// at least), and either predicts the median ACK or arrival within it
// too or lists that as unexplained with its claims withheld; and it
// claims nothing its self-check rejected nor a round trip it timed as 0.
func TestFieldCapturesCheckThemselves(t *testing.T) {
	entries, err := os.ReadDir(fieldDir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) || os.Getenv("CI") != "" || os.Getenv("WANLAB_REQUIRE_PRIVILEGED") != "" {
			t.Fatalf("the field captures (%s): %v", fieldDir, err)
		}
		t.Skipf("the field captures are not beside the clone: %v", err)
	}
	sides := fieldSides(t)
	start := time.Now()
	n := 0
	for _, e := range entries {
		name := e.Name()
		if ext := filepath.Ext(name); ext != ".pcap" && ext != ".pcapng" {
			continue
		}
		n++
		t.Run(name, func(t *testing.T) {
			r, err := File(filepath.Join(fieldDir, name), Options{})
			if err != nil {
				t.Fatal(err)
			}
			sc := r.SelfCheck
			if sc == nil || sc.Unchecked != "" || sc.Segments == 0 {
				t.Fatalf("no self-check: %+v", sc)
			}
			data := r.Directions[0]
			sender, receiver := "server", "client"
			if data.From == r.Connection.Client {
				sender, receiver = "client", "server"
			}
			near, ok := sides[name]
			if !ok {
				t.Fatalf("no expert's reading in %s", fieldReadingsSource)
			}
			want := map[string][]string{"sender": {sender}, "receiver": {receiver}, "unknown": {"middle", "unknown"}}[near]
			if !slices.Contains(want, r.CapturedAt) {
				t.Errorf("captured at %q, the expert read it near the data's %s (%v)", r.CapturedAt, near, want)
			}
			rtt := data.Params["rtt_ms"]
			t.Logf("captured at %s (%s), %s error p50 %.3g ms, base %.3g ms, rtt %.4g ms (%s), rtt_p50 %.4g ms",
				r.CapturedAt, near, sc.Compared, sc.ErrorP50Ms, sc.BaseErrorMs, rtt.Value, rtt.Unknown, r.Transfer.RTTP50Ms)
			if rtt.Known() && r.Transfer.RTTP50Ms <= 0 {
				t.Errorf("rtt_p50_ms %v beside a round trip of %v ms", r.Transfer.RTTP50Ms, rtt.Value)
			}
			if sc.Timed == 0 {
				t.Fatalf("no segment timed: %+v", sc)
			}
			tol := msOf(max(timingFloor, time.Duration(timingShare*rtt.Value*float64(time.Millisecond))))
			if !rtt.Known() || sc.BaseErrorMs > tol {
				t.Errorf("the path's delay: base error %.3g ms, tolerance %.3g (rtt %+v)", sc.BaseErrorMs, tol, rtt)
			}
			if sc.ErrorP50Ms > tol && !slices.ContainsFunc(sc.Unexplained, func(u Unexplained) bool { return u.Measure == sc.Compared+"_error_p50_ms" }) {
				t.Errorf("%s error p50 %.3g ms beyond %.3g and not listed unexplained: %+v", sc.Compared, sc.ErrorP50Ms, tol, sc.Unexplained)
			}
			for _, u := range sc.Unexplained {
				for _, name := range u.Withheld {
					for _, d := range r.Directions {
						if p, ok := d.Params[name]; ok && p.Known() {
							t.Errorf("%s claimed (%v) beside the self-check's %s", name, p.Value, u.Measure)
						}
					}
				}
			}
			if c := contradictions(&data, carried{bytes: r.Transfer.Bytes, resent: sc.LossesCaptured}); len(c) > 0 {
				t.Errorf("claims the capture contradicts: %+v", c)
			}
			s, err := spec.Parse(data.Spec)
			if err != nil {
				t.Fatalf("spec %q: %v", data.Spec, err)
			}
			for _, st := range s.Stages {
				if _, ok := st.(*spec.TBF); ok && !data.Params["rate_bps"].Known() {
					t.Errorf("spec %q holds a token bucket, its rate withheld", data.Spec)
				}
			}
		})
	}
	if n == 0 {
		t.Fatalf("no captures in %s", fieldDir)
	}
	t.Logf("%d field captures fitted and checked in %s", n, time.Since(start).Round(time.Millisecond))
}

// TestWindowOfZeroWithheld: a window of 0 bytes beside data carried is
// withheld, with its sysctl.
func TestWindowOfZeroWithheld(t *testing.T) {
	r := &Result{Directions: []Direction{{Data: true, Params: map[string]Param{
		"send_window_bytes": known(0, 0, 0, "median data in flight 0 B"),
		"rtt_ms":            known(20, 19, 21, "handshake"),
	}}}, Sysctls: Sysctls{Client: map[string]string{}, Server: map[string]string{"net.ipv4.tcp_wmem": "4096 0 0"}}}
	cs := contradictions(&r.Directions[0], carried{bytes: 100000})
	if len(cs) != 1 || cs[0].claims[0] != "send_window_bytes" {
		t.Fatalf("contradictions %+v, want the send window's", cs)
	}
	withhold(r, cs[0].claims, cs[0].reason)
	if r.Directions[0].Params["send_window_bytes"].Known() || !r.Directions[0].Params["rtt_ms"].Known() {
		t.Errorf("params %+v: the window alone withheld", r.Directions[0].Params)
	}
	if _, ok := r.Sysctls.Server["net.ipv4.tcp_wmem"]; ok {
		t.Errorf("tcp_wmem kept beside a withheld send window")
	}
}

// TestNoLossBesideResentWithheld: loss 0 beside re-sent segments that
// the tail drops named do not account for is withheld; accounted for,
// it stands.
func TestNoLossBesideResentWithheld(t *testing.T) {
	d := Direction{Data: true, Params: map[string]Param{
		"loss_percent":      known(0, 0, 0.8, "no random loss"),
		"congestion_losses": known(5, 5, 5, "tail drops"),
	}}
	if cs := contradictions(&d, carried{bytes: 500000, resent: 5}); len(cs) != 0 {
		t.Errorf("5 re-sent, 5 tail drops: contradictions %+v", cs)
	}
	cs := contradictions(&d, carried{bytes: 500000, resent: 17})
	if len(cs) != 1 || cs[0].claims[0] != "loss_percent" || cs[0].value != 12 {
		t.Fatalf("17 re-sent, 5 tail drops: contradictions %+v, want loss_percent's (12 unexplained)", cs)
	}
}

// TestRateFarAboveCarriedWithheld: a bottleneck far above the most the
// transfer carried over a round trip is withheld, its token bucket
// dropped from the spec.
func TestRateFarAboveCarriedWithheld(t *testing.T) {
	f := &flow{ipFact: 1}
	// 125 kB a 100 ms round trip, steadily: 10 Mbit/s.
	var curve []curvePoint
	for i := 1; i <= 50; i++ {
		curve = append(curve, curvePoint{time.Duration(i) * 10 * time.Millisecond, int64(i) * 12500})
	}
	c := carriedBy(f, curve, 100*time.Millisecond, 0)
	if c.peakBps < 9.9e6 || c.peakBps > 10.1e6 {
		t.Fatalf("peak carried %v, want 10 Mbit/s", c.peakBps)
	}
	r := &Result{Directions: []Direction{{Data: true, Spec: "delay 50ms | tbf rate 100mbit burst 32kb limit 200kb", Params: map[string]Param{
		"rate_bps":     known(100e6, 95e6, 105e6, "ACK clock"),
		"buffer_bytes": known(200e3, 150e3, 250e3, "queue"),
		"rtt_ms":       known(100, 99, 101, "handshake"),
	}}}}
	near := *r
	near.Directions = []Direction{{Params: map[string]Param{"rate_bps": known(15e6, 14e6, 16e6, "")}}}
	if cs := contradictions(&near.Directions[0], c); len(cs) != 0 {
		t.Errorf("15 Mbit/s beside 10 carried: contradictions %+v", cs)
	}
	cs := contradictions(&r.Directions[0], c)
	if len(cs) != 1 || cs[0].measure != "rate_over_carried" {
		t.Fatalf("100 Mbit/s beside 10 carried: contradictions %+v", cs)
	}
	got := withhold(r, cs[0].claims, cs[0].reason)
	if !slices.Equal(got, []string{"rate_bps", "buffer_bytes"}) {
		t.Errorf("withheld %v, want rate_bps and buffer_bytes", got)
	}
	if s := r.Directions[0].Spec; s != "delay 50ms" {
		t.Errorf("spec %q, want the delay alone", s)
	}
	if !strings.Contains(r.Notes[0], "never reached") {
		t.Errorf("notes %q", r.Notes)
	}
}

// TestReplayThroughABucket: sends at 20 Mbit/s into a 10 Mbit/s bucket
// queue and leave at its rate; the bucket's tail drops are the packets
// it dropped, and the in-order curves of the input and output differ by
// the queue.
func TestReplayThroughABucket(t *testing.T) {
	data, err := spec.Parse("delay 10ms | tbf rate 10mbit burst 3kb limit 30kb")
	if err != nil {
		t.Fatal(err)
	}
	ack, _ := spec.Parse("delay 10ms")
	var sends []send
	for i := range 100 {
		sends = append(sends, send{t: time.Duration(i) * 600 * time.Microsecond, ip: 1500, rec: i})
	}
	rp, err := replay(sends, 100, data, ack)
	if err != nil {
		t.Fatal(err)
	}
	drops, last := 0, time.Duration(0)
	for i := range 100 {
		if rp.dropped[i] != 0 {
			drops++
			if rp.depart[i] >= 0 || rp.ackAt[i] >= 0 {
				t.Errorf("record %d dropped and delivered", i)
			}
			continue
		}
		if rp.ackAt[i]-rp.depart[i] != 10*time.Millisecond {
			t.Errorf("record %d: ACK %v after its departure, want the ACK path's 10 ms", i, rp.ackAt[i]-rp.depart[i])
		}
		last = max(last, rp.depart[i])
	}
	// 100 packets offered in 60 ms at twice the rate: the bucket's 30 kB
	// (20 packets) fill, and about a third of the rest is dropped.
	if drops < 20 || drops > 40 {
		t.Errorf("%d dropped, want the overflow of a 30 kB queue at half the rate (about 30)", drops)
	}
	if want := 10*time.Millisecond + time.Duration(float64(100-drops)*1500*8/10e6*float64(time.Second)); last < want*9/10 || last > want*11/10 {
		t.Errorf("last departure %v, want about %v (the delivered bytes at 10 Mbit/s after the delay)", last, want)
	}
}

// TestCurveGap: the largest difference of two step curves, points at
// the same time taken together.
func TestCurveGap(t *testing.T) {
	a := []curvePoint{{1, 100}, {3, 300}}
	b := []curvePoint{{1, 100}, {2, 150}, {4, 300}}
	if g := curveGap(a, b); g != 150 {
		t.Errorf("gap %d, want 150 (at t 3: 300 against 150)", g)
	}
	got := inOrder([]delivery{{t: 1, lo: 100, hi: 200}, {t: 2, lo: 0, hi: 100}, {t: 3, lo: 200, hi: 300}})
	if !slices.Equal(got, []curvePoint{{2, 200}, {3, 300}}) {
		t.Errorf("in order %v: the range above a hole counts once the hole is filled", got)
	}
}

// TestReplayCostFollowsPackets: a capture's span costs nothing, its
// packets do: two bursts 30 days apart through a slow bucket replay at
// once (a walk per virtual millisecond would take 2.6 billion steps).
func TestReplayCostFollowsPackets(t *testing.T) {
	data, err := spec.Parse("delay 10ms | tbf rate 1mbit burst 3kb limit 30kb")
	if err != nil {
		t.Fatal(err)
	}
	var sends []send
	for i := range 2000 {
		at := time.Duration(i) * time.Millisecond
		if i >= 1000 {
			at += 30 * 24 * time.Hour
		}
		sends = append(sends, send{t: at, ip: 1500, rec: i})
	}
	start := time.Now()
	rp, err := replay(sends, 2000, data, spec.Empty())
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("replay of 2000 packets over 30 days took %v", el)
	}
	// The second burst overflows the bucket as the first did: its first
	// packets leave, 30 days on.
	if d := rp.depart[1000] - sends[1000].t; d < 10*time.Millisecond || d > 20*time.Millisecond {
		t.Errorf("the second burst's first packet left %v after it was sent, want 10 ms (the delay, the bucket full again) after it was sent 30 days on", d)
	}
}

// TestWithheldRoundTripLeavesTheSpecs: a round trip withheld takes the
// delay out of both directions' specs, and what does not stand on it
// stays.
func TestWithheldRoundTripLeavesTheSpecs(t *testing.T) {
	rtt := known(40, 39, 41, "handshake")
	r := &Result{Directions: []Direction{
		{Data: true, Spec: "delay 20ms loss 1%", Params: map[string]Param{"rtt_ms": rtt, "loss_percent": known(1, 0.8, 1.2, "runs")}},
		{Spec: "delay 20ms", Params: map[string]Param{"rtt_ms": rtt}},
	}}
	if got := withhold(r, baseClaims, "withheld: the self-check's base error"); !slices.Equal(got, []string{"rtt_ms"}) {
		t.Errorf("withheld %v, want rtt_ms", got)
	}
	if s0, s1 := r.Directions[0].Spec, r.Directions[1].Spec; s0 != "loss 1%" || s1 != "" {
		t.Errorf("specs %q and %q, want the loss alone and none", s0, s1)
	}
	if len(r.Notes) != 1 {
		t.Errorf("notes %q: one per parameter withheld", r.Notes)
	}
}
