package e2e_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wanlab/wanlab/experiment"
	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/lab/traffic"
	"github.com/wanlab/wanlab/tuner"
	"github.com/wanlab/wanlab/tuner/sockopt"
	"github.com/wanlab/wanlab/units"
)

// End to end through the lab (client, router running the userspace proxy,
// server): the tuner's predicted throughput against a real download.

// hostModel is the window model of the running kernel.
func hostModel(t *testing.T) (*tuner.Snapshot, tuner.WindowModel) {
	t.Helper()
	s, err := tuner.ReadSnapshot(tuner.Host, "")
	if err != nil {
		t.Fatal(err)
	}
	return s, tuner.ModelFor(s)
}

func download(t *testing.T, cfg experiment.Config) *experiment.Result {
	res, _ := downloadProgress(t, cfg)
	return res
}

// downloadProgress also returns the rate over the second half of the
// download's bytes (from the progress reports, every 250 ms): the steady
// rate, after the window's ramp.
func downloadProgress(t *testing.T, cfg experiment.Config) (*experiment.Result, units.Rate) {
	t.Helper()
	testenv.RequireRoot(t)
	var mu sync.Mutex
	var points []traffic.Progress
	cfg.Progress = func(p traffic.Progress) {
		mu.Lock()
		points = append(points, p)
		mu.Unlock()
	}
	cfg.Out = t.TempDir()
	cfg.Timeout = time.Minute
	// Seeds 000 and 001 ran cubic.
	cfg.Client = sockopt.Options{CC: "cubic"}
	cfg.Server = sockopt.Options{CC: "cubic"}
	res, err := experiment.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Download == nil || res.Download.Bytes != cfg.Size {
		t.Fatalf("download incomplete: %+v", res.Download)
	}
	mu.Lock()
	defer mu.Unlock()
	var steady units.Rate
	if n := len(points); n >= 3 {
		last := points[n-1]
		for _, p := range points {
			if p.Bytes >= cfg.Size/2 && p.Elapsed < last.Elapsed {
				steady = units.Rate(float64(last.Bytes-p.Bytes) * 8 / (last.Elapsed - p.Elapsed).Seconds())
				break
			}
		}
	}
	return res, steady
}

func mbps(r units.Rate) float64 { return r.BytesPerSecond() / 1e6 }

// Seed 001 scaled to the lab: 35 ms, the client's tcp_rmem max 1 MiB,
// cubic as in the seeds. The tuner's model, fed the payload/truesize
// ratio the kernel learned on this path (read back from the client's
// socket, about 0.66 here; `wanlab tune show --rtt 35ms --window-ratio
// 0.66` prints the same), predicts window = ratio × 1 MiB and rate =
// window / RTT. The kernel's default ratio (0.5, what `tune show` assumes
// without --window-ratio) under-predicts here.
//
// What one run shows on any machine: the largest window the client
// advertised on the wire is the model's window (to the unit its window
// scale can express), the server held that much in flight, and no rate
// beats one window per round trip. How close the rate comes to that
// ceiling depends on how promptly the receiving application drains its
// buffer (the window it advertises is what it has not read yet), so a
// loaded machine lowers it; that figure is the sweep bench's (its seed001
// table), not a test's.
func TestEndToEndSeed001ReceiveWindowPrediction(t *testing.T) {
	const rtt = 35 * time.Millisecond
	_, m := hostModel(t)
	withDefault := tuner.RateFor(m.Window(1<<20), rtt)
	res, steady := downloadProgress(t, experiment.Config{
		Name:          "seed001-1MiB",
		Impair:        map[string]string{experiment.ToServer: "delay 35ms"},
		ClientSysctls: map[string]string{"net.ipv4.tcp_rmem": "4096 131072 1048576"},
		Client:        sockopt.Options{CC: "cubic"},
		Server:        sockopt.Options{CC: "cubic"},
		Size:          48 * units.MiB,
	})
	if rb := res.Download.ClientEffective.RcvBuf; rb != 1<<20 {
		t.Fatalf("client receive buffer autotuned to %d, want tcp_rmem max 1048576", rb)
	}
	srv := res.Download.Server
	if srv == nil {
		t.Fatal("no server TCP_INFO")
	}
	// The kernel's own accounting agrees the receive window limited the
	// sender (92-95 % of its busy time on an idle machine; a loaded one
	// lengthens the time the sender is busy otherwise, seen 48 %, so only
	// a share is required here). The capture below shows the limit
	// itself: the server's bytes in flight reach the client's window.
	if f := srv.RwndLimitedFraction(); f < 0.25 {
		t.Fatalf("server rwnd-limited %.0f %% of its busy time, want a good share of it", 100*f)
	}
	// The ratio as experiment.LearnedRatio reads it, without its gate on
	// rwnd-limited time (the capture proves the window limit here).
	ratio := res.Download.Client.WindowRatio(res.Download.ClientEffective.RcvBuf)
	if ratio < 0.2 || ratio > 1 {
		t.Fatalf("window ratio %.2f out of the kernel's range (rcv_ssthresh %d, rcvbuf %d)", ratio, res.Download.Client.RcvSsthresh, res.Download.ClientEffective.RcvBuf)
	}
	lm := m
	lm.PayloadRatio = ratio
	window := lm.Window(1 << 20)
	predicted := tuner.RateFor(window, rtt)
	if steady == 0 {
		t.Fatal("too few progress reports for a steady rate")
	}
	got := res.Download.Transfer
	sc := res.Captures[experiment.SideServer]
	if sc == nil || len(sc.Connections) != 1 {
		t.Fatalf("server capture: %+v, want the download's connection", sc)
	}
	d := sc.Connections[0].Directions
	maxWin, inFlight := d[0].MaxWindowBytes, d[1].MaxInFlightBytes
	t.Logf("learned ratio %.2f: model window %d B, client's largest advertised %d B, server's most in flight %d B; predicted %.1f MB/s; steady %.1f MB/s (%+.0f %%), average %.1f MB/s; default ratio predicts %.1f MB/s; server rwnd-limited %.0f %%",
		ratio, window, maxWin, inFlight, mbps(predicted), mbps(steady), 100*(mbps(steady)/mbps(predicted)-1), mbps(got),
		mbps(withDefault), 100*srv.RwndLimitedFraction())
	// The window field counts in units of 2^wscale bytes (the client's
	// shift, from its SYN: 128 B here), so the advertised window is the
	// model's rounded to one of them.
	if !d[0].WindowScaleKnown || d[0].WindowScale < 0 {
		t.Fatalf("client's window scale not in the capture: %+v", d[0])
	}
	unit := int64(1) << d[0].WindowScale
	if diff := maxWin - int64(window); diff <= -unit || diff >= unit {
		t.Errorf("client advertised at most %d B, the model's window is %d B (window unit %d B)", maxWin, window, unit)
	}
	// A window-limited sender fills the window: in flight never above it,
	// and up to it at some point (within 2 %, a segment or so of 690 KB
	// that an ACK freed while the next write was being made).
	if inFlight > maxWin || float64(inFlight) < 0.98*float64(maxWin) {
		t.Errorf("server held at most %d B in flight, want the client's window %d B", inFlight, maxWin)
	}
	// No transfer beats one window per round trip (5 %: the progress
	// reports' timing).
	if steady > predicted*105/100 || got > predicted*105/100 {
		t.Errorf("steady %.1f MB/s or average %.1f MB/s above the window/RTT ceiling %.1f MB/s", mbps(steady), mbps(got), mbps(predicted))
	}
}

