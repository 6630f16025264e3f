package proxy

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/proxy/device"
	"github.com/wanlab/wanlab/proxy/route"
)

// startIn runs a proxy between ra and rb in the topology's router.
func startIn(t testing.TB, tp *topo, backend string, specs [2]string) *Proxy {
	t.Helper()
	return startWith(t, tp, Config{Backend: backend, Specs: mustSpecs(t, specs)})
}

// startWith completes cfg with the topology's interfaces, namespace, a
// seed and a state directory and starts it.
func startWith(t testing.TB, tp *topo, cfg Config) *Proxy {
	t.Helper()
	cfg.Ifaces = [2]string{"ra", "rb"}
	cfg.Seed, cfg.HasSeed = 42, true
	cfg.Netns = tp.router.Name
	cfg.StateDir = t.TempDir()
	p, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestProxy runs the end-to-end checks over both backends, each on its own
// client - router - server topology.
func TestProxy(t *testing.T) {
	for _, backend := range device.Backends {
		t.Run(backend, func(t *testing.T) {
			tp := newTopo(t)
			ping := newPinger(t, tp.client, serverIP)
			base := ping.minRTT(t, 5) // kernel routing
			before := tp.router.Snapshot(t)

			p := startIn(t, tp, backend, [2]string{"", "delay 30ms"})
			t.Run("delay per direction and runtime set", func(t *testing.T) {
				testDelays(t, p, ping, base)
			})
			t.Run("low latency while packets flow", func(t *testing.T) {
				// Auto (the default): the pings just now armed it and it
				// is held for a second after the last packet.
				ping.minRTT(t, 1)
				if open, low := p.LowLatency(); !open || !low {
					t.Fatalf("CPU latency request open %v, held at 0 µs %v; want both while packets flow", open, low)
				}
				if st := p.Stats().LowLatency; st != "auto (held)" {
					t.Errorf("stats low_latency %q, want auto (held)", st)
				}
				if d := p.Stats().Directions[1].Device; d.Written == 0 {
					t.Errorf("no packets counted as written: %+v", d)
				}
			})
			t.Run("udp loss", func(t *testing.T) { testUDPLoss(t, tp, p) })
			t.Run("tcp rate", func(t *testing.T) { testTCPRate(t, tp, p) })
			t.Run("ipv6", func(t *testing.T) { testIPv6(t, tp, p) })
			t.Run("fragments", func(t *testing.T) { testFragments(t, tp, p) })

			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			tp.router.RequireSnapshot(t, before, "router differs after stop")
			// Kernel routing works again.
			if d := ping.minRTT(t, 3); d > base+20*time.Millisecond {
				t.Fatalf("RTT after stop %v, before start %v", d, base)
			}
		})
	}
}

// testDelays: a delay on one direction adds once to the RTT, on both
// directions twice; each change is made at runtime.
func testDelays(t *testing.T, p *Proxy, ping *pinger, base time.Duration) {
	const d = 30 * time.Millisecond
	// Upper slack for a loaded 2-core machine; the lower bounds are exact:
	// a packet never leaves before its delay.
	const slack = 25 * time.Millisecond
	check := func(what string, want time.Duration) {
		t.Helper()
		got := ping.minRTT(t, 5)
		if got < want || got > want+base+slack {
			t.Fatalf("%s: minimum RTT %v, want %v + base %v (+%v slack)", what, got, want, base, slack)
		}
		t.Logf("%s: RTT %v (base %v)", what, got, base)
	}
	check("delay 30ms towards server (rb)", d)
	if err := p.SetSpec("rb", ""); err != nil {
		t.Fatal(err)
	}
	if err := p.SetSpec("ra", "delay 30ms"); err != nil {
		t.Fatal(err)
	}
	check("delay 30ms towards client (ra)", d)
	if err := p.SetSpec("", "delay 30ms"); err != nil {
		t.Fatal(err)
	}
	check("delay 30ms both ways", 2*d)
	if err := p.SetSpec("", ""); err != nil {
		t.Fatal(err)
	}
	check("no impairment", 0)
}

// testUDPLoss sends numbered datagrams through "loss 10%" and checks the
// loss against the 99.9 % binomial interval. The sender waits for the
// engine to have seen each burst, so no datagram is lost before the proxy
// (a full TUN queue would look like loss).
func testUDPLoss(t *testing.T, tp *topo, p *Proxy) {
	const n, pLoss = 3000, 0.10
	if err := p.SetSpec("rb", "loss 10%"); err != nil {
		t.Fatal(err)
	}
	defer p.SetSpec("rb", "")
	srv, cli := tp.udpPair(t, "udp4", serverIP, 9400)
	srv.SetReadBuffer(4 << 20)
	got := make(chan int)
	go func() {
		seen := 0
		buf := make([]byte, 2048)
		for {
			srv.SetReadDeadline(time.Now().Add(2 * time.Second))
			k, err := srv.Read(buf)
			if err != nil {
				got <- seen
				return
			}
			if k == 64 && string(buf[8:16]) == "wanlabLS" {
				seen++
			}
		}
	}()
	in0 := p.Stats().Directions[1].Engine.Totals.PacketsIn
	msg := make([]byte, 64)
	copy(msg[8:], "wanlabLS")
	for i := range n {
		binary.BigEndian.PutUint64(msg, uint64(i))
		if _, err := cli.Write(msg); err != nil {
			t.Fatal(err)
		}
		if i%100 == 99 {
			testenv.WaitFor(t, "the engine to see the burst", func() bool { return p.Stats().Directions[1].Engine.Totals.PacketsIn-in0 >= uint64(i+1) })
		}
	}
	received := <-got
	lost := n - received
	mean := n * pLoss
	sd := math.Sqrt(n * pLoss * (1 - pLoss))
	lo, hi := mean-3.29*sd, mean+3.29*sd
	t.Logf("lost %d of %d (99.9%% interval %.0f-%.0f)", lost, n, lo, hi)
	if float64(lost) < lo || float64(lost) > hi {
		t.Fatalf("lost %d of %d datagrams, outside the 99.9%% binomial interval %.0f-%.0f", lost, n, lo, hi)
	}
	// Every datagram the server missed was a loss drop. The engine may
	// have dropped a stray packet of the kernel's too (the spec applies to
	// everything leaving through rb), hence the small margin.
	if d := p.Stats().Directions[1].Engine.Totals.Drops.Loss; d < uint64(lost) || d > uint64(lost)+3 {
		t.Fatalf("engine counted %d loss drops, the server missed %d", d, lost)
	}
}

// testTCPRate moves a bulk TCP transfer through tbf and checks the rate
// at which the engine let its packets out over the second half of the
// transfer: never above the tbf rate, and near it (the kernel's own tbf
// gives the receiver 81-89 % here with the same transfer). The rate comes
// from the engine's byte counter read together with the clock, so a test
// goroutine scheduled late cannot inflate it; a low reading (the machine
// is shared) is retried.
func testTCPRate(t *testing.T, tp *topo, p *Proxy) {
	const rate = 40e6 // bit/s
	// A 256 KiB bucket lasts 52 ms at 40 Mbit/s: longer than a loaded
	// machine deschedules the release loop, so no stall costs tokens (a
	// late dequeue finds at most a bucket, as the kernel's tbf does, and
	// a shorter bucket would lose the rest and make the lower bound a
	// measure of the machine's load).
	const burst = 256 << 10
	if err := p.SetSpec("rb", "tbf rate 40mbit burst 256kb limit 1mb"); err != nil {
		t.Fatal(err)
	}
	defer p.SetSpec("rb", "")
	type sample struct {
		bytes uint64
		at    time.Time
	}
	take := func() sample {
		b := p.Stats().Directions[1].Engine.Totals.BytesOut
		return sample{b, time.Now()}
	}
	var readings []string
	for range 3 {
		var half, end sample
		goodput := tcpGoodputHooks(t, tp, serverIP, 8<<20, func() { half = take() }, func() { end = take() })
		// The bucket may leave at once on top of the rate.
		ipRate := float64(end.bytes-half.bytes) * 8 / end.at.Sub(half.at).Seconds()
		limit := rate + burst*8/end.at.Sub(half.at).Seconds()
		readings = append(readings, fmt.Sprintf("%.1f (goodput %.1f)", ipRate/1e6, goodput/1e6))
		if ipRate > limit*1.01 {
			t.Fatalf("engine sent %.2f Mbit/s through tbf rate 40mbit burst 256kb", ipRate/1e6)
		}
		if ipRate >= 0.8*rate {
			t.Logf("IP rate out of the engine %s Mbit/s through tbf rate 40mbit", strings.Join(readings, ", "))
			return
		}
	}
	t.Fatalf("IP rate out of the engine %s Mbit/s, want 80-100%% of 40 Mbit/s", strings.Join(readings, ", "))
}

// tcpGoodput sends size bytes from client to server over TCP and returns
// the receiver's goodput in bit/s over the second half of the transfer,
// past slow start and the sender's first queue overflow.
func tcpGoodput(t testing.TB, tp *topo, server string, size int) float64 {
	t.Helper()
	return tcpGoodputHooks(t, tp, server, size, func() {}, func() {})
}

// tcpGoodputHooks is tcpGoodput calling onHalf when the receiver has read
// half the data and onEnd when it has read all of it.
func tcpGoodputHooks(t testing.TB, tp *topo, server string, size int, onHalf, onEnd func()) float64 {
	t.Helper()
	var ln net.Listener
	tp.server.in(t, func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(server, "0"))
		return err
	})
	defer ln.Close()
	type result struct {
		bytes int64
		dur   time.Duration
		err   error
	}
	res := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			res <- result{err: err}
			return
		}
		defer c.Close()
		half := int64(size / 2)
		if _, err := io.CopyN(io.Discard, c, half); err != nil {
			res <- result{err: err}
			return
		}
		onHalf()
		start := time.Now()
		n, err := io.CopyN(io.Discard, c, int64(size)-half)
		onEnd()
		if n+half < int64(size) {
			err = fmt.Errorf("received %d of %d bytes (%v)", n+half, size, err)
		}
		dur := time.Since(start)
		io.Copy(io.Discard, c)
		res <- result{bytes: n, dur: dur, err: err}
	}()
	var conn net.Conn
	tp.client.in(t, func() (err error) {
		conn, err = net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		return err
	})
	buf := make([]byte, 256<<10)
	for sent := 0; sent < size; sent += len(buf) {
		if _, err := conn.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	return float64(r.bytes) * 8 / r.dur.Seconds()
}

