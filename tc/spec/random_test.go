package spec

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// specGen builds stage arguments from random keywords and values, valid or
// not, to reach deep into the grammar where byte-level fuzzing rarely gets.
type specGen struct{ r *rand.Rand }

func (g specGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g specGen) pct() string {
	return g.pick("0%", "1%", "0.1%", "100%", "25", "99.99%", "50%", "3.3333%", "1e-3%", "0x1p-4%", "101%")
}

func (g specGen) tm() string {
	return g.pick("0ms", "1ms", "100ms", "1.5ms", "250us", "17ns", "3", "2s", "0.0001s", "1e3us", "99999999ns")
}

func (g specGen) upTo(n int, f func() string) string {
	var a []string
	for range 1 + g.r.IntN(n) {
		a = append(a, f())
	}
	return strings.Join(a, " ")
}

func (g specGen) netemArg() string {
	switch g.r.IntN(16) {
	case 0:
		return "limit " + g.pick("1", "1000", "1k", "65535", "0x20")
	case 1:
		return g.pick("delay ", "latency ") + strings.Join([]string{g.tm(), g.tm(), g.pct()}[:1+g.r.IntN(3)], " ")
	case 2:
		return "distribution " + g.pick("uniform", "normal", "pareto", "paretonormal")
	case 3:
		return g.pick("loss ", "loss random ", "drop ") + g.upTo(2, g.pct)
	case 4:
		return "loss state " + g.upTo(5, g.pct)
	case 5:
		return "loss gemodel " + g.upTo(4, g.pct)
	case 6:
		return "ecn"
	case 7:
		return g.pick("duplicate ", "corrupt ", "reorder ") + g.upTo(2, g.pct)
	case 8:
		return "gap " + g.pick("0", "1", "5", "010", "0x10")
	case 9:
		return "rate " + strings.Join([]string{g.pick("1mbit", "5kbit", "1Mbps", "0bit", "1001bit", "1gibit"),
			g.pick("0", "-14", "20"), g.pick("0", "53", "100"), g.pick("0", "-5", "5")}[:1+g.r.IntN(4)], " ")
	case 10:
		return "slot " + g.upTo(2, g.tm) + g.pick("", " packets 5", " bytes 64kb", " packets 0 bytes 1500")
	case 11:
		return "slot distribution " + g.pick("uniform", "normal", "pareto", "paretonormal") + " " + g.tm() + " " + g.tm() + g.pick("", " packets 3")
	case 12:
		return "seed " + g.pick("0", "42", "18446744073709551615")
	default:
		return "delay " + g.tm() + " " + g.tm()
	}
}

func (g specGen) tbfArg() string {
	switch g.r.IntN(9) {
	case 0:
		return "rate " + g.pick("1mbit", "0.5mbit", "50mbit", "1gbit", "64kbit", "10gbit", "1KBps")
	case 1:
		return g.pick("burst ", "buffer ", "maxburst ") + g.pick("1500", "5kb", "50kb", "64kb/8", "1mb")
	case 2:
		return "limit " + g.pick("3000", "500kb", "1mb")
	case 3:
		return "latency " + g.pick("70ms", "1ms", "50", "1.5ms", "1s")
	case 4:
		return "peakrate " + g.pick("2mbit", "1gbit", "100gbit")
	case 5:
		return g.pick("mtu ", "minburst ") + g.pick("1514", "1540", "2kb/16")
	case 6:
		return "mpu " + g.pick("64", "0")
	case 7:
		return "overhead " + g.pick("0", "24")
	default:
		return "linklayer " + g.pick("ethernet", "atm", "adsl")
	}
}

// netemArgs returns up to 5 random netem arguments.
func (g specGen) netemArgs() string {
	var a []string
	for range g.r.IntN(6) {
		a = append(a, g.netemArg())
	}
	return strings.Join(a, " ")
}

// tbfArgs returns the required tbf keywords in random order (one of them
// left out now and then), followed by random extras.
func (g specGen) tbfArgs() string {
	req := []string{"rate " + g.pick("1mbit", "50mbit", "1gbit", "64kbit"), "burst " + g.pick("1500", "50kb", "64kb/8"),
		g.pick("limit 500kb", "latency 70ms", "latency 50")}
	g.r.Shuffle(len(req), func(i, j int) { req[i], req[j] = req[j], req[i] })
	if g.r.IntN(10) == 0 {
		req = req[1:]
	}
	for range g.r.IntN(4) {
		req = append(req, g.tbfArg())
	}
	return strings.Join(req, " ")
}

// TestRandomSpecsRoundTrip checks, as FuzzParse does, that every accepted
// random spec validates and round-trips exactly.
func TestRandomSpecsRoundTrip(t *testing.T) {
	g := specGen{rand.New(rand.NewPCG(1, 2))}
	accepted := 0
	for range 20000 {
		var stages []string
		for s := range 1 + g.r.IntN(3) {
			switch {
			case g.r.IntN(2) == 0:
				stages = append(stages, "tbf "+g.tbfArgs())
			case s > 0 || g.r.IntN(2) == 0:
				stages = append(stages, "netem "+g.netemArgs())
			default:
				stages = append(stages, g.netemArgs())
			}
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
