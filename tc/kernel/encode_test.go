package kernel

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/tc/spec"
)

// TestEncodeMatchesTC compares the hand encoding with the TCA_OPTIONS that
// iproute2's tc sends for the same stage (testdata/capture-tc.sh).
func TestEncodeMatchesTC(t *testing.T) {
	f, err := os.Open("testdata/tc-options.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		stage, hexWant, _ := strings.Cut(line, "\t")
		want, err := hex.DecodeString(hexWant)
		if err != nil || len(want) == 0 {
			t.Fatalf("%s: bad golden %q", stage, hexWant)
		}
		s, err := spec.Parse(stage)
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		var got []byte
		switch st := s.Stages[0].(type) {
		case *spec.Netem:
			got, err = EncodeNetem(st)
		case *spec.TBF:
			got, err = DefaultClock.EncodeTBF(st)
		}
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %x\nwant %x", stage, got, want)
		}
		n++
	}
	if n < 20 {
		t.Fatalf("only %d golden lines", n)
	}
}

// TestEncodeNetem64 checks the attributes tc 6.1 (installed here) predates:
// 64-bit latency and jitter (iproute2 6.10+), the seed, distribution
// tables, 64-bit rates, and the duplicate correlation tc forgets.
func TestEncodeNetem64(t *testing.T) {
	attr := func(typ uint16, payload ...[]byte) []byte {
		var a attrs
		a.add(typ, bytes.Join(payload, nil))
		return a.b
	}
	u32 := func(v uint32) []byte { return native.AppendUint32(nil, v) }
	u64 := func(v uint64) []byte { return native.AppendUint64(nil, v) }
	qopt := func(limit, loss, gap, dup uint32) []byte {
		return bytes.Join([][]byte{u32(0), u32(limit), u32(loss), u32(gap), u32(dup), u32(0)}, nil)
	}
	for _, tc := range []struct {
		stage string
		want  []byte
	}{
		{"delay 100ms", cat(qopt(1000, 0, 0, 0), attr(tcaNetemLatency64, u64(uint64(100*time.Millisecond))))},
		{"delay 100ms 10ms 25%", cat(qopt(1000, 0, 0, 0),
			attr(tcaNetemLatency64, u64(uint64(100*time.Millisecond))),
			attr(tcaNetemJitter64, u64(uint64(10*time.Millisecond))),
			attr(tcaNetemCorr, u32(0x40000000), u32(0), u32(0)))},
		{"delay 10ms reorder 25% 50% gap 5", cat(qopt(1000, 0, 5, 0),
			attr(tcaNetemLatency64, u64(uint64(10*time.Millisecond))),
			attr(tcaNetemCorr, u32(0), u32(0), u32(0)),
			attr(tcaNetemReorder, u32(0x40000000), u32(0x80000000)))},
		{"duplicate 1% 50%", cat(qopt(1000, 0, 0, 0x028f5c29), attr(tcaNetemCorr, u32(0), u32(0), u32(0x80000000)))},
		{"loss 1% seed 42", cat(qopt(1000, 0x028f5c29, 0, 0), attr(tcaNetemPRNGSeed, u64(42)))},
		{"rate 40gbit", cat(qopt(1000, 0, 0, 0), attr(tcaNetemRate64, u64(5e9)),
			attr(tcaNetemRate, u32(0xffffffff), u32(0), u32(0), u32(0)))},
		{"delay 5s 3s", cat(qopt(1000, 0, 0, 0), attr(tcaNetemLatency64, u64(uint64(5*time.Second))),
			attr(tcaNetemJitter64, u64(uint64(3*time.Second))))},
		{"delay 20ms 5ms distribution normal", cat(qopt(1000, 0, 0, 0),
			attr(tcaNetemLatency64, u64(uint64(20*time.Millisecond))),
			attr(tcaNetemJitter64, u64(uint64(5*time.Millisecond))),
			attr(tcaNetemDelayDist, distBytes(spec.DistNormal)))},
	} {
		s, err := spec.Parse(tc.stage)
		if err != nil {
			t.Fatalf("%s: %v", tc.stage, err)
		}
		got, err := EncodeNetem(s.Stages[0].(*spec.Netem))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, tc.want) {
			t.Errorf("%s:\n got %x\nwant %x", tc.stage, got, tc.want)
		}
	}
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestNetemRoundTrip decodes what EncodeNetem wrote: every field of the
// spec survives, so nothing is silently dropped.
func TestNetemRoundTrip(t *testing.T) {
	for _, stage := range []string{
		"delay 100ms",
		"limit 50 delay 100ms 10ms 25% distribution pareto loss 1% 30% ecn duplicate 2% 10% reorder 25% 50% gap 5 corrupt 0.1% 5% rate 10mbit -14 53 5 slot 1ms 5ms packets 10 bytes 64kb seed 7",
		"delay 20ms 5ms distribution paretonormal loss state 1% 10% 5% 80% 1%",
		"loss gemodel 1% 10% 70% 0.1%",
		"rate 40gbit slot distribution normal 2ms 1ms packets 4",
		"delay 3s 2.5s",
	} {
		s, err := spec.Parse(stage)
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		b, err := EncodeNetem(s.Stages[0].(*spec.Netem))
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeNetem(b)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := back.String(), s.Stages[0].String(); got != want {
			t.Errorf("round trip:\n got %s\nwant %s", got, want)
		}
	}
}

