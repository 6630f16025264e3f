package kernel

import (
	"testing"

	"github.com/wanlab/wanlab/proxy/spec"
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
