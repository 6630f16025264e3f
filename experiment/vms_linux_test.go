package experiment

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/traffic"
	"github.com/wanlab/wanlab/lab/vm"
	"github.com/wanlab/wanlab/lab/vm/pair"
	"github.com/wanlab/wanlab/lab/vm/vmtest"
	"github.com/wanlab/wanlab/tuner"
	"github.com/wanlab/wanlab/units"
)

// The experiments between two VMs (Debian's 6.1 kernel; User-Mode Linux
// here, the auto engine where KVM is missing) on TAPs of a router
// namespace. One pair of VMs serves every subtest, in turn (each RunOn
// restores the guests), to keep the suite's VM time to one boot.
func TestVMs(t *testing.T) {
	vmtest.RequireVM(t)
	testVMs(t, vmtest.Engine(t), "")
}

// TestVMsTCG runs the router subtest between two qemu guests under
// emulation: the qemu path of the experiments (virtio NICs, the guests'
// own ARP and ND through the proxy) stays tested where auto takes UML.
func TestVMsTCG(t *testing.T) {
	vmtest.RequireQemu(t)
	testVMs(t, vm.EngineTCG, "router")
}

// testVMs boots the pair and runs the subtests (only one, by name, when
// only is set).
func testVMs(t *testing.T, engine vm.Engine, only string) {
	ctx := context.Background()
	v, err := pair.Boot(ctx, pair.Config{Binary: testenv.StaticWanlab(t), Engine: engine})
	if err != nil {
		t.Fatal(err)
	}
	id := v.Lab.ID
	defer func() {
		if err := v.Close(); err != nil {
			t.Error(err)
		}
		assertTornDown(t, id)
	}()
	t.Logf("VMs %s under %s: booted in %.1f s (client %.2f s, server %.2f s)", v.Client.Hello.Release, v.Client.Engine, v.Boot.Seconds(),
		v.Client.BootTime.Seconds(), v.Server.BootTime.Seconds())
	router := testenv.NodeAt(t, v.Lab.Router.NS, v.Lab.Router.Handle)
	subtest := func(name string, f func(t *testing.T)) {
		if only == "" || only == name {
			t.Run(name, f)
		}
	}

	run := func(t *testing.T, cfg Config) (*Result, units.Rate) {
		t.Helper()
		var mu sync.Mutex
		var points []progressPoint
		cfg.Progress = func(p traffic.Progress) {
			mu.Lock()
			points = append(points, progressPoint{p.Bytes, p.Elapsed})
			mu.Unlock()
		}
		cfg.ProgressEvery = 250 * time.Millisecond // see steadyRate
		cfg.Out = t.TempDir()
		cfg.Timeout = 2 * time.Minute
		if cfg.Client.CC == "" {
			cfg.Client.CC, cfg.Server.CC = seedCC, seedCC
		}
		res, err := RunOn(ctx, cfg, v)
		if err != nil {
			t.Fatal(err)
		}
		for _, role := range []string{lab.RoleClient, lab.RoleServer} {
			if h := res.Hosts[role]; !h.VM || !strings.HasPrefix(h.Kernel, "6.1.") || h.Engine != string(v.Client.Engine) {
				t.Errorf("%s host %+v: want a VM of the 6.1 kernel under %s", role, h, v.Client.Engine)
			}
		}
		if h := res.Hosts[lab.RoleRouter]; h.VM || h.Kernel == "" {
			t.Errorf("router %+v: want this host's kernel", h)
		}
		mu.Lock()
		defer mu.Unlock()
		return res, steadyRate(points, cfg.Size)
	}

	subtest("receive-window", func(t *testing.T) {
		if v.Client.Engine == vm.EngineTCG {
			// Emulated guests carry 22-35 MB/s, less than the window
			// per round trip (45 MB/s): a second limit (docs/vm.md).
			t.Skip("the receive-window figures need guests at the path's speed (kvm or uml), not emulation")
		}
		// Seed 001 at its own point: the scenario's client, tcp_rmem max
		// 3 MiB at 35 ms, through the proxy. On 6.1 (tcp_adv_win_scale
		// 1) the window is half the buffer, the server waits for it
		// nearly all the time, and the steady rate is the window per
		// round trip as the tuner predicts, on every run.
		const rtt = 35 * time.Millisecond
		snap, err := pair.Snapshot(ctx, v.Client)
		if err != nil {
			t.Fatal(err)
		}
		m := tuner.ModelFor(snap)
		window := func(t *testing.T, res *Result) (int64, string) {
			t.Helper()
			sc := res.Captures[SideServer]
			if len(sc.Connections) != 1 || sc.Diagnosis == nil {
				t.Fatalf("server capture: %d connections, diagnosis %v", len(sc.Connections), sc.Diagnosis)
			}
			return sc.Connections[0].Directions[0].MaxWindowBytes, sc.Diagnosis.Limit
		}
		const rmemMax = 3 << 20
		// The preset's 256 MiB: a shorter transfer spends a larger share
		// in slow start, which TCP_INFO's rwnd-limited time counts
		// against the window (84 % at 64 MiB, 96 % at 256 MiB here).
		cfg, _ := Preset("seed001")
		// CUBIC's HyStart ends slow start when a round's RTT rises 4.4 ms
		// (an eighth of 35 ms) over the path's minimum. The guests' own
		// ingest adds that under load (a burst's last bytes acked up to
		// 20 ms late), and slow start then ends near 170 segments, far
		// below the 1086 of the window; congestion avoidance takes most
		// of the transfer to reach it, and the share the window limits
		// falls to 80 %. Off in the sender for this subtest: the window,
		// not the lab's jitter, is what the subtest measures.
		setHyStart(t, ctx, v.Server, "0")
		defer setHyStart(t, ctx, v.Server, "1")
		predicted := tuner.RateFor(m.Window(rmemMax), rtt)
		res, steady := run(t, cfg)
		if rb := res.Download.ClientEffective.RcvBuf; rb != rmemMax {
			t.Fatalf("client receive buffer %d, want tcp_rmem max %d", rb, rmemMax)
		}
		maxWin, limit := window(t, res)
		share := float64(maxWin) / rmemMax
		data := res.Captures[SideServer].Connections[0].Directions[1]
		rwnd := res.Download.Server.RwndLimitedFraction()
		srv := res.Download.Server
		t.Logf("3 MiB at 35 ms: client's largest window %d B (%.3f of the buffer), model %d B (%s); predicted %.1f MB/s, steady %.1f MB/s (%+.0f %%), average %.1f MB/s; data RTT min %.1f ms, median %.1f ms; server rwnd-limited %.1f %% (busy %v), retransmitted %d segments (capture: %d, %d spurious), cwnd %d, ssthresh %d; diagnosis %s",
			maxWin, share, m.Window(rmemMax), m.Describe(), mbpsF(predicted), mbpsF(steady), 100*(mbpsF(steady)/mbpsF(predicted)-1),
			mbpsF(res.Download.Transfer), data.RTTMinMs, data.RTTP50Ms, 100*rwnd, srv.BusyTime, srv.TotalRetrans,
			data.RetransmittedPackets, data.SpuriousRetransmissions, srv.SndCwnd, srv.SndSsthresh, limit)
		if share < 0.48 || share > 0.52 {
			t.Errorf("client advertised at most %d B, %.3f of its %d B buffer: want 0.50 +- 0.02 (tcp_adv_win_scale 1)", maxWin, share, rmemMax)
		}
		if rwnd < 0.9 {
			t.Errorf("server receive-window limited %.1f %% of the time, want at least 90 %%", 100*rwnd)
		}
		if limit != "receive-window" {
			t.Errorf("server capture diagnosed %s, want receive-window", limit)
		}
		// The target, 15 %, on every run. What falls short of the
		// prediction is the guests' intake: with the vector driver's tap
		// transport the client guest read one frame per wakeup and a
		// window's burst waited at its TAP, -16 to -39 % (docs/vm.md,
		// 2026-12-02); with the hybrid transport and its raw socket's
		// buffer raised, -5 to -12 % idle, under load 4-6 and beside a
		// busy loop (21:05-21:08 that day).
		off := mbpsF(steady)/mbpsF(predicted) - 1
		if off < -0.15 || off > 0.15 {
			t.Errorf("steady %.1f MB/s, %+.0f %% off the tuner's prediction of %.1f MB/s: want within 15 %%", mbpsF(steady), 100*off, mbpsF(predicted))
		}

		// The tuner's fix of that run, applied inside the VMs (host-wide
		// keys too: a VM is a whole host), more than doubles the window
		// and raises the rate.
		tn := res.Tuning
		if tn == nil || len(tn.Client) == 0 {
			t.Fatalf("no tuning of the client: %+v", tn)
		}
		fixed := cfg
		fixed.ClientSysctls = maps.Clone(cfg.ClientSysctls)
		fixed.ServerSysctls = map[string]string{}
		for _, c := range tn.Client {
			fixed.ClientSysctls[c.Key] = c.To
		}
		for _, c := range tn.Server {
			fixed.ServerSysctls[c.Key] = c.To
		}
		after, afterSteady := run(t, fixed)
		afterWin, _ := window(t, after)
		afterRwnd := after.Download.Server.RwndLimitedFraction()
		t.Logf("with the tuner's fix %v / %v: largest window %d B, steady %.1f MB/s, average %.1f MB/s, server rwnd-limited %.1f %%",
			fixed.ClientSysctls, fixed.ServerSysctls, afterWin, mbpsF(afterSteady), mbpsF(after.Download.Transfer), 100*afterRwnd)
		if afterWin <= 2*maxWin {
			t.Errorf("the fix's largest window %d B, want more than twice %d B", afterWin, maxWin)
		}
		// The rate rises (3x here: guests at the path's speed), or the
		// window no longer limits (TCP_INFO's rwnd-limited share under
		// 10 %); a bigger window may still be rwnd-limited where the
		// client's reading, not the network, paces the transfer.
		if !(afterSteady > steady*11/10 || afterRwnd < 0.1) {
			t.Errorf("with the fix: steady %.1f MB/s against %.1f, rwnd-limited %.0f %%: want 10 %% more or the window no longer limiting", mbpsF(afterSteady), mbpsF(steady), 100*afterRwnd)
		}
	})

	subtest("send-buffer", func(t *testing.T) {
		// The server's tcp_wmem pinned to 4096: one skb per round trip.
		rates := map[time.Duration]units.Rate{}
		for _, rtt := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond} {
			snap, err := pair.Snapshot(ctx, v.Server)
			if err != nil {
				t.Fatal(err)
			}
			snap.TCPWmem = tuner.Triple{Min: 4096, Default: 4096, Max: 4096}
			var ceiling units.Rate
			for _, c := range tuner.Ceilings(snap, tuner.ModelFor(snap), rtt) {
				if c.Limit == "sender, autotuned sockets" {
					ceiling = c.Rate
				}
			}
			cfg, _ := Preset("seed000")
			cfg.Impair = map[string]string{ToServer: "delay " + units.FormatDuration(rtt)}
			cfg.ClientSysctls = map[string]string{"net.ipv4.tcp_rmem": "4096 1048576 6291456"}
			cfg.Size = 1 * units.MiB
			// A loaded machine only lowers the rate (the emulated server
			// wakes late after each ACK): up to three runs to come near
			// the model; none may beat it.
			for attempt := 1; attempt <= 3; attempt++ {
				res, steady := run(t, cfg)
				srv := res.Download.Server
				// The average: with one 64 KiB skb per round trip from the
				// first one there is hardly a ramp.
				got := res.Download.Transfer
				rates[rtt] = max(rates[rtt], got)
				t.Logf("%v, run %d: ceiling %.3f MB/s; average %.3f MB/s, steady %.3f MB/s, delivery rate %.3f MB/s; sndbuf-limited %.0f %%, retransmitted %d; diagnosis %s",
					rtt, attempt, mbpsF(ceiling), mbpsF(got), mbpsF(steady), mbpsF(srv.DeliveryRate), 100*srv.SndbufLimitedFraction(), srv.TotalRetrans, res.Captures[SideServer].Diagnosis.Limit)
				if got > ceiling*11/10 {
					t.Errorf("%v: %.3f MB/s above the model's ceiling %.3f MB/s", rtt, mbpsF(got), mbpsF(ceiling))
				}
				if rtt < 100*time.Millisecond || math.Abs(mbpsF(got)/mbpsF(ceiling)-1) <= 0.25 {
					break
				}
				if attempt == 3 {
					t.Errorf("%v: no run within 25 %% of the model's %.3f MB/s", rtt, mbpsF(ceiling))
				}
			}
		}
		if !(rates[10*time.Millisecond] > rates[100*time.Millisecond] && rates[100*time.Millisecond] > rates[200*time.Millisecond]) {
			t.Errorf("rates %v: want falling with the RTT", rates)
		}
		if r := float64(rates[100*time.Millisecond]) / float64(rates[200*time.Millisecond]); r < 1.5 || r > 2.6 {
			t.Errorf("doubling the RTT divided the rate by %.2f, want about 2", r)
		}
	})

	subtest("shaped-link", func(t *testing.T) {
		offloads, err := pair.SetOffloads(ctx, v.Server, "eth0", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, kernel := range []bool{false, true} {
			cfg, _ := Preset("seed002")
			cfg.Kernel = kernel
			cfg.Size = 32 * units.MiB
			cfg.Ping = 5
			// The ping holds on every run; the rate on one of up to three
			// (a loaded machine stalls the emulated guests, and cubic's
			// recovery after a stall idles the link).
			for attempt := 1; attempt <= 3; attempt++ {
				res, steady := run(t, cfg)
				rtt := res.Ping
				t.Logf("kernel %v (%s), run %d: ping %v; steady %.1f Mbit/s, average %.1f Mbit/s; qdiscs %v", kernel, res.Mode, attempt, rtt,
					float64(steady)/1e6, float64(res.Download.Transfer)/1e6, res.Impairment.Kernel)
				if rtt < 100*time.Millisecond || rtt > 115*time.Millisecond {
					t.Errorf("kernel %v: ping %v, want 100 ms", kernel, rtt)
				}
				if kernel && !strings.Contains(res.Impairment.Kernel[ToClient], "in the VM") {
					t.Errorf("kernel qdiscs %v: want netem in the server VM (this host has no netem)", res.Impairment.Kernel)
				}
				if steady > 50*units.Mbit {
					t.Errorf("kernel %v: steady %.1f Mbit/s above the tbf's 50 mbit", kernel, float64(steady)/1e6)
				}
				// 50 mbit of frames carry 47.8 Mbit/s of payload (1448 of
				// 1514 bytes); cubic's backoffs at the 500 KB queue idle
				// the link a little (the namespace lab measures 42-44).
				if steady >= 40*units.Mbit {
					break
				}
				if attempt == 3 {
					t.Errorf("kernel %v: steady %.1f Mbit/s, want about 48 (tbf rate 50mbit less headers)", kernel, float64(steady)/1e6)
				}
			}
		}
		// The kernel's qdiscs ran in the server guest with its NIC's TSO
		// and GSO off (wire-size packets, as the proxy sees them): back as
		// they were once they are cleared.
		if after, err := pair.SetOffloads(ctx, v.Server, "eth0", nil); err != nil || !maps.Equal(after, offloads) {
			t.Errorf("the server guest's offloads %v (%v) after the kernel's qdiscs, want %v as before", after, err, offloads)
		}
	})

	subtest("router", func(t *testing.T) {
		// The proxy between the TAPs with an empty spec: IPv4 and IPv6,
		// neighbour resolution left to the kernel, MTU 1500 and 9000, no
		// packet lost, the router namespace as it was afterwards.
		before := router.Snapshot(t)
		soak := 8 * time.Second // CI; WANLAB_VM_SOAK=30s for the full run
		if s := os.Getenv("WANLAB_VM_SOAK"); s != "" {
			if soak, err = time.ParseDuration(s); err != nil {
				t.Fatal(err)
			}
		}
		var rate units.Rate
		for _, c := range []struct {
			mtu  int
			ipv6 bool
			long bool
		}{{1500, false, false}, {1500, false, true}, {1500, true, false}, {9000, false, false}, {9000, true, false}} {
			if c.mtu > vm.UMLMaxMTU && v.Client.Engine == vm.EngineUML {
				// Refused in one line; TestVMsTCG runs jumbo frames.
				if err := v.SetMTU(ctx, c.mtu); err == nil || !strings.Contains(err.Error(), "UML's NIC") {
					t.Errorf("MTU %d on UML guests: %v, want refused", c.mtu, err)
				}
				continue
			}
			if c.mtu != v.MTU {
				if err := v.SetMTU(ctx, c.mtu); err != nil {
					t.Fatal(err)
				}
			}
			cfg := Config{Name: "forward", Proxy: true, IPv6: c.ipv6, Size: 16 * units.MiB}
			if c.long && only != "" {
				// The qemu path's own test (TestVMsTCG): the soak runs
				// on the main engine's.
				c.long = false
			}
			if c.long {
				f := 1.5 // the first transfer is the slowest under emulation
				if v.Client.Engine != vm.EngineTCG {
					f = 2 // and the 16 MiB run under UML reads 240-725 Mbit/s
				}
				cfg.Size = units.Size(f * rate.BytesPerSecond() * soak.Seconds())
			}
			drops0 := vmDrops(t, ctx, v, router)
			res, _ := run(t, cfg)
			drops1 := vmDrops(t, ctx, v, router)
			d := res.Download
			if !c.long {
				rate = d.Transfer
			}
			var drops uint64
			for _, dir := range res.Impairment.Proxy.Directions {
				drops += dir.Engine.Totals.Drops.Total()
			}
			var nicDrops []string
			for k, n := range drops1 {
				if n != drops0[k] {
					nicDrops = append(nicDrops, fmt.Sprintf("%s +%d", k, n-drops0[k]))
				}
			}
			// What left the server's TAP and never reached the client's:
			// gaps in the client side's capture (Wireshark's "previous
			// segment not captured"), unless that capture itself dropped.
			cc := res.Captures[SideClient]
			if len(cc.Connections) != 1 {
				t.Fatalf("client capture: %d connections", len(cc.Connections))
			}
			data := cc.Connections[0].Directions[1]
			// Segments the server's own capture already misses were lost
			// in the server guest, before the path under test.
			var atServer int64
			if sc := res.Captures[SideServer]; len(sc.Connections) == 1 {
				atServer = int64(sc.Connections[0].Directions[1].LostSegments)
			}
			t.Logf("MTU %d, IPv6 %v: %s in %v, %.0f Mbit/s; MSS %d; proxy drops %d, NIC drops %v; at the client's TAP %d lost segments, %d retransmitted (%d spurious) of %d data packets (capture dropped %d); server retransmissions %d",
				c.mtu, c.ipv6, d.Bytes.Human(), d.Elapsed.Round(time.Millisecond), float64(d.Transfer)/1e6, d.Server.SndMSS, drops, nicDrops,
				data.LostSegments, data.RetransmittedPackets, data.SpuriousRetransmissions, data.DataPackets, cc.Stats.KernelDrops, d.Server.TotalRetrans)
			if atServer > 0 {
				t.Logf("MTU %d, IPv6 %v: %d segments missing at the server's TAP already (lost in the server guest)", c.mtu, c.ipv6, atServer)
			}
			if int64(data.LostSegments) > atServer && cc.Stats.KernelDrops == 0 {
				t.Errorf("MTU %d, IPv6 %v: %d segments missing at the client's TAP, %d of them at the server's", c.mtu, c.ipv6, data.LostSegments, atServer)
			}
			if d.Remote.Addr().Is6() != c.ipv6 {
				t.Errorf("download went to %v", d.Remote)
			}
			hdr := units.Size(52) // IPv4 + TCP with timestamps
			if c.ipv6 {
				hdr = 72
			}
			if d.Server.SndMSS != units.Size(c.mtu)-hdr {
				t.Errorf("MTU %d, IPv6 %v: MSS %d, want %d", c.mtu, c.ipv6, d.Server.SndMSS, units.Size(c.mtu)-hdr)
			}
			// Loss is counted where a packet can be dropped: the proxy's
			// engine, the TAPs and the guests' NICs. (A retransmission
			// alone is no proof: an emulated guest that the loaded host
			// stops for longer than the RTO makes the sender time out with
			// nothing lost.)
			if drops != 0 || len(nicDrops) != 0 {
				t.Errorf("MTU %d, IPv6 %v: the proxy dropped %d packets, the NICs %v: want none lost", c.mtu, c.ipv6, drops, nicDrops)
			}
			if c.long && d.Elapsed < soak/2 {
				t.Errorf("the long transfer took %v, want about %v", d.Elapsed, soak)
			}
		}
		// Neighbour resolution stayed in the kernel: the router resolved
		// both VMs' MACs (the proxy's TUN has none) for both families.
		neigh, err := router.NL.NeighList(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, n := range neigh {
			if n.IP != nil && n.HardwareAddr != nil && n.State&(netlink.NUD_REACHABLE|netlink.NUD_STALE|netlink.NUD_DELAY|netlink.NUD_PROBE) != 0 {
				seen[n.IP.String()] = true
			}
		}
		l := v.Lab
		for _, a := range []string{l.Client.IPv4.String(), l.Client.IPv6.String(), l.Server.IPv4.String(), l.Server.IPv6.String()} {
			if !seen[a] {
				t.Errorf("router has no neighbour entry for %s: %v", a, neigh)
			}
		}
		if err := v.SetMTU(ctx, 1500); err != nil {
			t.Fatal(err)
		}
		router.RequireSnapshot(t, before, "router namespace after the proxy runs")
	})
}

type progressPoint struct {
	bytes   units.Size
	elapsed time.Duration
}

// steadyRate is the rate over the second half of the bytes, from the
// first progress point past half to the last byte. A window-limited
// transfer arrives as a staircase, a window per round trip: a point in the
// flat part of a step would leave part of a round trip out of the span
// (up to one round trip in the eight or so of the half), so the span
// starts where that step's bytes were first seen, which with points every
// 10 ms is within 10 ms of the step's end.
func steadyRate(points []progressPoint, size units.Size) units.Rate {
	n := len(points)
	if n < 3 {
		return 0
	}
	last := points[n-1]
	for i, p := range points {
		if p.bytes >= size/2 && p.elapsed < last.elapsed {
			for i > 0 && points[i-1].bytes == p.bytes {
				i--
			}
			p = points[i]
			return units.Rate(float64(last.bytes-p.bytes) * 8 / (last.elapsed - p.elapsed).Seconds())
		}
	}
	return 0
}

// setHyStart writes CUBIC's hystart parameter in a guest.
func setHyStart(t *testing.T, ctx context.Context, g *vm.VM, on string) {
	t.Helper()
	const param = "/sys/module/tcp_cubic/parameters/hystart"
	if _, err := pair.Output(ctx, g, "/bin/sh", "-c", "echo "+on+" > "+param+" && cat "+param); err != nil {
		t.Fatal(err)
	}
}

func mbpsF(r units.Rate) float64 { return r.BytesPerSecond() / 1e6 }

// vmDrops reads the drop counters of the TAPs (in the router namespace),
// of both guests' eth0 and of a UML guest's raw sockets.
func vmDrops(t *testing.T, ctx context.Context, v *pair.VMs, router *testenv.Node) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, name := range []string{v.Lab.Router.ClientLink, v.Lab.Router.ServerLink} {
		l, err := router.NL.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		st := l.Attrs().Statistics
		out[name+" rx_dropped"] = st.RxDropped
		if v.Client.Engine != vm.EngineUML {
			// A UML guest receives from a raw socket on its TAP (RawDrops):
			// the TAP's own queue, read by nobody, drops all it is given.
			out[name+" tx_dropped"] = st.TxDropped
		}
	}
	for role, g := range map[string]*vm.VM{"client": v.Client, "server": v.Server} {
		n, err := g.RawDrops()
		if err != nil {
			t.Fatal(err)
		}
		out[role+" VM raw socket drops"] = n
		b, err := pair.Output(ctx, g, "cat", "/sys/class/net/eth0/statistics/rx_dropped", "/sys/class/net/eth0/statistics/tx_dropped")
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b))
		if len(f) != 2 {
			t.Fatalf("%s VM drop counters %q", role, b)
		}
		out[role+" VM eth0 rx_dropped"], _ = strconv.ParseUint(f[0], 10, 64)
		out[role+" VM eth0 tx_dropped"], _ = strconv.ParseUint(f[1], 10, 64)
	}
	return out
}
