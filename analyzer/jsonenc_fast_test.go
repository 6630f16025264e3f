package analyzer

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// checkJSONFloat compares appendJSONFloat with its general path and with
// encoding/json.
func checkJSONFloat(t *testing.T, f float64) {
	t.Helper()
	got, gerr := appendJSONFloat([]byte("x"), f)
	slow, serr := appendJSONFloatSlow([]byte("x"), f)
	want, werr := json.Marshal(f)
	if (gerr != nil) != (werr != nil) || (gerr != nil) != (serr != nil) {
		t.Fatalf("%v (%#x): errors %v, slow %v, encoding/json %v", f, math.Float64bits(f), gerr, serr, werr)
	}
	if gerr != nil {
		if gerr.Error() != serr.Error() || gerr.Error() != werr.Error() {
			t.Fatalf("%v: error %q, slow %q, encoding/json %q", f, gerr, serr, werr)
		}
		return
	}
	if string(got[1:]) != string(want) || string(slow[1:]) != string(want) {
		t.Fatalf("%v (%#x): got %s, slow %s, encoding/json %s", f, math.Float64bits(f), got[1:], slow[1:], want)
	}
}

func TestJSONFloatFastPaths(t *testing.T) {
	for _, f := range oddFloats {
		checkJSONFloat(t, f)
		checkJSONFloat(t, -f)
		checkJSONFloat(t, math.Nextafter(f, 0))
		checkJSONFloat(t, math.Nextafter(f, math.Inf(1)))
	}
	// Around the edges of the fast paths.
	for _, f := range []float64{1 << 53, 1e-4, 1e10, 1e-6, 1e21, 0.0001, 9999999999.9999, 1<<47 - 1} {
		for i, g := 0, f; i < 50; i, g = i+1, math.Nextafter(g, 0) {
			checkJSONFloat(t, g)
		}
		for i, g := 0, f; i < 50; i, g = i+1, math.Nextafter(g, math.Inf(1)) {
			checkJSONFloat(t, g)
		}
	}
	for _, f := range []float64{math.SmallestNonzeroFloat64, 0x1p-1060, 0x1.fffffffffffffp-1023} { // subnormals
		checkJSONFloat(t, f)
		checkJSONFloat(t, -f)
	}
	r := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 300000; i++ {
		checkJSONFloat(t, randFloat(r))
	}
	// Decimals as a computation makes them: ratios, sums, products.
	for i := 0; i < 300000; i++ {
		a, b := float64(r.IntN(100000)), float64(r.IntN(1000)+1)
		checkJSONFloat(t, a/b)
		checkJSONFloat(t, a/1e3+b/1e6)
		checkJSONFloat(t, float64(r.Int64N(1e12))/math.Pow10(r.IntN(9)))
		checkJSONFloat(t, float64(r.IntN(1e6))*0.01)
	}
}

func checkJSONString(t *testing.T, s string) {
	t.Helper()
	got := appendJSONString([]byte("x"), s)
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if string(got[1:]) != string(want) {
		t.Fatalf("%q: got %s, encoding/json %s", s, got[1:], want)
	}
}

func TestJSONStringFastPath(t *testing.T) {
	for c := 0; c < 256; c++ {
		for _, pos := range []int{0, 3, 7, 8, 9, 15, 16, 20} {
			for _, n := range []int{pos + 1, pos + 5, 24, 40} {
				if n <= pos {
					continue
				}
				s := []byte(strings.Repeat("abcdefgh", 5)[:n])
				s[pos] = byte(c)
				checkJSONString(t, string(s))
			}
		}
	}
	for _, s := range []string{"", "a", "<", "client->server", "a & b <c> \"q\" \\", "\u2028\u2029", "é日本\U0001F600",
		"\xff\xfe", "\xe2\x80", "\xe2\x80\xa8x", "\xed\xa0\x80", "\x00\x01\x1f\x7f", "\b\f\n\r\t",
		strings.Repeat("x", 100) + "\u2028" + strings.Repeat("y", 9), "1234567\xe2\x80\xa81234567"} {
		checkJSONString(t, s)
	}
	r := rand.New(rand.NewPCG(9, 10))
	alphabet := []string{"a", "Z", " ", "<", ">", "&", "\"", "\\", "\n", "\x00", "\x1f", "\x7f", "é", "\u2028",
		"\u2029", "\xff", "\xe2", "\xe2\x80", "日", "\U0001F600", "abcdefgh", "0123456789"}
	for i := 0; i < 200000; i++ {
		var sb strings.Builder
		for n := r.IntN(30); n > 0; n-- {
			sb.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		checkJSONString(t, sb.String())
		raw := make([]byte, r.IntN(40))
		for j := range raw {
			raw[j] = byte(r.Uint32())
		}
		checkJSONString(t, string(raw))
	}
}

// FuzzJSONString checks the string quoting against encoding/json on
// arbitrary bytes.
func FuzzJSONString(f *testing.F) {
	for _, s := range []string{"", "client->server", "<a & b>\u2028\xff\x01", "12345678<12345678"} {
		f.Add(s)
	}
	f.Fuzz(checkJSONString)
}

// FuzzJSONFloat checks the float formatting against encoding/json and
// the general path on arbitrary bit patterns.
func FuzzJSONFloat(f *testing.F) {
	for _, v := range oddFloats {
		f.Add(math.Float64bits(v))
	}
	f.Fuzz(func(t *testing.T, bits uint64) { checkJSONFloat(t, math.Float64frombits(bits)) })
}

// TestJSONSharedDiagnosis checks that a diagnosis met twice is written
// twice the same (the second time copied).
func TestJSONSharedDiagnosis(t *testing.T) {
	if !leafStruct(reflect.TypeFor[Diagnosis]()) || leafStruct(reflect.TypeFor[Direction]()) {
		t.Fatal("Diagnosis should be a leaf struct, Direction not")
	}
	dg := &Diagnosis{Direction: "server->client", Limit: LimitNone, Evidence: []string{"a <b>"}, RateBps: 1.5}
	c := &Connection{Diagnosis: dg}
	c.Directions[0] = &Direction{Diagnosis: &Diagnosis{Limit: LimitLoss}}
	c.Directions[1] = &Direction{Diagnosis: dg}
	want, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := appendConnectionJSON([]byte("prefix"), c)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "prefix"+string(want) {
		t.Fatalf("got  %s\nwant prefix%s", got, want)
	}
}