func serverRwndLimited(res *experiment.Result) float64 {
	if res.Download.Server == nil {
		return 0
	}
	return res.Download.Server.RwndLimitedFraction()
}

// The plan's settings reach the target: from a 256 KiB receive buffer
// (3.7 MB/s at 35 ms), plan 10 MB/s, apply the plan's per-namespace
// changes to each side, download. What the plan changes is the window, so
// that is what is checked on every run: the client's largest advertised
// window (on the server's capture) holds the target's bytes per round
// trip. The rate only has to show the window was used: it must beat the
// 3.7 MB/s the unplanned buffer allows, which no transfer through that
// window could. How near the target it gets depends on the machine (the
// receiving application drains late on a loaded one; seed 001 saw
// −47 %), which is a bench's figure.
func TestEndToEndPlanReachesTarget(t *testing.T) {
	const rtt = 35 * time.Millisecond
	target := 80 * units.Mbit // 10 MB/s
	s, m := hostModel(t)
	s.TCPRmem = tuner.Triple{Min: 4096, Default: 131072, Max: 256 << 10}
	p, err := tuner.MakePlan(s, m, tuner.PlanInput{RTT: rtt, Rate: target, Streams: 1})
	if err != nil {
		t.Fatal(err)
	}
	client := map[string]string{"net.ipv4.tcp_rmem": "4096 131072 262144"}
	server := map[string]string{}
	for _, c := range p.Changes {
		if c.HostOnly {
			continue // the lab's hosts are namespaces
		}
		switch c.Side {
		case "receiver":
			client[c.Key] = c.To
		case "sender":
			server[c.Key] = c.To
		default:
			client[c.Key], server[c.Key] = c.To, c.To
		}
	}
	if client["net.ipv4.tcp_rmem"] == "4096 131072 262144" || p.Current >= target {
		t.Fatalf("plan kept the 256 KiB receive buffer (%v now): %+v", p.Current, p.Changes)
	}
	res := download(t, experiment.Config{
		Name:          "seed001-planned",
		Impair:        map[string]string{experiment.ToServer: "delay 35ms"},
		ClientSysctls: client,
		ServerSysctls: server,
		Size:          32 * units.MiB,
	})
	got := res.Download.Transfer
	sc := res.Captures[experiment.SideServer]
	if sc == nil || len(sc.Connections) != 1 {
		t.Fatalf("server capture: %+v, want the download's connection", sc)
	}
	maxWin := sc.Connections[0].Directions[0].MaxWindowBytes
	need := int64(target.BytesPerSecond() * rtt.Seconds())
	t.Logf("plan: client %v server %v; predicted after %.1f MB/s, target %.1f MB/s (%d B per round trip), client's largest window %d B, measured %.1f MB/s",
		client, server, mbps(p.After), mbps(target), need, maxWin, mbps(got))
	if maxWin < need {
		t.Errorf("client advertised at most %d B with the plan's settings, below the %d B the %.1f MB/s target needs per %v", maxWin, need, mbps(target), rtt)
	}
	if got <= p.Current {
		t.Errorf("measured %.1f MB/s with the plan's settings, no more than the %.1f MB/s the unplanned buffer allows", mbps(got), mbps(p.Current))
	}
}

