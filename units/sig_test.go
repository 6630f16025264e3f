package units

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestSig(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {1, "1"}, {1.5, "1.5"}, {3372.4, "3370"}, {1023.9, "1020"}, {999.5, "1000"}, {99.95, "100"},
		{96800, "96800"}, {4.18e-05, "0.0000418"}, {0.5, "0.5"}, {33.74, "33.7"}, {-0.0337, "-0.0337"},
		{1e21, "1000000000000000000000"}, {100, "100"}, {0.1, "0.1"}, {12.0, "12"}, {2537.364, "2540"},
	} {
		if got := Sig(c.v); got != c.want {
			t.Errorf("Sig(%v) = %q, want %q", c.v, got, c.want)
		}
	}
	// Every value reads back to %.3g's rounding, without an exponent.
	for _, v := range []float64{1e-9, 7.77e-7, 0.0123, 1, 9.99, 123456, 9.995e8, math.Pi * 1e5, -2.5e-3} {
		s := Sig(v)
		if strings.ContainsAny(s, "eE") {
			t.Errorf("Sig(%v) = %q has an exponent", v, s)
		}
		got, err := strconv.ParseFloat(s, 64)
		want, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
		if err != nil || math.Abs(got-want) > 1e-12*math.Abs(want) {
			t.Errorf("Sig(%v) = %q, want the value of %.3g", v, s, v)
		}
	}
}

func FuzzSig(f *testing.F) {
	for _, v := range []float64{0, 1, 3372.4, 4.18e-05, math.MaxFloat64, math.SmallestNonzeroFloat64} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		s := Sig(v)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		if strings.ContainsAny(s, "eE") {
			t.Fatalf("Sig(%v) = %q has an exponent", v, s)
		}
		got, err := strconv.ParseFloat(s, 64)
		want, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
		if math.IsInf(want, 0) { // 1.8e308 rounds past the largest float
			return
		}
		if err != nil || (got != want && math.Abs(got-want) > 1e-9*math.Abs(want)) {
			t.Fatalf("Sig(%v) = %q (%v), want %v", v, s, got, want)
		}
	})
}

func TestSprintf(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{Sprintf("%.3g ms", 3372.4), "3370 ms"},
		{Sprintf("%.2g %% at 95 %%", 0.00003), "0.00003 % at 95 %"},
		{Sprintf("%+.3g", 0.5), "+0.5"},
		{Sprintf("%+.3g", -1234.5), "-1230"},
		{Sprintf("%6.3g|%-6.2g|", 1.5, 2.25), "   1.5|2.2   |"},
		{Sprintf("%d of %s, %.3g%%", 3, "x", 12.345), "3 of x, 12.3%"},
		{Sprintf("%g", 1e21), "1000000000000000000000"},
		{Sprintf("%.3g %v", "s", 1.5), "%!g(string=s) 1.5"},
		{Sprintf("%.3f", 1e6), "1000000.000"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
