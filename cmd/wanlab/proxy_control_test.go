package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wanlab/wanlab/proxy/control"
	"github.com/wanlab/wanlab/proxy/tap"
	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/spec"
)

var updateGolden = flag.Bool("update", false, "rewrite golden files")

// fakeProxy is a control.Backend with two directions and a tiny parser.
type fakeProxy struct {
	mu       sync.Mutex
	specs    map[string]string
	lastText string // the canonical text of the last change the API installed
	warn     map[string][]string
}

func (f *fakeProxy) Warnings() map[string][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.warn
}

func (f *fakeProxy) Install(iface string, ch spec.Change) error {
	im, err := ch.Apply(nil)
	if err != nil {
		return err
	}
	canon := im.String()
	f.mu.Lock()
	f.lastText = canon
	f.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	for k := range f.specs {
		if iface == "" || iface == k {
			f.specs[k] = canon
		}
	}
	return nil
}

func (f *fakeProxy) Specs() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[string]string{}
	for k, v := range f.specs {
		m[k] = v
	}
	return m
}

func (f *fakeProxy) Stats() control.Stats {
	specs := f.Specs()
	var soj engine.Histogram
	soj.Counts[12] = 9890 // (50ms, 100ms]
	soj.Counts[13] = 10   // (100ms, 250ms]
	netem := engine.Counters{PacketsIn: 10000, BytesIn: 15000000, PacketsOut: 9900, BytesOut: 14850000,
		Drops: engine.Drops{Loss: 100}, Duplicated: 3, Reordered: 1, Sojourn: soj}
	tbf := engine.Counters{PacketsIn: 9900, BytesIn: 14850000, PacketsOut: 9850, BytesOut: 14775000,
		Drops: engine.Drops{Queue: 20}, QueuePackets: 30, QueueBytes: 45000, Sojourn: soj}
	totals := engine.Counters{PacketsIn: 10000, BytesIn: 15000000, PacketsOut: 9850, BytesOut: 14775000,
		Drops: engine.Drops{Loss: 100, Queue: 20}, Duplicated: 3, Reordered: 1, QueuePackets: 30,
		QueueBytes: 45000, Sojourn: soj}
	// veth-b's latency: 9850 packets written, most 10-16 µs after their
	// departure.
	hist := func(sum, maxSample time.Duration, buckets map[int]uint64) control.LatencyHistogram {
		counts := make([]uint64, len(control.LatencyBoundsNs)+1)
		for i, n := range buckets {
			counts[i] = n
		}
		return control.NewLatencyHistogram(counts, sum, maxSample)
	}
	lat := &control.Latency{BoundsNs: control.LatencyBoundsNs[:],
		Added:            hist(9850*13*time.Microsecond, 1234567*time.Nanosecond, map[int]uint64{11: 5000, 12: 4000, 16: 800, 30: 50}),
		ReadToEnqueue:    hist(10000*2*time.Microsecond, 40*time.Microsecond, map[int]uint64{3: 9000, 5: 990, 16: 10}),
		DueToDequeue:     hist(9850*4*time.Microsecond, 1200*time.Microsecond, map[int]uint64{0: 2000, 6: 7800, 30: 50}),
		DequeueToWritten: hist(9850*9*time.Microsecond, 60*time.Microsecond, map[int]uint64{8: 9000, 10: 800, 18: 50}),
	}
	none := hist(0, 0, nil)
	idle := &control.Latency{BoundsNs: control.LatencyBoundsNs[:], Added: none, ReadToEnqueue: none, DueToDequeue: none, DequeueToWritten: none}
	return control.Stats{
		Directions: []control.Direction{
			{Iface: "veth-a", Spec: specs["veth-a"], Latency: idle, Engine: engine.Snapshot{Direction: "veth-a",
				Classes: []engine.ClassSnapshot{{Name: "default"}}}},
			{Iface: "veth-b", Spec: specs["veth-b"], Device: control.DeviceCounters{Malformed: 2, Written: 9850, Late1ms: 7}, Latency: lat,
				Engine: engine.Snapshot{Direction: "veth-b", Totals: totals, Swaps: 1,
					Classes: []engine.ClassSnapshot{{Name: "default", Spec: specs["veth-b"], Totals: totals,
						Stages: []engine.StageSnapshot{{Kind: "netem", Counters: netem}, {Kind: "tbf", Counters: tbf}}}}}},
		},
		Tap:        &tap.Stats{Records: 19750, Bytes: 30 << 20, RingFull: 12},
		LowLatency: "auto (held)",
	}
}