// testIPv6 sends a TCP transfer over IPv6 (empty spec) and checks it
// crossed the engine. With the offload backend the segments written back
// in one batch are coalesced (GRO): the kernel receives fewer, larger
// packets from the TUN than the engine let out.
func testIPv6(t *testing.T, tp *topo, p *Proxy) {
	tunRx := func() uint64 {
		l, err := tp.router.NL.LinkByName(p.TUNs()[1])
		if err != nil || l.Attrs().Statistics == nil {
			t.Fatalf("TUN statistics: %v", err)
		}
		return l.Attrs().Statistics.RxPackets
	}
	st0, rx0 := p.Stats().Directions[1].Engine.Totals, tunRx()
	if g := tcpGoodput(t, tp, serverIP6, 4<<20); g <= 0 {
		t.Fatalf("IPv6 goodput %v", g)
	}
	st, rx := p.Stats().Directions[1].Engine.Totals, tunRx()
	out := st.PacketsOut - st0.PacketsOut
	if in := st.PacketsIn - st0.PacketsIn; in < 1000 {
		t.Fatalf("IPv6 transfer: only %d packets crossed the engine", in)
	}
	t.Logf("engine let out %d packets, the kernel received %d from the TUN", out, rx-rx0)
	if p.cfg.Backend == device.Offload && rx-rx0 >= out {
		t.Fatalf("offload: kernel received %d packets for %d written: no GRO", rx-rx0, out)
	}
}

