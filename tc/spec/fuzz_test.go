package spec

import (
	"bufio"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, that every error is a one-line
// *ParseError pointing inside the spec, and that every accepted spec
// validates and round-trips exactly through its canonical form.
//
//	go test ./tc/spec -run '^$' -fuzz FuzzParse -fuzztime 2m
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "delay 100ms", "tbf rate 50mbit burst 50kb limit 500kb",
		"delay 100ms | tbf rate 50mbit burst 50kb limit 500kb",
		"delay 50ms loss 1% | tbf rate 1gbit burst 64kb limit 1mb",
		"delay 100ms 10ms 25% distribution normal", "loss state 5% 20% 3% 40% 1%",
		"loss gemodel 1% 10% 70% 0.1% ecn", "delay 10ms reorder 25% 50% gap 5",
		"rate 5kbit 20 100 5", "rate 1gbit -14 0 -3", "slot 1ms 5ms packets 10 bytes 64kb",
		"slot distribution pareto 800us 100us", "seed 42 corrupt 0.1% duplicate 1% 50%",
		"tbf rate 0.5mbit burst 5kb latency 70ms peakrate 1mbit minburst 1540",
		"tbf rate 1mbit buffer 10kb/16 limit 20kb mpu 64 overhead 4 linklayer atm",
		"trace lte.down data 0,1x1000", "delay 20ms | trace x data 2,0x3,1 once", "trace x", "trace x data 1,0",
		"netem | netem", "dela 100ms", "loss 120%", "limit 0x10 delay 1e3us",
		"sudo tc qdisc add dev ens3 root handle 1:0 netem delay 100ms | tc qdisc add dev ens3 parent 1:1 handle 10:0 tbf rate 50mbit burst 50kb limit 500kb",
		"pfifo limit 100", "bfifo limit 150kb", "codel target 2ms interval 50ms ecn ce_threshold 1ms",
		"tbf rate 10mbit burst 10kb limit 1mb | fq_codel limit 1000 flows 64 quantum 300 noecn drop_batch 8 memory_limit 4mb",
		"delay 100ms | tbf rate 50mbit burst 50kb limit 500kb | fq_codel",
		"pie limit 500 target 20ms tupdate 30ms alpha 4 beta 30 ecn bytemode dq_rate_estimator",
		"red limit 400kb min 30kb max 90kb avpkt 1000 burst 55 probability 0.1 bandwidth 10mbit ecn adaptive harddrop nodrop",
		"red limit 1mb avpkt 1500", "codel | delay 1ms", "red limit 1mb", "fq_codel flows 0",
	} {
		f.Add(s)
	}
	if fh, err := os.Open("testdata/manpage_examples.txt"); err == nil {
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			line := sc.Text()
			for _, kind := range []string{" netem ", " tbf "} {
				if i := strings.Index(line, kind); i >= 0 && !strings.HasPrefix(line, "#") {
					f.Add(line[i+1:])
				}
			}
		}
		fh.Close()
	}
	f.Fuzz(func(t *testing.T, in string) {
		sp, err := Parse(in)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) error %T %v is not a *ParseError", in, err, err)
			}
			if n := len(tokenize(in)); pe.Pos < 1 || pe.Pos > n {
				t.Fatalf("Parse(%q) error position %d outside 1..%d: %v", in, pe.Pos, n, err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("Parse(%q) error is not one line: %q", in, err)
			}
			return
		}
		if err := sp.Validate(); err != nil {
			t.Fatalf("Parse(%q) accepted a spec that does not validate: %v", in, err)
		}
		canon := sp.String()
		again, err := Parse(canon)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", canon, in, err)
		}
		if !reflect.DeepEqual(sp, again) {
			t.Fatalf("round trip of %q through %q:\n got %s\nwant %s", in, canon, dump(again), dump(sp))
		}
		if c2 := again.String(); c2 != canon {
			t.Fatalf("canonical form of %q not stable: %q then %q", in, canon, c2)
		}
	})
}
