package traffic_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/labtest"
	"github.com/wanlab/wanlab/lab/traffic"
	"github.com/wanlab/wanlab/tuner/sockopt"
	"github.com/wanlab/wanlab/units"
)

func startServer(t testing.TB, l *lab.Lab, addr netip.Addr, cfg traffic.ServerConfig) *traffic.Server {
	t.Helper()
	cfg.Listen = netip.AddrPortFrom(addr, 0)
	s, err := traffic.StartServer(context.Background(), l.Server.Handle, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("server close: %v", err)
		}
	})
	return s
}

func TestDownloadThroughLab(t *testing.T) {
	l := labtest.Lab(t, context.Background(), lab.Config{})
	srv := startServer(t, l, l.Server.IPv4, traffic.ServerConfig{})
	const size = 48 * units.MiB
	var mu sync.Mutex
	var progress []traffic.Progress
	res, err := traffic.Download(context.Background(), l.Client.Handle, traffic.DownloadConfig{
		Server:        srv.Addr(),
		Size:          size,
		Verify:        true,
		Peer:          srv,
		ProgressEvery: time.Millisecond,
		Progress: func(p traffic.Progress) {
			mu.Lock()
			progress = append(progress, p)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes != size || res.Average == 0 || res.Elapsed <= 0 {
		t.Fatalf("result %+v", res)
	}
	if res.Remote != srv.Addr() || res.Local.Addr() != l.Client.IPv4 {
		t.Errorf("connection %s -> %s, want %s -> %s", res.Local, res.Remote, l.Client.IPv4, srv.Addr())
	}
	if res.Client.BytesReceived < size {
		t.Errorf("client TCP_INFO bytes_received %d < %d", res.Client.BytesReceived, size)
	}
	if res.Server == nil || res.Server.BytesSent < size || res.Server.State != "established" {
		t.Errorf("server TCP_INFO %+v", res.Server)
	}
	last := progress[len(progress)-1]
	if !last.Done || last.Bytes != size || last.ETA != 0 {
		t.Errorf("last progress %+v, want done at %d bytes", last, size)
	}
	// The final report is at the last byte, not after the TCP_INFO
	// queries that follow it.
	if last.Elapsed != res.Elapsed {
		t.Errorf("last progress at %v, the last byte at %v", last.Elapsed, res.Elapsed)
	}
	for i := 1; i < len(progress); i++ {
		if progress[i].Bytes < progress[i-1].Bytes {
			t.Fatalf("progress went backwards: %+v then %+v", progress[i-1], progress[i])
		}
	}
	t.Logf("%s in %v: %s (client rtt %v, server cwnd %d)", res.Bytes.Human(), res.Elapsed, res.Average.Human(), res.Client.RTT, res.Server.SndCwnd)
}

func TestDownloadIPv6WithSocketOptions(t *testing.T) {
	l := labtest.Lab(t, context.Background(), lab.Config{})
	srv := startServer(t, l, l.Server.IPv6, traffic.ServerConfig{
		Sockopt: sockopt.Options{SndBuf: 64 * units.KiB, CC: "reno"},
	})
	res, err := traffic.Download(context.Background(), l.Client.Handle, traffic.DownloadConfig{
		Server:  srv.Addr(),
		Size:    4 * units.MiB,
		Sockopt: sockopt.Options{RcvBuf: 256 * units.KiB, QuickAck: true},
		Peer:    srv,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ClientEffective.RcvBuf != 2*256*units.KiB {
		t.Errorf("client sockopt %+v, want a 512 KiB receive buffer", res.ClientEffective)
	}
	// Accepted sockets inherit the listener's options.
	if res.ServerEffective == nil || res.ServerEffective.SndBuf != 2*64*units.KiB || res.ServerEffective.CC != "reno" {
		t.Errorf("server sockopt %+v, want a 128 KiB send buffer and reno", res.ServerEffective)
	}
}

func TestDownloadCancelled(t *testing.T) {
	l := labtest.Lab(t, context.Background(), lab.Config{})
	srv := startServer(t, l, l.Server.IPv4, traffic.ServerConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	_, err := traffic.Download(ctx, l.Client.Handle, traffic.DownloadConfig{
		Server: srv.Addr(),
		Size:   1 << 40, // would take hours
		Progress: func(p traffic.Progress) {
			if p.Bytes > 0 {
				cancel()
			}
		},
		ProgressEvery: time.Millisecond,
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Download after cancel = %v, want context.Canceled", err)
	}
}

func TestBadRequestsNamed(t *testing.T) {
	l := labtest.Lab(t, context.Background(), lab.Config{})
	srv := startServer(t, l, l.Server.IPv4, traffic.ServerConfig{})
	_, err := traffic.RequestResponse(context.Background(), l.Client.Handle, traffic.RRConfig{
		Server: srv.Addr(), Requests: 1, BodySize: traffic.MaxRRBody + 1,
	})
	if err == nil || !strings.Contains(err.Error(), "body size") {
		t.Errorf("rr with a body over MaxRRBody = %v, want a size error", err)
	}
	_, err = traffic.Download(context.Background(), l.Client.Handle, traffic.DownloadConfig{
		Server: netip.AddrPortFrom(l.Server.IPv4, 1), Size: 1,
	})
	if err == nil || !strings.Contains(err.Error(), l.Server.IPv4.String()+":1") {
		t.Errorf("download from a closed port = %v, want an error naming it", err)
	}
}

// TestDelayedAckStall reproduces seed 003: a server that answers in two
// small writes with Nagle on waits for the ACK of the first, which the
// client delays by the kernel's minimum delayed-ACK timeout (40 ms);
// TCP_QUICKACK on the client removes the stall.
//
// The stall is checked by what the client's kernel did, which no load
// changes: with the stall most responses waited for its delayed-ACK timer
// (TcpExt DelayedACKs counts each firing), with TCP_QUICKACK it never
// fired. Latencies bound what load cannot move: a stalled response takes
// at least the timer's 40 ms (30 ms: the timer is coarse); one from the
// TCP_NODELAY server, which does not wait for the ACK, less than that on
// most requests (p50 under 40 ms; a loaded machine was seen at 28 ms with
// nothing waiting, so no tighter bound).
func TestDelayedAckStall(t *testing.T) {
	l := labtest.Lab(t, context.Background(), lab.Config{})
	srv := startServer(t, l, l.Server.IPv4, traffic.ServerConfig{Nagle: true, ThinkTime: time.Millisecond})
	// The server-side fix: TCP_NODELAY (Go's default) sends the body at once.
	noNagle := startServer(t, l, l.Server.IPv4, traffic.ServerConfig{ThinkTime: time.Millisecond})
	const requests = 48
	run := func(quick bool, srv *traffic.Server) (traffic.RRResult, uint64) {
		d0 := delayedACKs(t, l)
		res, err := traffic.RequestResponse(context.Background(), l.Client.Handle, traffic.RRConfig{
			Server: srv.Addr(), Requests: requests, Concurrency: 4,
			Sockopt: sockopt.Options{QuickAck: quick},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Requests != requests || res.Errors != 0 {
			t.Fatalf("rr quickack=%v: %d requests, %d errors (%s)", quick, res.Requests, res.Errors, res.FirstError)
		}
		return res, delayedACKs(t, l) - d0
	}
	slow, slowDelayed := run(false, srv)
	fast, fastDelayed := run(true, srv)
	nodelay, _ := run(false, noNagle)
	t.Logf("delayed ACK: p50 %v p99 %v, %d delayed ACKs; quickack: p50 %v p99 %v, %d delayed ACKs; server nodelay: p50 %v p99 %v",
		slow.Latency.P50, slow.Latency.P99, slowDelayed, fast.Latency.P50, fast.Latency.P99, fastDelayed, nodelay.Latency.P50, nodelay.Latency.P99)
	// The first request on each of the 4 connections is answered before
	// the client is in interactive (pingpong) mode, so not every one waits.
	if slowDelayed < requests/2 || slow.Latency.P50 < 30*time.Millisecond {
		t.Errorf("without TCP_QUICKACK: %d delayed ACKs for %d requests, p50 %v; want the ~40 ms delayed-ACK stall on most", slowDelayed, requests, slow.Latency.P50)
	}
	if fastDelayed != 0 {
		t.Errorf("with TCP_QUICKACK the client delayed %d ACKs, want none", fastDelayed)
	}
	if nodelay.Latency.P50 >= 40*time.Millisecond {
		t.Errorf("with TCP_NODELAY on the server p50 = %v, want no stall", nodelay.Latency.P50)
	}
}

// delayedACKs is the count of ACKs the client's kernel sent when its
// delayed-ACK timer fired (TcpExt DelayedACKs of its namespace).
func delayedACKs(t *testing.T, l *lab.Lab) uint64 {
	t.Helper()
	var n uint64
	err := l.Client.Do(func() error {
		// thread-self: /proc/self/net is the namespace of the process's
		// main thread, not of this one.
		b, err := os.ReadFile("/proc/thread-self/net/netstat")
		if err != nil {
			return err
		}
		lines := strings.Split(string(b), "\n")
		for i := 0; i+1 < len(lines); i += 2 {
			names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
			if len(names) == 0 || names[0] != "TcpExt:" || len(values) != len(names) {
				continue
			}
			for j, name := range names {
				if name == "DelayedACKs" {
					n, err = strconv.ParseUint(values[j], 10, 64)
					return err
				}
			}
		}
		return errors.New("no TcpExt DelayedACKs in netstat")
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSummarize(t *testing.T) {
	var s []time.Duration
	for i := 100; i >= 1; i-- {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	got := traffic.Summarize(s)
	want := traffic.Latency{Min: time.Millisecond, Max: 100 * time.Millisecond, Mean: 50500 * time.Microsecond,
		P50: 50 * time.Millisecond, P90: 90 * time.Millisecond, P99: 99 * time.Millisecond}
	if got != want {
		t.Errorf("Summarize = %+v, want %+v", got, want)
	}
	if (traffic.Summarize(nil) != traffic.Latency{}) {
		t.Error("Summarize(nil) not zero")
	}
	if s[0] != 100*time.Millisecond {
		t.Error("Summarize sorted its input")
	}
}

// BenchmarkDownload measures a download through the lab's kernel-routed
// router: the ceiling every impaired experiment is compared against.
func BenchmarkDownload(b *testing.B) {
	l := labtest.Lab(b, context.Background(), lab.Config{})
	srv := startServer(b, l, l.Server.IPv4, traffic.ServerConfig{})
	const size = 256 * units.MiB
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := traffic.Download(context.Background(), l.Client.Handle, traffic.DownloadConfig{Server: srv.Addr(), Size: size}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRequestResponse measures wrk-style requests per second with
// TCP_QUICKACK (no delayed-ACK stall) over the kernel-routed lab.
func BenchmarkRequestResponse(b *testing.B) {
	l := labtest.Lab(b, context.Background(), lab.Config{})
	srv := startServer(b, l, l.Server.IPv4, traffic.ServerConfig{})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := traffic.RequestResponse(context.Background(), l.Client.Handle, traffic.RRConfig{
			Server: srv.Addr(), Requests: 1000, Concurrency: 8,
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAskPeerOnWildcardListener: a server listening on the unspecified
// address (a dual-stack socket) sees an IPv4 client as ::ffff:a.b.c.d; the
// client asking for its connection's TCP_INFO by its own address still
// finds it.
func TestAskPeerOnWildcardListener(t *testing.T) {
	l := labtest.Lab(t, context.Background(), lab.Config{})
	srv := startServer(t, l, netip.IPv4Unspecified(), traffic.ServerConfig{})
	res, err := traffic.Download(context.Background(), l.Client.Handle, traffic.DownloadConfig{
		Server:  netip.AddrPortFrom(l.Server.IPv4, srv.Addr().Port()),
		Size:    units.MiB,
		AskPeer: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Server == nil || res.Server.BytesSent < units.MiB {
		t.Errorf("server TCP_INFO %+v", res.Server)
	}
}

// A paced download that pauses takes at least its pauses and its data's
// time at the rate, and an answer larger than the pattern (paced or not)
// arrives whole: what --like runs for an application-limited sender and
// a large response.
func TestPausedDownloadAndLargeAnswer(t *testing.T) {
	l := labtest.Lab(t, context.Background(), lab.Config{})
	const pause = 50 * time.Millisecond
	rate := 80 * units.Mbit // 256 KiB in 26 ms
	srv := startServer(t, l, l.Server.IPv4, traffic.ServerConfig{WriteRate: rate, WriteChunk: 16 * units.KiB,
		WritePauses: 3, WritePause: pause})
	res, err := traffic.Download(context.Background(), l.Client.Handle, traffic.DownloadConfig{
		Server: srv.Addr(), Size: 256 * units.KiB, Verify: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The last write leaves when the bytes before it took their time.
	if least := 3*pause + rate.TxTime(256*units.KiB-16*units.KiB); res.Elapsed < least {
		t.Errorf("paused download took %v, want at least %v", res.Elapsed, least)
	}
	for _, body := range []units.Size{200 * units.KiB} {
		rr, err := traffic.RequestResponse(context.Background(), l.Client.Handle, traffic.RRConfig{
			Server: srv.Addr(), Requests: 2, Concurrency: 1, BodySize: body, Timeout: 10 * time.Second,
		})
		if err != nil || rr.Requests != 2 || rr.Errors != 0 {
			t.Errorf("rr with %v answers: %+v, %v", body, rr, err)
		}
	}
}
