package spec

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestRandomSpecsRoundTrip builds specs from random keywords and values
// (valid or not) with a fixed seed and checks, as FuzzParse does, that
// every accepted one validates and round-trips exactly. It reaches deep
// into the grammar where byte-level fuzzing rarely gets.
func TestRandomSpecsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	pct := func() string {
		return pick("0%", "1%", "0.1%", "100%", "25", "99.99%", "50%", "3.3333%", "1e-3%", "0x1p-4%", "101%")
	}
	tm := func() string {
		return pick("0ms", "1ms", "100ms", "1.5ms", "250us", "17ns", "3", "2s", "0.0001s", "1e3us", "99999999ns")
	}
	netemArg := func() string {
		switch r.IntN(16) {
		case 0:
			return "limit " + pick("1", "1000", "1k", "65535", "0x20")
		case 1:
			return pick("delay ", "latency ") + strings.Join([]string{tm(), tm(), pct()}[:1+r.IntN(3)], " ")
		case 2:
			return "distribution " + pick("uniform", "normal", "pareto", "paretonormal")
		case 3:
			return pick("loss ", "loss random ", "drop ") + strings.Join([]string{pct(), pct()}[:1+r.IntN(2)], " ")
		case 4:
			return "loss state " + strings.Join([]string{pct(), pct(), pct(), pct(), pct()}[:1+r.IntN(5)], " ")
		case 5:
			return "loss gemodel " + strings.Join([]string{pct(), pct(), pct(), pct()}[:1+r.IntN(4)], " ")
		case 6:
			return "ecn"
		case 7:
			return pick("duplicate ", "corrupt ", "reorder ") + strings.Join([]string{pct(), pct()}[:1+r.IntN(2)], " ")
		case 8:
			return "gap " + pick("0", "1", "5", "010", "0x10")
		case 9:
			return "rate " + strings.Join([]string{pick("1mbit", "5kbit", "1Mbps", "0bit", "1001bit", "1gibit"),
				pick("0", "-14", "20"), pick("0", "53", "100"), pick("0", "-5", "5")}[:1+r.IntN(4)], " ")
		case 10:
			return "slot " + strings.Join([]string{tm(), tm()}[:1+r.IntN(2)], " ") + pick("", " packets 5", " bytes 64kb", " packets 0 bytes 1500")
		case 11:
			return "slot distribution " + pick("uniform", "normal", "pareto", "paretonormal") + " " + tm() + " " + tm() + pick("", " packets 3")
		case 12:
			return "seed " + pick("0", "42", "18446744073709551615")
		default:
			return "delay " + tm() + " " + tm()
		}
	}
	tbfArg := func() string {
		switch r.IntN(9) {
		case 0:
			return "rate " + pick("1mbit", "0.5mbit", "50mbit", "1gbit", "64kbit", "10gbit", "1KBps")
		case 1:
			return pick("burst ", "buffer ", "maxburst ") + pick("1500", "5kb", "50kb", "64kb/8", "1mb")
		case 2:
			return "limit " + pick("3000", "500kb", "1mb")
		case 3:
			return "latency " + pick("70ms", "1ms", "50", "1.5ms", "1s")
		case 4:
			return "peakrate " + pick("2mbit", "1gbit", "100gbit")
		case 5:
			return pick("mtu ", "minburst ") + pick("1514", "1540", "2kb/16")
		case 6:
			return "mpu " + pick("64", "0")
		case 7:
			return "overhead " + pick("0", "24")
		default:
			return "linklayer " + pick("ethernet", "atm", "adsl")
		}
	}
	accepted := 0
	for range 20000 {
		var stages []string
		for s := range 1 + r.IntN(3) {
			var args []string
			if r.IntN(2) == 0 {
				// The required keywords in random order, mostly, then extras.
				req := []string{"rate " + pick("1mbit", "50mbit", "1gbit", "64kbit"), "burst " + pick("1500", "50kb", "64kb/8"),
					pick("limit 500kb", "latency 70ms", "latency 50")}
				r.Shuffle(len(req), func(i, j int) { req[i], req[j] = req[j], req[i] })
				if r.IntN(10) == 0 {
					req = req[1:]
				}
				args = append(append(args, "tbf"), req...)
				for range r.IntN(4) {
					args = append(args, tbfArg())
				}
			} else {
				if s > 0 || r.IntN(2) == 0 {
					args = append(args, "netem")
				}
				for range r.IntN(6) {
					args = append(args, netemArg())
				}
			}
			stages = append(stages, strings.Join(args, " "))
		}
		in := strings.Join(stages, " | ")
		sp, err := Parse(in)
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("Parse(%q) error %T", in, err)
			}
			continue
		}
		accepted++
		checkRoundTrip(t, in, sp)
	}
	if accepted < 4000 {
		t.Errorf("only %d of 20000 random specs were accepted; the generator no longer exercises the printer", accepted)
	}
	t.Logf("%d of 20000 random specs accepted and round-tripped", accepted)
}
