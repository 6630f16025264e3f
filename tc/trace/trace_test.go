package trace

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestReadErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "lte.down: no valid timestamps found"},
		{"0\n0\n", "lte.down:2: trace must last for a nonzero amount of time"},
		{"1\n\n2\n", "lte.down:2: invalid empty line"},
		{"1\n3\n2\n", "lte.down:3: 2 after 3: timestamps must be monotonically nondecreasing"},
		{"1\n-2\n", `lte.down:2: "-2" is not a millisecond count`},
		{"1\n2x\n", `lte.down:2: "2x" is not a millisecond count 0-2147483647`},
		{"99999999999\n", `lte.down:1: "99999999999" is not a millisecond count 0-2147483647`},
	} {
		_, err := Read(strings.NewReader(c.in), "lte.down")
		if err == nil || err.Error() != c.want {
			t.Errorf("Read(%q) = %v, want %q", c.in, err, c.want)
		}
	}
}

func TestReadWriteEncode(t *testing.T) {
	in := "1\n1\n3\r\n7\n7\n7\n10\n"
	tr, err := Read(strings.NewReader(in), "x")
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint32{1, 1, 3, 7, 7, 7, 10}; !reflect.DeepEqual(tr.Times, want) {
		t.Fatalf("times %v, want %v", tr.Times, want)
	}
	var buf bytes.Buffer
	if err := tr.Write(&buf); err != nil || buf.String() != strings.ReplaceAll(in, "\r", "") {
		t.Fatalf("Write = %q, %v", buf.String(), err)
	}
	enc := tr.Encode()
	if want := "0,2,0,1,0x3,3,0x2,1"; enc != want {
		t.Fatalf("Encode = %q, want %q", enc, want)
	}
	back, err := Decode(enc)
	if err != nil || !reflect.DeepEqual(back, tr) {
		t.Fatalf("Decode(%q) = %v, %v", enc, back, err)
	}
	c, _ := Constant(12_000_000, time.Second)
	if got := c.Encode(); got != "0,1x1000" {
		t.Fatalf("constant 12mbit 1s encodes as %q", got)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "empty opportunity list"},
		{"1", "trace must last for a nonzero amount of time"},
		{"1,0", "the last millisecond holds no opportunity (the last one ends the period)"},
		{"1,", `item 2: trailing ","`},
		{"1,a", `item 2 "a": want COUNT or COUNTxMILLISECONDS`},
		{"1x0", `item 1 "1x0": want COUNT or COUNTxMILLISECONDS (at least 1)`},
		{"1x5000000", `item 1 "1x5000000": more than 4194304 opportunities`},
		{"0x2147483649,1", `item 1 "0x2147483649": period beyond 2147483647 ms`},
	} {
		_, err := Decode(c.in)
		if err == nil || err.Error() != c.want {
			t.Errorf("Decode(%q) = %v, want %q", c.in, err, c.want)
		}
	}
}

func TestGenerators(t *testing.T) {
	c, err := Constant(12_000_000, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st := Summarize(c)
	if st.PeriodMs != 10000 || st.Opportunities != 10000 || st.MeanBps != 12e6 || st.MinBps != 12e6 || st.MaxBps != 12e6 || st.IdleShare != 0 {
		t.Fatalf("constant stats %+v", st)
	}
	s, err := Steps([]Segment{{12_000_000, time.Second}, {0, time.Second}, {6_000_000, time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	st = Summarize(s)
	if want := []float64{12e6, 0, 6e6}; !reflect.DeepEqual(st.PerSecondBps, want) || st.IdleShare != 0.5 {
		t.Fatalf("steps stats %+v", st)
	}
	o, err := OnOff(12_000_000, 500*time.Millisecond, 500*time.Millisecond, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if o.Period() != 2*time.Second || len(o.Times) != 1001 { // the last marks the end
		t.Fatalf("onoff period %s, %d opportunities", o.Period(), len(o.Times))
	}
	m := DefaultMarkov
	a, err := Cellular(m)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Cellular(m)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different traces")
	}
	m.Seed = 2
	if d, _ := Cellular(m); reflect.DeepEqual(a, d) {
		t.Fatal("different seeds, same trace")
	}
	if a.Period() != m.Duration {
		t.Fatalf("cellular period %s", a.Period())
	}
	st = Summarize(a)
	// The levels' geometric mean is about 4.9 Mbit/s, their arithmetic
	// mean 8.9; outages lower it. Any seed lands well inside this.
	if st.MeanBps < 2e6 || st.MeanBps > 16e6 || st.MaxBps > 40e6 {
		t.Fatalf("cellular stats %+v", st)
	}
	if math.IsNaN(st.IdleShare) {
		t.Fatal("NaN idle share")
	}
}

// FuzzRead checks that Read never panics, that its errors are one line
// naming the file, and that what it accepts passes Check and survives
// Encode/Decode and Write/Read unchanged.
//
//	go test ./tc/trace -run '^$' -fuzz FuzzRead -fuzztime 1m
func FuzzRead(f *testing.F) {
	for _, s := range []string{"1\n", "1\n2\n2\n5\n", "0\n0\n", "", "\n", "3\n1\n", "1\r\n2\r\n", "00\n7\n", "4294967296\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := Read(strings.NewReader(in), "f.trace")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.trace") || strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("Read(%q): bad error %q", in, err)
			}
			return
		}
		if err := tr.Check(); err != nil {
			t.Fatalf("Read(%q) accepted a trace failing Check: %v", in, err)
		}
		back, err := Decode(tr.Encode())
		if err != nil || !reflect.DeepEqual(back, tr) {
			t.Fatalf("Encode/Decode of %q: %v", in, err)
		}
		var buf bytes.Buffer
		_ = tr.Write(&buf)
		again, err := Read(&buf, "again")
		if err != nil || !reflect.DeepEqual(again, tr) {
			t.Fatalf("Write/Read of %q: %v", in, err)
		}
	})
}

