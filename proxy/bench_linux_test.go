package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/proxy/device"
)

// Benchmarks on the client - router - server topology, kernel routing and
// the proxy (both backends) side by side in one run:
//
//	go test -run '^$' -bench 'TCPBulk|RTT' -benchtime 3s ./proxy/
//	go test -run '^$' -bench 'RSSUnderDelay' -benchtime 400x ./proxy/
//
// TCPBulk reports Gbit/s (and MB/s via SetBytes), RTT the ICMP echo
// round-trip p50/p99 in µs, RSSUnderDelay the process's peak RSS while
// forwarding TCP through "delay 100ms" at up to 1 Gbit/s.

var benchModes = []string{"kernel", device.Offload, device.Water}

// benchTopo builds the topology and, unless mode is "kernel", a proxy with
// an empty spec on it.
func benchTopo(b *testing.B, mode string, specs [2]string) (*topo, *Proxy) {
	b.Helper()
	tp := newTopo(b)
	if mode == "kernel" {
		return tp, nil
	}
	return tp, startIn(b, tp, mode, specs)
}

func BenchmarkTCPBulk(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode, func(b *testing.B) {
			tp, _ := benchTopo(b, mode, [2]string{})
			benchTCP(b, tp)
		})
	}
}

// benchTCP sends b.N MiB from client to server over one connection.
func benchTCP(b *testing.B, tp *topo) {
	var ln net.Listener
	tp.server.in(b, func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(serverIP, "0"))
		return err
	})
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- 0
			return
		}
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		got <- n
	}()
	var conn net.Conn
	tp.client.in(b, func() (err error) {
		conn, err = net.Dial("tcp", ln.Addr().String())
		return err
	})
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := conn.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	conn.Close()
	n := <-got
	dur := time.Since(start)
	b.StopTimer()
	if n != int64(b.N)*int64(len(buf)) {
		b.Fatalf("received %d of %d bytes", n, int64(b.N)*int64(len(buf)))
	}
	b.ReportMetric(float64(n)*8/dur.Seconds()/1e9, "Gbit/s")
	b.ReportMetric(float64(peakRSS())/(1<<20), "peak-rss-MB")
}

func BenchmarkRTT(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode, func(b *testing.B) {
			tp, _ := benchTopo(b, mode, [2]string{})
			ping := newPinger(b, tp.client, serverIP)
			ping.medianRTT(b, 3) // neighbours resolved, caches warm
			rtts := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				d, err := ping.rtt(2 * time.Second)
				if err != nil {
					b.Fatal(err)
				}
				rtts = append(rtts, d)
			}
			b.StopTimer()
			sort.Slice(rtts, func(i, j int) bool { return rtts[i] < rtts[j] })
			b.ReportMetric(float64(rtts[len(rtts)/2])/1e3, "p50-µs")
			b.ReportMetric(float64(rtts[len(rtts)*99/100])/1e3, "p99-µs")
		})
	}
}

// BenchmarkRSSUnderDelay forwards b.N MiB of TCP through "delay 100ms" in
// both directions (tbf at 1 Gbit/s towards the server) and reports the
// peak RSS and the rate reached.
func BenchmarkRSSUnderDelay(b *testing.B) {
	tp, _ := benchTopo(b, device.Offload, [2]string{"delay 100ms", "delay 100ms | tbf rate 1gbit burst 256kb limit 32mb"})
	// A window for 1 Gbit/s over 200 ms: 25 MB of send buffer.
	tp.client.sysctl(b, "net/ipv4/tcp_wmem", "4096 16384 33554432")
	tp.server.sysctl(b, "net/ipv4/tcp_rmem", "4096 131072 33554432")
	before := peakRSS()
	benchTCP(b, tp)
	b.ReportMetric(float64(before)/(1<<20), "rss-before-MB")
}

// peakRSS is the process's peak resident set (VmHWM) in bytes.
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

var _ = fmt.Sprint
