package kernel

import (
	"testing"

	"github.com/wanlab/wanlab/tc/spec"
)

// FuzzDecode feeds arbitrary option bytes, as a kernel (or anything
// writing to a netlink socket) might dump them, to the decoders: they must
// return an error or a stage, never panic, and a decoded stage must encode.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"delay 100ms 10ms 25% distribution normal loss state 1% 10% reorder 5% gap 3 rate 10mbit -14 53 5 slot 1ms 5ms packets 10 seed 1",
		"loss gemodel 1% 10% 70% 0.1% ecn duplicate 1% 50% corrupt 0.1%",
		"tbf rate 50mbit burst 50kb limit 500kb",
		"tbf rate 40gbit burst 1mb latency 20ms peakrate 50gbit mtu 9000b mpu 64b overhead 24 linklayer atm",
	} {
		sp, err := spec.Parse(s)
		if err != nil {
			f.Fatal(err)
		}
		switch st := sp.Stages[0].(type) {
		case *spec.Netem:
			b, _ := EncodeNetem(st)
			f.Add(b, false)
		case *spec.TBF:
			b, _ := DefaultClock.EncodeTBF(st)
			f.Add(b, true)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, isTBF bool) {
		if isTBF {
			st, err := DefaultClock.DecodeTBF(b)
			if err == nil && st.Rate >= 8 && st.Burst > 0 {
				_, _ = DefaultClock.EncodeTBF(st)
			}
			return
		}
		st, err := DecodeNetem(b)
		if err == nil {
			_, _ = EncodeNetem(st)
			_ = st.String()
		}
	})
}

// FuzzDecodeQueues feeds arbitrary option bytes to the queue
// disciplines' decoders (kind picks one): an error or a stage, never a
// panic, and a decoded stage that validates must encode.
func FuzzDecodeQueues(f *testing.F) {
	kinds := []string{"pfifo", "bfifo", "codel", "fq_codel", "pie", "red"}
	for _, s := range []string{
		"pfifo limit 100", "bfifo limit 150kb", "codel limit 500 target 2ms interval 50ms ce_threshold 1ms ecn",
		"fq_codel limit 1000 flows 64 quantum 300 target 10ms interval 50ms memory_limit 4mb noecn drop_batch 8",
		"pie limit 500 target 20ms tupdate 32ms alpha 4 beta 30 ecn bytemode dq_rate_estimator",
		"red limit 500kb min 20kb max 100kb avpkt 1000 probability 0.1 ecn harddrop nodrop",
	} {
		sp, err := spec.Parse(s)
		if err != nil {
			f.Fatal(err)
		}
		b, err := encodeStage(DefaultClock, sp.Stages[0])
		if err != nil {
			f.Fatal(err)
		}
		for i, k := range kinds {
			if k == sp.Stages[0].Kind() {
				f.Add(b, uint8(i))
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, k uint8) {
		kind := kinds[int(k)%len(kinds)]
		st, err := decodeStage(DefaultClock, kind, b)
		if err != nil {
			return
		}
		_ = st.String()
		if (&spec.Spec{Stages: []spec.Stage{st}}).Validate() == nil {
			if _, err := encodeStage(DefaultClock, st); err != nil {
				t.Fatalf("%s decoded from %x validates but does not encode: %v", st, b, err)
			}
		}
	})
}