// testFragments sends UDP datagrams larger than the MTU over IPv4 and
// IPv6: the client fragments them, the router forwards the fragments
// through the engine (a fresh namespace does no reassembly) and the server
// reassembles them.
func testFragments(t *testing.T, tp *topo, p *Proxy) {
	for _, c := range []struct{ network, ip string }{{"udp4", serverIP}, {"udp6", serverIP6}} {
		srv, cli := tp.udpPair(t, c.network, c.ip, 9600)
		in0 := p.Stats().Directions[1].Engine.Totals.PacketsIn
		msg := make([]byte, 4000)
		for i := range msg {
			msg[i] = byte(i)
		}
		buf := make([]byte, 8000)
		// One datagram, no resend: the lab's links are up before the test
		// starts (lab.New) and neighbour resolution queues packets instead
		// of dropping them, so a datagram that is lost was lost by the
		// path under test. The deadline only bounds a failing run.
		if _, err := cli.Write(msg); err != nil {
			t.Fatal(err)
		}
		srv.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := srv.Read(buf)
		cli.Close()
		srv.Close()
		if err != nil || n != len(msg) || buf[3999] != byte(3999%256) {
			t.Fatalf("%s: received %d bytes, %v; want the 4000-byte datagram", c.network, n, err)
		}
		if in := p.Stats().Directions[1].Engine.Totals.PacketsIn - in0; in < 3 {
			t.Fatalf("%s: %d packets crossed the engine, want the fragments (>= 3)", c.network, in)
		}
	}
}

