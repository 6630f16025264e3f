package fit_test

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/wanlab/wanlab/analyzer/pcapfile"
	"github.com/wanlab/wanlab/experiment"
	"github.com/wanlab/wanlab/fit"
	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/units"
)

// gridPoint is one lab run with a known path, and what the fit must find.
type gridPoint struct {
	name     string
	toClient string
	toServer string
	rtt      time.Duration
	rate     units.Rate // 0: no bottleneck
	buffer   units.Size // the bottleneck's limit
	loss     float64    // random loss rate
	bursty   bool
	rmem     units.Size // the client's tcp_rmem max when the window is the limit
	// wmem pins the server's tcp_wmem ("4096 4096 4096": one skb a round
	// trip), the send-buffer scenario's path.
	wmem string
	// tailDrops: the buffer is too small for a queue that shows through
	// the hosts' spread (a quarter of the bandwidth-delay product, 2.5 ms):
	// the rate may stay unknown, and its drops are congestion losses.
	tailDrops bool
	size      units.Size
}

var grid = []gridPoint{
	// Rates a loaded 2-core host forwards with room to spare, so that the
	// path is the spec's and not the CPU's. The round trips are long
	// enough that the proxy's scheduling on a loaded host, which adds a
	// millisecond or more to the few queue-free samples a capture near
	// the receiver has of a token bucket (21.4 ms at 20 ms once), stays
	// inside the 5 %.
	{name: "token-bucket", toClient: "delay 20ms | tbf rate 20mbit burst 32kb limit 100kb", toServer: "delay 20ms",
		rtt: 40 * time.Millisecond, rate: 20 * units.Mbit, buffer: 100 * units.KiB, size: 8 * units.MiB},
	// The window (about 250 KiB: 0.65 of the buffer) per 100 ms is 20
	// Mbit/s, and takes the proxy 40 ms to forward even at 50 Mbit/s:
	// CUBIC's HyStart, which ends slow start where a window's ACKs take
	// half the minimum RTT to arrive or the RTT rises by an eighth,
	// cannot stop it short of the receive window on a loaded host. A 1
	// MiB buffer at 50 ms (a 670 KiB window, 107 Mbit/s) could: a loaded
	// run left slow start at 162 segments without a loss and spent most
	// of its 2.5 s growing CUBIC's window towards the receiver's, which
	// made it (rightly, the fit said) congestion-window limited. 16 MiB
	// as before: the fit counts spurious retransmissions as losses, and a
	// loaded proxy's late ACKs caused 18 at once (DSACKed, ssthresh left
	// unset), 0.31 % of 8 MiB's segments and over the test's 0.3 %.
	{name: "receive-window", toServer: "delay 100ms", rtt: 100 * time.Millisecond, rmem: 384 * units.KiB, size: 16 * units.MiB},
	// 100 Mbit/s at 10 ms with a quarter of the bandwidth-delay product
	// (31 KiB): CUBIC overflows it in slow start and at each top of its
	// sawtooth, and the queue before is a few milliseconds, within the
	// hosts' spread. Its drops were called bursty random loss (gemodel
	// 0.054 % 12.8 %, 67 standard deviations off the true nil).
	{name: "small-buffer", toClient: "delay 5ms | tbf rate 100mbit burst 32kb limit 31kb", toServer: "delay 5ms",
		rtt: 10 * time.Millisecond, rate: 100 * units.Mbit, buffer: 31 * units.KiB, tailDrops: true, size: 16 * units.MiB},
	// The send-buffer scenario (seed000): a sender pinned to one skb a
	// round trip, which the fit must name from either end (near the
	// receiver the analyzer's flight is an estimate; what the receiver
	// gets per round trip is not) with the server's tcp_wmem.
	{name: "send-buffer", toServer: "delay 100ms", rtt: 100 * time.Millisecond, wmem: "4096 4096 4096", size: 2 * units.MiB},
	{name: "random-loss", toClient: "delay 5ms loss 1%", toServer: "delay 5ms", rtt: 10 * time.Millisecond, loss: 0.01, size: 8 * units.MiB},
	{name: "bursty-loss", toClient: "delay 5ms loss gemodel 1% 25%", toServer: "delay 5ms", rtt: 10 * time.Millisecond,
		loss: 0.01 / (0.01 + 0.25), bursty: true, size: 8 * units.MiB},
}