// startFake serves a fake proxy on a unix socket in a fresh directory and
// points the default socket lookup at that directory.
func startFake(t *testing.T) (*fakeProxy, string) {
	t.Helper()
	dir := t.TempDir()
	fake := &fakeProxy{specs: map[string]string{"veth-a": "", "veth-b": "delay 50ms"}}
	s, err := control.Start("unix:"+filepath.Join(dir, "veth-a-veth-b.sock"), fake, control.Access{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	old := proxyControlDir
	proxyControlDir = dir
	t.Cleanup(func() { proxyControlDir = old })
	return fake, "unix:" + filepath.Join(dir, "veth-a-veth-b.sock")
}

// runProxyCmd runs `wanlab proxy ARGS...` with the two commands under test
// and returns the output and the exit status main would use.
func runProxyCmd(args ...string) (string, int, error) {
	var out bytes.Buffer
	app := &cli.App{
		Name:           "wanlab",
		Writer:         &out,
		ErrWriter:      &out,
		ExitErrHandler: func(*cli.Context, error) {},
		Commands: []*cli.Command{{
			Name:        "proxy",
			Subcommands: []*cli.Command{proxySetCommand(), proxyStatsCommand()},
		}},
	}
	err := runCommandLine(context.Background(), app, append([]string{"wanlab", "proxy"}, args...))
	code := exitOK
	if err != nil {
		code = exitCode(err)
	}
	return out.String(), code, err
}

func TestProxySet(t *testing.T) {
	fake, addr := startFake(t)

	out, code, err := runProxyCmd("set", "veth-b=delay   20ms  loss 1%")
	if err != nil || code != 0 || out != "veth-b=delay 20ms loss 1%\n" {
		t.Fatalf("set veth-b: %q, exit %d, %v", out, code, err)
	}
	// Unquoted words are joined; no IFACE= means both directions.
	out, code, err = runProxyCmd("set", "--control", addr, "delay", "5ms")
	if err != nil || code != 0 || out != "veth-a=delay 5ms\nveth-b=delay 5ms\n" {
		t.Fatalf("set both: %q, exit %d, %v", out, code, err)
	}
	out, code, err = runProxyCmd("set", "veth-a=")
	if err != nil || code != 0 || out != "veth-a=\n" {
		t.Fatalf("clear veth-a: %q, exit %d, %v", out, code, err)
	}

	// A bad spec: exit 2, the parser's message, the running spec kept.
	_, code, err = runProxyCmd("set", "veth-b=dela 5ms")
	if code != exitUsage || err == nil || err.Error() != `proxy set: unknown keyword "dela" at position 1` {
		t.Fatalf("bad spec: exit %d, %v", code, err)
	}
	if got := fake.Specs()["veth-b"]; got != "delay 5ms" {
		t.Fatalf("running spec replaced by a bad one: %q", got)
	}
	_, code, err = runProxyCmd("set", "eth9=delay 1ms")
	if code != exitUsage || err == nil || !strings.Contains(err.Error(), `interface "eth9"`) {
		t.Fatalf("unknown interface: exit %d, %v", code, err)
	}
	_, code, err = runProxyCmd("set", "my iface=delay 1ms")
	if code != exitUsage || err == nil || !strings.Contains(err.Error(), "bad interface name \"my iface\"") {
		t.Fatalf("bad interface name: exit %d, %v", code, err)
	}
	_, code, err = runProxyCmd("set")
	if code != exitUsage || err == nil {
		t.Fatalf("no spec: exit %d, %v", code, err)
	}
}

func TestProxySetNoProxy(t *testing.T) {
	old := proxyControlDir
	proxyControlDir = t.TempDir()
	defer func() { proxyControlDir = old }()
	_, code, err := runProxyCmd("set", "delay 1ms")
	if code != exitFailure || err == nil || !strings.Contains(err.Error(), "no proxy control socket") {
		t.Fatalf("no proxy: exit %d, %v", code, err)
	}
	_, code, err = runProxyCmd("stats", "--control", "unix:"+filepath.Join(proxyControlDir, "gone.sock"))
	if code != exitFailure || err == nil || !strings.Contains(err.Error(), "gone.sock") {
		t.Fatalf("dead socket: exit %d, %v", code, err)
	}
	_, code, err = runProxyCmd("stats", "--control", "0.0.0.0:1")
	if code == exitOK || err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Fatalf("non-loopback: exit %d, %v", code, err)
	}
}

func TestProxyStatsTable(t *testing.T) {
	startFake(t)
	out, code, err := runProxyCmd("stats")
	if err != nil || code != 0 {
		t.Fatalf("stats: exit %d, %v", code, err)
	}
	golden := filepath.Join("testdata", "proxy_stats.golden")
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if out != string(want) {
		t.Errorf("stats output differs from %s (run with -update after checking):\n%s", golden, out)
	}
}

// TestProxyStatsLatency: --latency prints each direction's added latency
// and its parts (golden file); the plain table is TestProxyStatsTable's.
func TestProxyStatsLatency(t *testing.T) {
	fake, _ := startFake(t)
	out, code, err := runProxyCmd("stats", "--latency")
	if err != nil || code != 0 {
		t.Fatalf("stats --latency: exit %d, %v", code, err)
	}
	golden := filepath.Join("testdata", "proxy_stats_latency.golden")
	if *updateGolden {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if out != string(want) {
		t.Errorf("stats --latency output differs from %s (run with -update after checking):\n%s", golden, out)
	}
	// The figures are the served quantiles.
	h := fake.Stats().Directions[1].Latency.Added
	if h.P50 != 12500 || h.P99 != 40e3 || !strings.Contains(out, "12.5us   16us    40us  1.23ms") {
		t.Errorf("added p50 %v p99 %v; output:\n%s", h.P50, h.P99, out)
	}
	// A proxy that does not report latency (an older one) is named so.
	var b strings.Builder
	if err := writeProxyLatency(&b, control.Stats{Directions: []control.Direction{{Iface: "veth-a"}}}); err != nil ||
		!strings.Contains(b.String(), "does not report its latency") {
		t.Errorf("without latency: %v\n%s", err, b.String())
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0s", 999: "999ns", 1250: "1.25us", 12345: "12.3us",
		1234567: "1.23ms", 100 * time.Millisecond: "100ms"} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%d) = %q, want %q", d, got, want)
		}
	}
}