// TestKillAndCleanup starts a proxy in a child process, kills it with
// SIGKILL and checks that route.Cleanup (what `wanlab proxy cleanup` runs)
// restores the router exactly.
func TestKillAndCleanup(t *testing.T) {
	tp := newTopo(t)
	before := tp.router.Snapshot(t)
	stateDir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildProxy$")
	cmd.Env = append(os.Environ(), "WANLAB_PROXY_CHILD="+tp.router.Name+","+stateDir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready") || strings.HasPrefix(sc.Text(), "error") {
				ready <- sc.Text()
				return
			}
		}
		ready <- "child exited"
	}()
	select {
	case s := <-ready:
		if s != "ready" {
			t.Fatalf("child proxy: %s", s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("child proxy did not start")
	}
	if running := tp.router.Snapshot(t); running == before {
		t.Fatal("the running proxy changed nothing in the router")
	}
	// A second proxy on the same interfaces is refused, naming the pid.
	_, err = Start(context.Background(), Config{Ifaces: [2]string{"ra", "rb"}, Netns: tp.router.Name, StateDir: stateDir})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprint(cmd.Process.Pid)) {
		t.Fatalf("second proxy: err = %v, want a refusal naming pid %d", err, cmd.Process.Pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	undone, err := route.Cleanup(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(undone) != 1 {
		t.Fatalf("cleanup undid %v, want one state file", undone)
	}
	tp.router.RequireSnapshot(t, before, "router differs after SIGKILL + cleanup")
}

// TestChildProxy is the child of TestKillAndCleanup: it runs a proxy until
// killed. Without its environment variable it does nothing.
func TestChildProxy(t *testing.T) {
	env := os.Getenv("WANLAB_PROXY_CHILD")
	if env == "" {
		t.Skip("helper process for TestKillAndCleanup")
	}
	ns, stateDir, _ := strings.Cut(env, ",")
	_, err := Start(context.Background(), Config{
		Ifaces: [2]string{"ra", "rb"}, Specs: mustSpecs(t, [2]string{"delay 1ms", "delay 1ms"}),
		Netns: ns, StateDir: stateDir,
	})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	select {}
}
