package proxy

import (
	"bufio"
	"io"
	"net"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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
			tp, p := benchTopo(b, mode, [2]string{})
			benchTCP(b, tp, p)
		})
	}
}

// BenchmarkTCPBulkSpec is TCPBulk through a spec on the data direction
// (rb, toward the server) with the offload backend: the engine's path, for
// profiles (-cpuprofile) and allocations per packet; `wanlab bench forward`
// holds the ratios to the kernel.
func BenchmarkTCPBulkSpec(b *testing.B) {
	for _, s := range []string{"delay 1ms", "delay 1ms limit 10000", "loss 0.1%", "tbf rate 5gbit burst 1mb limit 10mb"} {
		b.Run(s, func(b *testing.B) {
			tp, p := benchTopo(b, device.Offload, [2]string{"", s})
			benchTCP(b, tp, p)
		})
	}
}

// benchTCP sends b.N MiB from client to server over one connection. With
// a proxy it also reports heap allocations per forwarded packet (the whole
// process's, test included).
func benchTCP(b *testing.B, tp *topo, p *Proxy) {
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
	var in0 uint64
	if p != nil {
		in0 = enginePackets(p)
	}
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
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
	runtime.ReadMemStats(&ms1)
	b.ReportMetric(float64(n)*8/dur.Seconds()/1e9, "Gbit/s")
	if p != nil {
		b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(enginePackets(p)-in0), "allocs/pkt")
		// Queue drops throttle TCP as loss does: netem's default limit
		// of 1000 packets holds 1 ms of 1500-byte packets at 12 Gbit/s,
		// less than the bursts of a sender on a veth.
		var q uint64
		for _, d := range p.Stats().Directions {
			q += d.Engine.Totals.Drops.Queue
		}
		b.ReportMetric(float64(q), "queue-drops")
	}
	b.ReportMetric(float64(peakRSS())/(1<<20), "peak-rss-MB")
}

func BenchmarkRTT(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode, func(b *testing.B) {
			tp, _ := benchTopo(b, mode, [2]string{})
			ping := newPinger(b, tp.client, serverIP)
			ping.minRTT(b, 3) // neighbours resolved, caches warm
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

func enginePackets(p *Proxy) uint64 {
	st := p.Stats()
	return st.Directions[0].Engine.Totals.PacketsIn + st.Directions[1].Engine.Totals.PacketsIn
}

// BenchmarkRSSUnderDelay pushes b.N UDP datagrams of 1400 bytes from
// client to server at about 1 Gbit/s through "delay 100ms" (so some 9000
// packets are inside the engine at any time) and reports the process's
// peak RSS before and after, the rate that arrived, and the loss.
//
//	go test -run '^$' -bench RSSUnderDelay -benchtime 2000000x ./proxy/
func BenchmarkRSSUnderDelay(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  *Config // nil: kernel routing
	}{
		{"kernel", nil},
		{"spec=none", &Config{}},
		{"spec=delay100ms/spin=50µs", &Config{Specs: mustSpecs(b, [2]string{"", "delay 100ms limit 100000"})}},
		{"spec=delay100ms/spin=off", &Config{Specs: mustSpecs(b, [2]string{"", "delay 100ms limit 100000"}), ReleaseSpin: -1}},
	} {
		b.Run(c.name, func(b *testing.B) { benchRSSUnderDelay(b, c.cfg) })
	}
}

func benchRSSUnderDelay(b *testing.B, cfg *Config) {
	tp := newTopo(b)
	var p *Proxy
	if cfg != nil {
		p = startWith(b, tp, *cfg)
	}
	srv, cli := tp.udpPair(b, "udp4", serverIP, 9500)
	srv.SetReadBuffer(4 << 20)
	got := make(chan int)
	go func() {
		n := 0
		buf := make([]byte, 2048)
		for {
			srv.SetReadDeadline(time.Now().Add(time.Second))
			if _, err := srv.Read(buf); err != nil {
				got <- n
				return
			}
			n++
		}
	}()
	// The sender hands the kernel 32 datagrams per call (UDP GSO), as a
	// fast sender would; the router forwards them as one super-packet that
	// the offload backend splits again.
	const seg, perCall = 1400, 32
	rc, err := cli.SyscallConn()
	if err != nil {
		b.Fatal(err)
	}
	rc.Control(func(fd uintptr) {
		err = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_SEGMENT, seg)
	})
	if err != nil {
		b.Fatal(err)
	}
	before := peakRSS()
	msg := make([]byte, seg*perCall)
	const pps = 1e9 / 8 / (seg + 28) // IP packets per second at 1 Gbit/s
	b.SetBytes(seg)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i += perCall {
		// Pace: never more than 1 Gbit/s on average.
		if ahead := time.Duration(float64(i)/pps*1e9) - time.Since(start); ahead > 0 {
			time.Sleep(ahead)
		}
		cli.Write(msg)
	}
	sent := time.Since(start)
	n := <-got
	b.StopTimer()
	b.ReportMetric(float64(before)/(1<<20), "rss-before-MB")
	b.ReportMetric(float64(peakRSS())/(1<<20), "peak-rss-MB")
	b.ReportMetric(float64(b.N)*(seg+28)*8/sent.Seconds()/1e9, "offered-Gbit/s")
	sentPkts := (b.N + perCall - 1) / perCall * perCall
	b.ReportMetric(100*float64(sentPkts-n)/float64(sentPkts), "loss-%")
	if p == nil {
		return
	}
	st := p.Stats().Directions[1]
	b.ReportMetric(float64(st.Engine.Totals.Drops.Queue), "queue-drops")
	// Where the rest went: before the engine (the TUN queue), or after.
	// (The engine also sees a few packets of the kernel's own, e.g. IPv6
	// router solicitations: hence the clamp.)
	b.ReportMetric(100*max(0, float64(sentPkts)-float64(st.Engine.Totals.PacketsIn))/float64(sentPkts), "lost-before-engine-%")
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