// TestTBFDecodeAsKernelDumps decodes the options the kernel dumps back
// (PARMS with times in 64 ns ticks computed by psched_l2t_ns; no BURST,
// no tables) into the typed values.
func TestTBFDecodeAsKernelDumps(t *testing.T) {
	for _, stage := range []string{
		"tbf rate 50mbit burst 50kb limit 500kb",
		"tbf rate 1gbit burst 256kb limit 4mb",
		"tbf rate 8kbit burst 4kb limit 8kb",
		"tbf rate 100mbit burst 64kb limit 1mb peakrate 200mbit mtu 1500b",
		"tbf rate 1mbit burst 32kb limit 64kb mpu 64b",
		"tbf rate 40gbit burst 1mb limit 16mb",
		"tbf rate 123456bit burst 10000b limit 20000b",
		"tbf rate 2mbit burst 16kb limit 32kb overhead 24 linklayer atm",
	} {
		s, err := spec.Parse(stage)
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		want := s.Stages[0].(*spec.TBF)
		b, err := DefaultClock.EncodeTBF(want)
		if err != nil {
			t.Fatal(err)
		}
		dump := kernelDumpTBF(t, b)
		got, err := DefaultClock.DecodeTBF(dump)
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("decode of the kernel's dump:\n got %s\nwant %s", got, want)
		}
	}
}

// kernelDumpTBF mirrors tbf_change + tbf_dump (net/sched/sch_tbf.c): the
// bucket times come from TCA_TBF_BURST/PBURST through psched_l2t_ns, and
// are dumped as PSCHED_NS2TICKS.
func kernelDumpTBF(t *testing.T, opts []byte) []byte {
	p, err := parseTBF(opts)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := parseAttrs(opts)
	burst := native.Uint32(m[tcaTBFBurst])
	p.buffer = newKernelRate(p.rate, p.rate64).psTicks(burst)
	if p.prate64 != 0 {
		p.mtu = newKernelRate(p.peak, p.prate64).psTicks(native.Uint32(m[tcaTBFPBurst]))
	}
	// psched_ratecfg_getrate keeps rate, overhead, mpu and link layer only.
	p.rate = ratespec{rate: p.rate.rate, overhead: p.rate.overhead, mpu: p.rate.mpu, linkLayer: p.rate.linkLayer}
	p.peak = ratespec{rate: p.peak.rate, overhead: p.peak.overhead, mpu: p.peak.mpu, linkLayer: p.peak.linkLayer}
	var w wire
	p.rate.put(&w)
	p.peak.put(&w)
	w.u32(p.limit)
	w.u32(p.buffer)
	w.u32(p.mtu)
	var a attrs
	a.add(tcaTBFParms, w.b)
	if p.rate64 >= 1<<32 {
		a.u64(tcaTBFRate64, p.rate64)
	}
	if p.prate64 >= 1<<32 {
		a.u64(tcaTBFPRate64, p.prate64)
	}
	return a.b
}

func TestCheckNetem(t *testing.T) {
	for stage, want := range map[string]string{
		"delay 5s 2s":   "",
		"delay 5s 3s":   "netem jitter 3s: the kernel caps jitter at 2.147483647s (sch_netem's tabledist is 32-bit): not supported",
		"delay 1s 2.2s": "netem jitter 2200ms: the kernel caps jitter at 2.147483647s (sch_netem's tabledist is 32-bit): not supported",
	} {
		err := CheckNetem(mustParseStage(t, stage).(*spec.Netem))
		if got := fmt.Sprint(err); (want == "" && err != nil) || (want != "" && got != want) {
			t.Errorf("%s: %v, want %q", stage, err, want)
		}
	}
}

func mustParseStage(t *testing.T, s string) spec.Stage {
	t.Helper()
	sp, err := spec.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sp.Stages[0]
}

// TestCheckKept: a stage the kernel holds as sent passes (distribution
// tables aside, which no dump has); a dropped seed is named.
func TestCheckKept(t *testing.T) {
	enc := func(s string) []byte {
		b, err := EncodeNetem(mustNetem(t, s))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if err := checkKept(1, mustNetem(t, "delay 20ms 5ms distribution pareto"), enc("delay 20ms 5ms")); err != nil {
		t.Errorf("a missing table counted as a change: %v", err)
	}
	if err := checkKept(1, mustNetem(t, "slot distribution normal 2ms 1ms packets 4"), enc("slot distribution normal 2ms 1ms packets 4")); err != nil {
		t.Errorf("slot distribution: %v", err)
	}
	err := checkKept(2, mustNetem(t, "loss 1% seed 42"), enc("loss 1%"))
	var ie *IgnoredError
	if !errors.As(err, &ie) || ie.What != "seed 42" || ie.Stage != 2 || !errors.Is(err, ErrNotSupported) {
		t.Errorf("dropped seed: %v", err)
	}
	err = checkKept(1, mustNetem(t, "loss 1% seed 42"), enc("loss 2%"))
	if !errors.As(err, &ie) || ie.What != "" || ie.Kept != "netem loss 2%" {
		t.Errorf("changed loss: %v", err)
	}
}

func mustNetem(t *testing.T, s string) *spec.Netem {
	t.Helper()
	sp, err := spec.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sp.Stages[0].(*spec.Netem)
}

func TestEncodeTraceRefused(t *testing.T) {
	s := spec.MustParse("delay 1ms | trace x data 0,1")
	_, err := encodeStage(Clock{}, s.Stages[1])
	if err == nil || err.Error() != "trace: the kernel has no trace qdisc; replay a trace with wanlab proxy or wanlab simulate" {
		t.Fatalf("encode trace: %v", err)
	}
}