func TestProxyStatsJSON(t *testing.T) {
	fake, addr := startFake(t)
	out, code, err := runProxyCmd("stats", "--json", "--control", addr)
	if err != nil || code != 0 {
		t.Fatalf("stats --json: exit %d, %v", code, err)
	}
	var st control.Stats
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("stats --json is not a Stats object: %v\n%s", err, out)
	}
	want := fake.Stats()
	if len(st.Directions) != 2 || st.Directions[1].Engine.Totals != want.Directions[1].Engine.Totals ||
		st.Tap == nil || *st.Tap != *want.Tap {
		t.Errorf("stats --json decoded to %+v", st)
	}
	// The field names are a contract.
	for _, field := range []string{`"directions"`, `"iface"`, `"spec"`, `"engine"`, `"totals"`, `"packets_in"`,
		`"drops"`, `"loss"`, `"queue"`, `"sojourn"`, `"device"`, `"malformed"`, `"read_errors"`, `"written"`, `"late_1ms"`, `"low_latency"`, `"tap"`,
		`"latency"`, `"bounds_ns"`, `"added"`, `"read_to_enqueue"`, `"due_to_dequeue"`, `"dequeue_to_written"`,
		`"packets"`, `"sum_ns"`, `"max_ns"`, `"p50_ns"`, `"p90_ns"`, `"p99_ns"`, `"counts"`} {
		if !strings.Contains(out, field) {
			t.Errorf("stats --json lacks %s", field)
		}
	}
	if _, _, err := runProxyCmd("stats", "extra"); !errors.Is(err, ErrUsage) {
		t.Errorf("stats with an argument: %v", err)
	}
}

func TestQuantile(t *testing.T) {
	var h engine.Histogram
	if got := quantile(h, 0.5); got != "-" {
		t.Errorf("empty: %q", got)
	}
	h.Counts[0] = 1
	h.Counts[len(engine.SojournBoundsNs)] = 99
	if got := quantile(h, 0.5); got != "> 10s" {
		t.Errorf("p50 above the last bound: %q", got)
	}
	if got := quantile(h, 0); got != "≤ 10us" {
		t.Errorf("p0: %q", got)
	}
}

func FuzzSplitIfaceSpec(f *testing.F) {
	for _, s := range []string{"eth1=delay 50ms", "delay 5ms", "=", "a=b=c", " veth-b = loss 1% ", "my if=x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		iface, spec, err := splitIfaceSpec(arg)
		if err != nil {
			return
		}
		if strings.ContainsAny(iface, " \t/|=") || len(iface) > 15 {
			t.Fatalf("interface %q accepted from %q", iface, arg)
		}
		if iface == "" && spec != strings.TrimSpace(arg) {
			t.Fatalf("spec %q changed from %q", spec, arg)
		}
	})
}

// TestProxyStatsXStats: a queue discipline's xstats (a stage's and an htb
// leaf's) are printed under the table, one line each.
func TestProxyStatsXStats(t *testing.T) {
	x := &engine.XStats{CoDel: &engine.CoDelXStats{MaxPacket: 1500, Count: 3, LDelayUs: 2500}}
	st := control.Stats{Directions: []control.Direction{{Iface: "veth-b", Engine: engine.Snapshot{
		Classes:   []engine.ClassSnapshot{{Name: "default", Stages: []engine.StageSnapshot{{Kind: "tbf"}, {Kind: "codel", Queue: true, XStats: x}}}},
		Scheduler: []engine.TreeClass{{ID: "1:10", Leaf: true, XStats: &engine.XStats{RED: &engine.REDXStats{Early: 4}}}},
	}}}}
	var b bytes.Buffer
	if err := writeProxyStats(&b, st); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"  codel xstats: count 3 lastcount 0 ldelay 2.5ms maxpacket 1500 ecn_mark 0 drop_overlimit 0\n",
		"  htb leaf 1:10 xstats: marked 0 early 4 pdrop 0 other 0\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("stats lack %q:\n%s", want, b.String())
		}
	}
}