type gridRun struct {
	res *experiment.Result
	err error
}

var (
	gridOnce sync.Once
	gridRuns map[string]gridRun
	// gridDir holds the lab runs' outputs (their captures, 26 MB a
	// grid), removed when the tests end unless WANLAB_KEEP_CAPTURES
	// asked to keep them.
	gridDir string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if gridDir != "" && os.Getenv("WANLAB_KEEP_CAPTURES") == "" {
		os.RemoveAll(gridDir)
	}
	os.Exit(code)
}

// runGrid runs every grid point once per test binary, through the proxy,
// with CUBIC (loss-based: it fills the buffer the fit sizes).
func runGrid(t *testing.T) map[string]gridRun {
	t.Helper()
	testenv.RequireRoot(t)
	gridOnce.Do(func() {
		gridRuns = map[string]gridRun{}
		// WANLAB_KEEP_CAPTURES=DIR keeps the runs (their captures) there
		// for study with `wanlab fit` and tshark.
		dir, err := os.MkdirTemp(os.Getenv("WANLAB_KEEP_CAPTURES"), "wanlab-fit-grid-")
		if err != nil {
			t.Fatal(err)
		}
		gridDir = dir
		if os.Getenv("WANLAB_KEEP_CAPTURES") != "" {
			t.Logf("the lab runs are kept in %s", dir)
		}
		for _, g := range grid {
			cfg := experiment.Config{Name: g.name, Impair: map[string]string{experiment.ToClient: g.toClient, experiment.ToServer: g.toServer},
				Size: g.size, Proxy: true, Seed: 1, Out: filepath.Join(dir, g.name)}
			cfg.Client.CC, cfg.Server.CC = "cubic", "cubic"
			if g.rmem > 0 {
				cfg.ClientSysctls = map[string]string{"net.ipv4.tcp_rmem": "4096 131072 " + strconv.FormatInt(int64(g.rmem), 10)}
			}
			if g.wmem != "" {
				cfg.ServerSysctls = map[string]string{"net.ipv4.tcp_wmem": g.wmem}
			}
			res, err := experiment.Run(context.Background(), cfg)
			gridRuns[g.name] = gridRun{res, err}
		}
	})
	return gridRuns
}

// within says v is within tol (a share) of want.
func within(v, want, tol float64) bool { return math.Abs(v-want) <= tol*want }

