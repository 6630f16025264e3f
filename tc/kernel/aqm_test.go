package kernel

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/wanlab/wanlab/tc/spec"
)

// TestEncodeQueuesMatchesTC compares the queue disciplines' encoding with
// the TCA_OPTIONS iproute2's tc sends (testdata/capture-tc-aqm.sh).
func TestEncodeQueuesMatchesTC(t *testing.T) {
	f, err := os.Open("testdata/tc-aqm-options.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		stage, hexWant, _ := strings.Cut(line, "\t")
		want, err := hex.DecodeString(hexWant)
		if err != nil {
			t.Fatalf("%s: bad golden %q", stage, hexWant)
		}
		s, err := spec.Parse(stage)
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		got, err := encodeStage(DefaultClock, s.Stages[0])
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %x\nwant %x", stage, got, want)
		}
		n++
	}
	if n < 10 {
		t.Fatalf("only %d golden lines", n)
	}
}

// TestDecodeQueues reads back what the kernel would dump for each kind
// (the encoder's attributes, plus the kernel's rounding of times) into the
// spec typed.
func TestDecodeQueues(t *testing.T) {
	for _, s := range []string{
		"codel", "codel limit 500 target 2ms interval 50ms ce_threshold 1ms ecn", "codel target 2500us",
		"fq_codel", "fq_codel limit 1000 flows 64 quantum 300 target 10ms interval 50ms memory_limit 4mb noecn drop_batch 8",
		"pie", "pie limit 500 target 20ms tupdate 30ms alpha 4 beta 30 ecn bytemode dq_rate_estimator",
		"pfifo limit 100", "bfifo limit 150kb",
	} {
		sp, err := spec.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		st := sp.Stages[0]
		b, err := encodeStage(DefaultClock, st)
		if err != nil {
			t.Fatal(err)
		}
		b = kernelRounds(t, st.Kind(), b)
		got, err := decodeStage(DefaultClock, st.Kind(), b)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if !reflect.DeepEqual(got, st) {
			t.Errorf("%s: decoded %s", s, got)
		}
	}
	// red keeps limit, min, max, max_P and the flags.
	sp, _ := spec.Parse("red limit 500kb min 20kb max 100kb avpkt 1000 probability 0.1 bandwidth 100mbit ecn harddrop nodrop")
	b, err := encodeStage(DefaultClock, sp.Stages[0])
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeRED(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := "red limit 500kb min 20kb max 100kb probability 0.1 ecn harddrop nodrop"; got.String() != want {
		t.Errorf("red decoded %q, want %q", got, want)
	}
}

// kernelRounds applies the kernel's storage to times in codel's and pie's
// options, as their dump functions report them, and adds what they dump
// unasked (every value).
func kernelRounds(t *testing.T, kind string, b []byte) []byte {
	t.Helper()
	if kind != "codel" && kind != "fq_codel" && kind != "pie" {
		return b
	}
	m, err := parseAttrs(b)
	if err != nil {
		t.Fatal(err)
	}
	var times map[uint16]func(uint32) uint32
	switch kind {
	case "codel":
		times = map[uint16]func(uint32) uint32{tcaCodelTarget: codelUs, tcaCodelInterval: codelUs, tcaCodelCEThreshold: codelUs}
		def := map[uint16]uint32{tcaCodelTarget: 5000, tcaCodelInterval: 100000, tcaCodelLimit: 1000, tcaCodelECN: 0}
		fill(m, def)
	case "fq_codel":
		times = map[uint16]func(uint32) uint32{tcaFQCodelTarget: codelUs, tcaFQCodelInterval: codelUs, tcaFQCodelCEThreshold: codelUs}
		fill(m, map[uint16]uint32{tcaFQCodelTarget: 5000, tcaFQCodelInterval: 100000, tcaFQCodelLimit: 10240,
			tcaFQCodelECN: 1, tcaFQCodelFlows: 1024, tcaFQCodelQuantum: 1514, tcaFQCodelDropBatch: 64, tcaFQCodelMemoryLimit: 32 << 20})
	case "pie":
		times = map[uint16]func(uint32) uint32{tcaPIETarget: pieUs}
		fill(m, map[uint16]uint32{tcaPIETarget: 15000, tcaPIELimit: 1000, tcaPIETUpdate: 15000, tcaPIEAlpha: 2, tcaPIEBeta: 20,
			tcaPIEECN: 0, tcaPIEBytemode: 0, tcaPIEDQRateEstimator: 0})
	default:
		return b
	}
	var a attrs
	for typ := uint16(1); typ < 16; typ++ {
		v, ok := m[typ]
		if !ok {
			continue
		}
		if rt := times[typ]; rt != nil {
			v = native.AppendUint32(nil, rt(native.Uint32(v)))
		}
		a.add(typ, v)
	}
	return a.b
}

func fill(m map[uint16][]byte, def map[uint16]uint32) {
	for k, v := range def {
		if _, ok := m[k]; !ok {
			m[k] = native.AppendUint32(nil, v)
		}
	}
}