// FuzzDecode checks Decode: no panic, one-line errors, and a stable
// canonical form for what it accepts.
//
//	go test ./tc/trace -run '^$' -fuzz FuzzDecode -fuzztime 1m
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"0,1x1000", "1,0x9,1", "1", "1,0", "2x3,0x2,5", "x", ",", "1x", "0x2147483647,1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := Decode(in)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("Decode(%q): error not one line: %q", in, err)
			}
			return
		}
		if err := tr.Check(); err != nil {
			t.Fatalf("Decode(%q) accepted a trace failing Check: %v", in, err)
		}
		enc := tr.Encode()
		back, err := Decode(enc)
		if err != nil || !reflect.DeepEqual(back, tr) || back.Encode() != enc {
			t.Fatalf("round trip of %q through %q: %v", in, enc, err)
		}
	})
}

// denseCapacity is the capacity per window counted directly, one
// opportunity at a time: the reference for CapacitySteps and Capacity.
func denseCapacity(t *Trace, bin time.Duration) []float64 {
	period := int64(t.Period() / time.Millisecond)
	binMs := int64(bin / time.Millisecond)
	out := make([]float64, (period+binMs-1)/binMs)
	for _, ms := range t.Times {
		// An opportunity at t ms ends the millisecond (t-1, t]; the one
		// at 0 is the previous loop's last.
		m := (int64(ms) + period - 1) % period
		out[m/binMs] += OpportunityBytes * 8
	}
	for i := range out {
		w := binMs
		if i == len(out)-1 && period%binMs != 0 {
			w = period % binMs
		}
		out[i] /= float64(w) / 1e3
	}
	return out
}

// TestCapacityStepsMatchesCapacity: the steps are the dense windows,
// counted one opportunity at a time, with equal neighbours merged, for any
// trace and bin; Capacity gives the same windows.
func TestCapacityStepsMatchesCapacity(t *testing.T) {
	traces := []*Trace{{Times: []uint32{0, 0, 5, 5, 999, 1000, 1000, 2500, 7003}}, {Times: []uint32{1}}, {Times: []uint32{3, 3, 3}}}
	if c, err := Cellular(DefaultMarkov); err == nil {
		traces = append(traces, c)
	}
	for _, tr := range traces {
		for _, bin := range []time.Duration{time.Millisecond, 7 * time.Millisecond, 100 * time.Millisecond, time.Second, 10 * time.Second} {
			dense := denseCapacity(tr, bin)
			if got := Capacity(tr, bin); !reflect.DeepEqual(got, dense) {
				t.Fatalf("trace of %d, bin %s: Capacity %v, counted %v", len(tr.Times), bin, got, dense)
			}
			var fromSteps []float64
			binMs := int64(bin / time.Millisecond)
			for _, s := range CapacitySteps(tr, bin) {
				for ms := int64(s.Start / time.Millisecond); ms < int64(s.End/time.Millisecond); ms += binMs {
					fromSteps = append(fromSteps, s.Bps)
				}
			}
			if !reflect.DeepEqual(dense, fromSteps) {
				t.Fatalf("trace of %d, bin %s: steps give %v, Capacity %v", len(tr.Times), bin, fromSteps, dense)
			}
		}
	}
}

// TestLongIdleTraceIsCheap: a 15-byte trace whose last opportunity is at
// 2^31-1 ms (24.8 days) summarises and steps in a handful of allocations,
// not one per millisecond or second of its period.
func TestLongIdleTraceIsCheap(t *testing.T) {
	tr, err := Read(strings.NewReader("1\n2\n2147483647\n"), "long")
	if err != nil {
		t.Fatal(err)
	}
	var st Stats
	allocs := testing.AllocsPerRun(3, func() { st = Summarize(tr) })
	if allocs > 20 || st.PerSecondBps != nil || st.MinBps != 0 || st.MaxBps != 2*OpportunityBytes*8 {
		t.Fatalf("Summarize: %.0f allocations, %+v", allocs, st)
	}
	allocs = testing.AllocsPerRun(3, func() { CapacitySteps(tr, time.Millisecond) })
	if steps := CapacitySteps(tr, time.Millisecond); allocs > 20 || len(steps) != 3 {
		t.Fatalf("CapacitySteps: %.0f allocations, %d steps", allocs, len(steps))
	}
}
