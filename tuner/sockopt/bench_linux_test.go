package sockopt_test

import (
	"io"
	"testing"

	"github.com/wanlab/wanlab/tuner/sockopt"
)

// BenchmarkQuickAckConnRead measures a read plus the TCP_QUICKACK re-arm
// that follows it: one setsockopt per read, no allocation.
func BenchmarkQuickAckConnRead(b *testing.B) {
	client, server := pair(b, sockopt.Options{}, sockopt.Options{})
	const chunk = 16 << 10
	r := sockopt.QuickAckConn(server)
	buf := make([]byte, chunk)
	go func() {
		src := make([]byte, chunk)
		for {
			if _, err := client.Write(src); err != nil {
				return
			}
		}
	}()
	b.SetBytes(chunk)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := io.ReadFull(r, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInfo measures one TCP_INFO read and conversion.
func BenchmarkInfo(b *testing.B) {
	client, _ := pair(b, sockopt.Options{}, sockopt.Options{})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := sockopt.Info(client); err != nil {
			b.Fatal(err)
		}
	}
}