// TestFitRecoversTheLab: captures of lab paths with known specs, fitted at
// both ends: the round trip within 5 %, the rate within 5 % and a token
// bucket where there is one, the buffer within 25 % when the fit claims
// it, the random loss rate within a wide binomial interval (4.4 standard
// deviations: a fit outside it once in 100,000 runs), the burstiness
// class, and the receive buffer from the window at the share this kernel
// offered (the ratio the run measured).
func TestFitRecoversTheLab(t *testing.T) {
	runs := runGrid(t)
	for _, g := range grid {
		for _, side := range []string{experiment.SideServer, experiment.SideClient} {
			t.Run(g.name+"/"+side, func(t *testing.T) {
				r := runs[g.name]
				if r.err != nil {
					t.Fatalf("lab run: %v", r.err)
				}
				opt := fit.Options{}
				if ratio := experiment.LearnedRatio(r.res); ratio > 0 {
					opt.WindowRatio = ratio
				}
				f, err := fit.File(r.res.Captures[side].Path, opt)
				if err != nil {
					t.Fatal(err)
				}
				var d fit.Direction
				for _, x := range f.Directions {
					if x.Data {
						d = x
					}
				}
				p := d.Params
				if rtt := p["rtt_ms"]; !rtt.Known() || !within(rtt.Value, float64(g.rtt.Milliseconds()), 0.05) {
					t.Errorf("rtt %+v, want %v within 5 %%", rtt, g.rtt)
				}
				if want := map[string]string{experiment.SideServer: "server", experiment.SideClient: "client"}[side]; f.CapturedAt != want {
					t.Errorf("captured at %q, want %q", f.CapturedAt, want)
				}
				rate := p["rate_bps"]
				switch {
				case g.tailDrops:
					// A rate claimed is the token bucket's.
					if rate.Known() && (!within(rate.Value, float64(g.rate), 0.05) || d.Bottleneck != "token bucket") {
						t.Errorf("rate %+v (%s), want %v within 5 %% from a token bucket, or unknown", rate, d.Bottleneck, g.rate)
					}
					// The buffer within 25 % when claimed. A host that
					// stalled the path makes the overflows meet more than
					// the queue otherwise held (the grid, 2026-12-03
					// 07:35: 7.8 ms before them where the buffer holds
					// 2.5 ms, and 98 KiB claimed for 31 KiB): the fit
					// then gives a range, not a claim.
					if b := p["buffer_bytes"]; b.Known() && !within(b.Value, float64(g.buffer), 0.25) {
						t.Errorf("buffer %+v, want %v within 25 %%", b, g.buffer)
					} else if !b.Known() {
						t.Logf("buffer not claimed: %s", b.Unknown)
					}
				case g.rate > 0:
					if !rate.Known() || !within(rate.Value, float64(g.rate), 0.05) {
						t.Errorf("rate %+v, want %v within 5 %%", rate, g.rate)
					}
					if d.Bottleneck != "token bucket" {
						t.Errorf("bottleneck %q, want a token bucket", d.Bottleneck)
					}
					if b := p["buffer_bytes"]; b.Known() && !within(b.Value, float64(g.buffer), 0.25) {
						t.Errorf("buffer %+v, want %v within 25 %%", b, g.buffer)
					}
				case rate.Known() && (g.loss > 0 || g.rmem > 0):
					t.Errorf("rate %+v on a path without a bottleneck", rate)
				}
				loss := p["loss_percent"]
				if g.loss > 0 {
					// The truth is what the proxy dropped by its loss
					// model on the data's way (its counters), not the
					// model's long-run rate.
					truth := proxyLoss(t, r.res)
					n := float64(loss.Samples)
					sd := math.Sqrt(truth*(1-truth)/n) * 100
					if !loss.Known() || n == 0 || math.Abs(loss.Value-truth*100) > 4.4*sd+0.05 {
						t.Errorf("loss %+v (n %v), want the proxy's %.3g %% within 4.4 sd (%.3g)", loss, n, truth*100, 4.4*sd)
					}
					if want := map[bool]string{true: "bursty", false: "random"}[g.bursty]; d.LossModel != want {
						t.Errorf("loss model %q, want %q", d.LossModel, want)
					}
				} else if g.tailDrops {
					// The drops are the queue's, but how many of them the
					// fit tells apart depends on the run: a loaded host's
					// spread hides the queue before some (single drops at
					// the sawtooth's tops: 8 segments in 7 runs were
					// called 0.031 % random in a grid run of the same
					// path), and HyStart may leave slow start without the
					// overshoot's cluster of drops; with neither the rate
					// (nor its spacing: 12 % of the pairs in the band in
					// one CI run) nor a queue seen full, 74 segments in 8
					// long runs were called bursty
					// (TestTailDropsAreCongestionLosses holds the rule).
					// Logged, not asserted.
					t.Logf("loss model %q, random %.3g %% (%v segments), congestion losses %v", d.LossModel, loss.Value, loss.Samples, p["congestion_losses"].Value)
				} else if d.LossModel == "bursty" || (loss.Known() && loss.Value > 0.3) {
					// A few tail drops whose queue the samples around them
					// missed may be called random (a loaded host delays
					// them); a random loss it is not. (Unknown: a range
					// from 0, no claim.)
					t.Errorf("loss model %q, %+v on a path without random loss", d.LossModel, loss)
				}
				if g.wmem != "" {
					if got := f.Sysctls.Server["net.ipv4.tcp_wmem"]; got != g.wmem || f.Transfer.Limit != "send-buffer" {
						t.Errorf("server tcp_wmem %q, limit %q: want %q, send-buffer", got, f.Transfer.Limit, g.wmem)
					}
				}
				if g.rmem > 0 {
					buf := p["receive_buffer_bytes"]
					if !buf.Known() || !within(buf.Value, float64(g.rmem), 0.10) {
						t.Errorf("receive buffer %+v (ratio %.2f), want %v within 10 %%", buf, opt.WindowRatio, g.rmem)
					}
					if !strings.Contains(f.Sysctls.Client["net.ipv4.tcp_rmem"], "4096 ") {
						t.Errorf("client sysctls %v, want a tcp_rmem", f.Sysctls.Client)
					}
				}
				if t.Failed() {
					_ = fit.WriteText(testWriter{t}, f)
				}
			})
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }

// TestFitMidStreamAndManyConnections: a capture that starts mid-stream
// (no handshake) still gives the round trip from both legs and says what
// it cannot know; with a second connection in the capture the busiest is
// fitted and the other listed, and --flow picks the other.
func TestFitMidStreamAndManyConnections(t *testing.T) {
	r := runGrid(t)["token-bucket"]
	if r.err != nil {
		t.Fatal(r.err)
	}
	src := r.res.Captures[experiment.SideServer].Path
	dir := t.TempDir()
	mid := filepath.Join(dir, "mid.pcap")
	two := filepath.Join(dir, "two.pcap")
	rewrite(t, src, mid, func(i int, frame []byte) [][]byte {
		if i < 500 {
			return nil
		}
		return [][]byte{frame}
	})
	f, err := fit.File(mid, fit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var d fit.Direction
	for _, x := range f.Directions {
		if x.Data {
			d = x
		}
	}
	// The standing queue of a loss-based sender stays in the samples of a
	// capture that missed the start: the lowest RTT lies between the
	// path's and the path's plus the buffer's delay (41 ms). The
	// self-check may withhold it: the fitted delay then holds the
	// standing queue that the replay's bucket queues again, and the
	// lowest predicted round trip misses the lowest captured.
	rtt := d.Params["rtt_ms"]
	switch {
	case !rtt.Known() && strings.Contains(rtt.Unknown, "self-check"):
		t.Logf("mid-stream rtt withheld: %s", rtt.Unknown)
	case !rtt.Known() || rtt.Value < 38 || rtt.Value > 40+41:
		t.Errorf("mid-stream rtt %+v", rtt)
	}
	if ws := d.Params["window_scale"]; ws.Known() {
		t.Errorf("mid-stream window scale %+v: the handshake is not in the capture", ws)
	}
	// A second, shorter connection: the first 300 frames again, on
	// another client port, after the first ends.
	rewrite(t, src, two, func(i int, frame []byte) [][]byte {
		out := [][]byte{frame}
		if i < 300 {
			c := append([]byte(nil), frame...)
			shiftPort(c)
			out = append(out, c)
		}
		return out
	})
	f, err = fit.File(two, fit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Others) != 1 || f.Connection.Bytes <= f.Others[0].Bytes {
		t.Fatalf("two connections: fitted %+v, others %+v: want the busiest fitted and the other listed", f.Connection, f.Others)
	}
	other, err := fit.File(two, fit.Options{Flow: strconv.Itoa(f.Others[0].Index)})
	if err != nil || other.Connection.Index != f.Others[0].Index {
		t.Fatalf("--flow %d: %+v, %v", f.Others[0].Index, other, err)
	}
}

// rewrite copies a capture's frames through fn into a classic pcap.
func rewrite(t *testing.T, src, dst string, fn func(i int, frame []byte) [][]byte) {
	t.Helper()
	r, closer, err := pcapfile.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	w := pcapgo.NewWriterNanos(out)
	first := true
	for i := 0; ; i++ {
		fr, err := r.Next()
		if err != nil {
			break
		}
		if first {
			if err := w.WriteFileHeader(65535, layers.LinkType(fr.Link)); err != nil {
				t.Fatal(err)
			}
			first = false
		}
		for _, b := range fn(i, fr.Data) {
			ci := gopacket.CaptureInfo{Timestamp: fr.Timestamp, CaptureLength: len(b), Length: fr.WireLen - len(fr.Data) + len(b)}
			if err := w.WritePacket(ci, b); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// shiftPort moves an Ethernet/IPv4/TCP frame's client port (the one that
// is not 80) up by 1000.
func shiftPort(b []byte) {
	if len(b) < 14+20+4 || binary.BigEndian.Uint16(b[12:14]) != 0x0800 {
		return
	}
	tcp := 14 + int(b[14]&0x0f)*4
	if len(b) < tcp+4 {
		return
	}
	at := tcp
	if binary.BigEndian.Uint16(b[tcp:tcp+2]) == 80 {
		at = tcp + 2
	}
	binary.BigEndian.PutUint16(b[at:], binary.BigEndian.Uint16(b[at:])+1000)
}

// proxyLoss is the share of the data direction's packets the proxy's loss
// model dropped.
func proxyLoss(t *testing.T, res *experiment.Result) float64 {
	t.Helper()
	if res.Impairment == nil || res.Impairment.Proxy == nil {
		t.Fatal("no proxy counters")
	}
	var in, lost uint64
	for _, d := range res.Impairment.Proxy.Directions {
		if d.Engine.Totals.PacketsIn > in {
			in, lost = d.Engine.Totals.PacketsIn, d.Engine.Totals.Drops.Loss
		}
	}
	if in == 0 {
		t.Fatal("the proxy saw no packet")
	}
	return float64(lost) / float64(in)
}

// TestFitPlacesACaptureWithoutTimestamps: a lab download with TCP
// timestamps off at both ends, its captures cut after the handshake (so
// neither timestamps nor the handshake place them): the fit places each
// by the ends' reactions, and near the sender the round trip is the
// data-to-ACK time (near the receiver that is the receiver's delay, and
// the round trip is not claimed).
func TestFitPlacesACaptureWithoutTimestamps(t *testing.T) {
	testenv.RequireRoot(t)
	off := map[string]string{"net.ipv4.tcp_timestamps": "0"}
	cfg := experiment.Config{Name: "no-timestamps", Impair: map[string]string{experiment.ToClient: "delay 10ms | tbf rate 20mbit burst 32kb limit 60kb", experiment.ToServer: "delay 10ms"},
		Size: 4 * units.MiB, Proxy: true, Seed: 1, Out: filepath.Join(t.TempDir(), "run"), ClientSysctls: off, ServerSysctls: off}
	cfg.Client.CC, cfg.Server.CC = "cubic", "cubic"
	res, err := experiment.Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("lab run: %v", err)
	}
	for _, side := range []string{experiment.SideServer, experiment.SideClient} {
		cut := filepath.Join(t.TempDir(), side+".pcap")
		rewrite(t, res.Captures[side].Path, cut, func(i int, frame []byte) [][]byte {
			if i < 20 {
				return nil
			}
			return [][]byte{frame}
		})
		f, err := fit.File(cut, fit.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rtt := f.Directions[0].Params["rtt_ms"]
		if want := map[string]string{experiment.SideServer: "server", experiment.SideClient: "client"}[side]; f.CapturedAt != want {
			t.Errorf("%s: captured at %q, want %q (%s)", side, f.CapturedAt, want, rtt.Evidence)
		}
		switch side {
		case experiment.SideServer:
			if !rtt.Known() || !within(rtt.Value, 20, 0.05) {
				t.Errorf("%s: rtt %+v, want 20 ms within 5 %%", side, rtt)
			}
		case experiment.SideClient:
			if rtt.Known() {
				t.Errorf("%s: rtt %+v claimed from the receiver's delay", side, rtt)
			}
		}
		t.Logf("%s: captured at %s; %s%s", side, f.CapturedAt, rtt.Evidence, rtt.Unknown)
	}
}
