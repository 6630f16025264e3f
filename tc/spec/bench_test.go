package spec

import "testing"

// BenchmarkParse measures parsing the benchmark spec; parsing is
// off the packet path (once per spec change), so this only guards
// against pathological slowness.
//
//	go test ./tc/spec -run '^$' -bench . -benchmem
func BenchmarkParse(b *testing.B) {
	const in = "delay 50ms loss 1% | tbf rate 1gbit burst 64kb limit 1mb"
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, err := Parse(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkString(b *testing.B) {
	sp, err := Parse("delay 100ms 10ms 25% distribution normal loss gemodel 1% 10% 70% 0.1% ecn | tbf rate 0.5mbit burst 5kb latency 70ms peakrate 1mbit minburst 1540")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = sp.String()
	}
}