// Seed 000 scaled to the lab: the server's tcp_wmem pinned to 4096. The
// rate falls as 1/RTT; the tuner's one-skb-per-RTT ceiling predicts the
// steady rate and bounds the average.
//
// The client's receive buffer starts at 1 MiB (tcp_rmem default) instead
// of the kernel's 128 KiB. With 128 KiB the runs were bimodal: in some the
// client's window stayed under twice the 64 KiB skb, tcp_bound_to_half_wnd
// halved every skb and the rate was half the ceiling (the tuner names that
// mode, oneSkbNote), in others the window grew and the rate reached it;
// which one depended on how promptly the client read, so a loaded machine
// gave only half-mode runs. A 1 MiB window from the start keeps the
// receiver out of the way on every run, and the test checks what it is
// about: the sender's buffer.
func TestEndToEndSeed000SendBufferFallsWithRTT(t *testing.T) {
	s, m := hostModel(t)
	s.TCPWmem = tuner.Triple{Min: 4096, Default: 4096, Max: 4096}
	rates := map[time.Duration]units.Rate{}
	for _, rtt := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond} {
		var ceiling units.Rate
		for _, c := range tuner.Ceilings(s, m, rtt) {
			if c.Limit == "sender, autotuned sockets" {
				ceiling = c.Rate
			}
		}
		// The ceiling bounds every run. Reaching it is checked on up to
		// three runs: a loaded machine only lowers the rate (the server's
		// writer wakes late after each ACK, and the delay adds to every
		// one-skb round trip: 1.5 ms is 15 % at 10 ms).
		var runs []string
		for attempt := 1; attempt <= 3; attempt++ {
			res := download(t, experiment.Config{
				Name:          "seed000",
				Impair:        map[string]string{experiment.ToServer: "delay " + units.FormatDuration(rtt)},
				ServerSysctls: map[string]string{"net.ipv4.tcp_wmem": "4096 4096 4096"},
				ClientSysctls: map[string]string{"net.ipv4.tcp_rmem": "4096 1048576 6291456"},
				Size:          2 * units.MiB,
			})
			got := res.Download.Transfer
			// The average includes the ramp of slow start; in the steady
			// state one 64 KiB skb goes out per round trip, which the
			// server's last delivery-rate sample measures.
			srv := res.Download.Server
			if srv == nil {
				t.Fatal("no server TCP_INFO")
			}
			rates[rtt] = srv.DeliveryRate
			run := fmt.Sprintf("%v, run %d: ceiling %.3f MB/s; average %.3f MB/s, steady (delivery rate) %.3f MB/s; sndbuf-limited %.0f %%",
				rtt, attempt, mbps(ceiling), mbps(got), mbps(srv.DeliveryRate), 100*srv.SndbufLimitedFraction())
			t.Log(run)
			runs = append(runs, run)
			if got > ceiling*11/10 {
				t.Fatalf("%v: measured %.3f MB/s above the predicted ceiling %.3f MB/s", rtt, mbps(got), mbps(ceiling))
			}
			// Two estimates of the steady rate, each biased its own way: the
			// server's last delivery-rate sample is one sample (seen +23 % at
			// 10 ms once in ten runs), the transfer average carries the ramp
			// (−6 to −13 % here). The prediction must match at least one
			// within 15 %; a sender not bounded by its buffer is far above
			// both.
			if math.Abs(mbps(srv.DeliveryRate)/mbps(ceiling)-1) <= 0.15 || math.Abs(mbps(got)/mbps(ceiling)-1) <= 0.15 {
				runs = nil
				break
			}
		}
		if runs != nil {
			t.Errorf("%v: no run reached the predicted %.3f MB/s (steady or average within 15 %%):\n%s",
				rtt, mbps(ceiling), strings.Join(runs, "\n"))
		}
	}
	// The ratio compares steady rates: a 2 MiB average is mostly the
	// ramp at 200 ms, so averages divide by far less than 2.
	if r := float64(rates[100*time.Millisecond]) / float64(rates[200*time.Millisecond]); r < 1.6 || r > 2.5 {
		t.Errorf("doubling the RTT divided the steady rate by %.2f, want about 2", r)
	}
}
