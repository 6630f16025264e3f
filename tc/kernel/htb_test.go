package kernel

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

func goldenHTB(t *testing.T) map[string][]byte {
	t.Helper()
	f, err := os.Open("testdata/tc-htb.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string][]byte{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		k, v, _ := strings.Cut(line, "\t")
		if m[k], err = hex.DecodeString(v); err != nil || len(m[k]) == 0 {
			t.Fatalf("%s: bad golden %q", k, v)
		}
	}
	return m
}

var htbClasses = map[string]HTBClass{
	"class rate 100mbps ceil 100mbps":                                          {HTBClass: spec.HTBClass{Rate: 800 * units.Mbit, Ceil: 800 * units.Mbit}},
	"class rate 20mbps ceil 20mbps":                                            {HTBClass: spec.HTBClass{Rate: 160 * units.Mbit, Ceil: 160 * units.Mbit}},
	"class rate 50mbps ceil 50mbps":                                            {HTBClass: spec.HTBClass{Rate: 400 * units.Mbit, Ceil: 400 * units.Mbit}},
	"class rate 10mbit ceil 20mbit burst 15kb cburst 30kb prio 1 quantum 3000": {HTBClass: spec.HTBClass{Rate: 10 * units.Mbit, Ceil: 20 * units.Mbit, Burst: 15 * units.KiB, CBurst: 30 * units.KiB, Prio: 1, Quantum: 3000}},
	"class rate 1mbit mtu 9000 mpu 64 overhead 24 linklayer atm":               {HTBClass: spec.HTBClass{Rate: units.Mbit}, MTU: 9000, MPU: 64, Overhead: 24, LinkLayer: spec.LinkATM},
	"class rate 40gbit ceil 50gbit":                                            {HTBClass: spec.HTBClass{Rate: 40 * units.Gbit, Ceil: 50 * units.Gbit}},
	"class rate 5mbit burst 10kb/8 cburst 20kb/16":                             {HTBClass: spec.HTBClass{Rate: 5 * units.Mbit, Burst: 10 * units.KiB, CBurst: 20 * units.KiB}, BurstCell: 8, CBurstCell: 16},
}

// TestHTBMatchesTC compares the htb encodings with what tc (iproute2
// main) sends for the same arguments (testdata/capture-tc-htb.sh).
func TestHTBMatchesTC(t *testing.T) {
	golden := goldenHTB(t)
	qlen := uint32(100)
	qdiscs := map[string]HTBQdisc{
		"qdisc default 2":                        {Default: 2},
		"qdisc r2q 5 default 12 direct_qlen 100": {R2Q: 5, Default: 0x12, DirectQlen: &qlen}, // tc reads default in hex
	}
	for args, q := range qdiscs {
		if got := EncodeHTBQdisc(q); !bytes.Equal(got, golden[args]) {
			t.Errorf("%s:\n got %x\nwant %x", args, got, golden[args])
		}
	}
	for args, c := range htbClasses {
		got, err := DefaultClock.EncodeHTBClass(c)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, golden[args]) {
			t.Errorf("%s:\n got %x\nwant %x", args, got, golden[args])
		}
	}
	if len(golden) != len(qdiscs)+len(htbClasses) {
		t.Errorf("%d golden lines, %d tested", len(golden), len(qdiscs)+len(htbClasses))
	}
}
