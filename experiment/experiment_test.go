package experiment

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/lab/capture"
	"github.com/wanlab/wanlab/lab/traffic"
	"github.com/wanlab/wanlab/tuner"
	"github.com/wanlab/wanlab/tuner/sockopt"
	"github.com/wanlab/wanlab/units"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestPresetsAreValid(t *testing.T) {
	if len(Presets()) != 6 {
		t.Fatalf("presets %v, want seed000..seed004 and managed-queue", Presets())
	}
	for _, name := range Presets() {
		c, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Specs(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if PresetAbout(name) == "" || c.Name != name {
			t.Errorf("%s: no description or name", name)
		}
		// A copy: changing it does not change the preset.
		c.Impair[ToClient] = "loss 50%"
		if again, _ := Preset(name); again.Impair[ToClient] == "loss 50%" {
			t.Errorf("%s: Preset returned a shared map", name)
		}
	}
	if d := Defaults(); d.Name != "seed001" || d.Impair[ToServer] != "delay 35ms" {
		t.Errorf("Defaults() = %+v, want seed001", d)
	}
	if _, err := Preset("seed999"); err == nil || !strings.Contains(err.Error(), "seed000") {
		t.Errorf("unknown preset error %v, want the list of presets", err)
	}
}

func TestImpairFlags(t *testing.T) {
	var c Config
	if err := c.AddImpair("to-client=delay 50ms loss 1% | tbf rate 100mbit burst 64kb limit 1mb"); err != nil {
		t.Fatal(err)
	}
	if err := c.AddImpair("delay 5ms"); err != nil { // both directions
		t.Fatal(err)
	}
	if c.Impair[ToClient] != "delay 5ms" || c.Impair[ToServer] != "delay 5ms" {
		t.Errorf("undirected --impair gave %v", c.Impair)
	}
	for _, bad := range []string{"to-moon=delay 1ms", "to-client=dela 5ms", "loss 120%"} {
		var c Config
		if err := c.AddImpair(bad); err == nil {
			t.Errorf("AddImpair(%q) accepted", bad)
		}
	}
	c = Config{}
	c.AppendStage(ToClient, "tbf rate 10mbit burst 32kb latency 50ms")
	c.AppendStage(ToClient, "loss 1%")
	c.AppendStage(ToClient, "delay 10ms")
	if got, want := c.Impair[ToClient], "loss 1% delay 10ms | tbf rate 10mbit burst 32kb latency 50ms"; got != want {
		t.Errorf("AppendStage built %q, want %q", got, want)
	}
	specs, err := c.Specs()
	if err != nil {
		t.Fatal(err)
	}
	if len(specs[ToClient].Stages) != 2 || !specs[ToServer].IsEmpty() {
		t.Errorf("specs %v", specs)
	}
	c.Impair["sideways"] = "delay 1ms"
	if _, err := c.Specs(); err == nil {
		t.Error("a spec for an unknown direction was accepted")
	}
}

// fakeResult is a complete result without running anything, for the
// output formats.
func fakeResult(dir string) *Result {
	start := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	cfg, _ := Preset("seed001")
	cfg = cfg.withDefaults()
	series := &analyzer.DirectionSeries{}
	for i := range 50 {
		ts := time.Duration(i) * 10 * time.Millisecond
		v := float64(i) * 1e6
		series.Segments.Points = append(series.Segments.Points, analyzer.Point{T: ts, Min: v, Max: v + 1448, N: 1})
		series.Acks.Points = append(series.Acks.Points, analyzer.Point{T: ts, Max: v, N: 1})
		series.RTT.Points = append(series.RTT.Points, analyzer.Point{T: ts, Sum: 35, N: 1, Last: 35})
		series.AdvWindow.Points = append(series.AdvWindow.Points, analyzer.Point{T: ts, Last: 2e6, N: 1})
		series.InFlight.Points = append(series.InFlight.Points, analyzer.Point{T: ts, Max: 1.9e6, N: 1})
		series.Throughput.Points = append(series.Throughput.Points, analyzer.Point{T: ts, Sum: 430000, N: 1})
	}
	series.Throughput.Bucket = 10 * time.Millisecond
	dg := &analyzer.Diagnosis{Direction: "server->client", Limit: analyzer.LimitReceiveWindow, RateBps: 344e6,
		Evidence: []string{"throughput = window / RTT = 1.5 MB / 35 ms"},
		Advice:   []string{"raise the receive buffer on 10.201.1.2: net.ipv4.tcp_rmem max >= 16777216 bytes"}}
	conn := &analyzer.Connection{Index: 1, Client: netip.MustParseAddrPort("10.201.1.2:40000"), Server: netip.MustParseAddrPort("10.201.2.2:80"),
		Directions: [2]*analyzer.Direction{{}, {Series: series, DirectionStats: analyzer.DirectionStats{UniqueBytes: 256 << 20, DataPackets: 50}, Diagnosis: dg}},
		Diagnosis:  dg}
	info := sockopt.TCPInfo{State: "established", RTT: 35 * time.Millisecond, MinRTT: 35 * time.Millisecond,
		SndCwnd: 1100, SndMSS: 1448, SndWnd: 2 * units.MiB, DeliveryRate: 344 * units.Mbit, BusyTime: 6 * time.Second, RwndLimited: 4 * time.Second}
	return &Result{
		LabID: "abc123", Config: cfg, Mode: "proxy", Started: start, Elapsed: 7 * time.Second, Out: dir,
		Specs:  map[string]string{ToServer: "delay 35ms"},
		Client: netip.MustParseAddrPort("10.201.1.2:40000"), Server: netip.MustParseAddrPort("10.201.2.2:80"),
		Download: &traffic.DownloadResult{Bytes: 256 * units.MiB, Connect: 35 * time.Millisecond, FirstByte: 70 * time.Millisecond,
			Elapsed: 6240 * time.Millisecond, Average: 344 * units.Mbit, Client: sockopt.TCPInfo{RTT: 35 * time.Millisecond, RcvWnd: 2 * units.MiB},
			Server: &info, ClientEffective: sockopt.Effective{RcvBuf: 3 * units.MiB, SndBuf: 45 * units.KiB, CC: "cubic"},
			ServerEffective: &sockopt.Effective{RcvBuf: 128 * units.KiB, SndBuf: 4 * units.MiB, CC: "cubic"}},
		Captures: map[string]*CaptureResult{
			SideClient: {Path: filepath.Join(dir, "client.pcapng"), Stats: capture.Stats{Packets: 8000}},
			SideServer: {Path: filepath.Join(dir, "server.pcapng"), Stats: capture.Stats{Packets: 7600, KernelDrops: 3},
				Connections: []*analyzer.Connection{conn}, Diagnosis: dg, Limits: map[string]int{analyzer.LimitReceiveWindow: 1}},
		},
		Advice: dg.Advice,
		Report: filepath.Join(dir, "report.html"), JSON: filepath.Join(dir, "result.json"),
	}
}

func TestSummaryGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSummary(&b, fakeResult("/out")); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "summary.golden")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("summary differs from %s (go test -update to accept):\n%s", golden, b.String())
	}
}

// checkReport parses an HTML report and returns, per section (capture),
// the kinds of the graphs it holds, and the page's text.
// hasAttr says whether element n has attribute key with value val.
func hasAttr(n *html.Node, key, val string) bool {
	for _, a := range n.Attr {
		if a.Key == key && a.Val == val {
			return true
		}
	}
	return false
}

func checkReport(t *testing.T, r io.Reader) (graphs []map[string]int, text string) {
	t.Helper()
	doc, err := html.Parse(r)
	if err != nil {
		t.Fatalf("report is not HTML: %v", err)
	}
	var b strings.Builder
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		// A section per capture; the verdict that opens the page (its
		// own test is the report package's) comes before them, so its
		// graph counts in none.
		if n.Type == html.ElementNode && n.Data == "section" && !hasAttr(n, "id", "verdict") {
			graphs = append(graphs, map[string]int{})
		}
		if n.Type == html.ElementNode && n.Data == "div" && len(graphs) > 0 {
			var class, kind string
			for _, a := range n.Attr {
				switch a.Key {
				case "class":
					class = a.Val
				case "data-kind":
					kind = a.Val
				}
			}
			if class == "graph" {
				graphs[len(graphs)-1][kind]++
			}
		}
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return graphs, b.String()
}

// graphKinds are the graphs the seeds looked at, drawn for every data
// direction.
var graphKinds = []string{"tcptrace", "stevens", "rtt", "window", "throughput"}

func TestReportHasEveryGraph(t *testing.T) {
	var b bytes.Buffer
	if err := WriteReport(&b, fakeResult("/out")); err != nil {
		t.Fatal(err)
	}
	graphs, text := checkReport(t, bytes.NewReader(b.Bytes()))
	if len(graphs) != 2 {
		t.Fatalf("report has %d sections, want the client and the server capture", len(graphs))
	}
	// The fake server capture has one connection with data: every graph.
	for _, k := range graphKinds {
		if graphs[1][k] != 1 {
			t.Errorf("server capture: %d %s graphs, want 1", graphs[1][k], k)
		}
	}
	for _, want := range []string{"delay 35ms", "net.ipv4.tcp_rmem", "receive-window limited", "TCP_INFO",
		"raise the receive buffer", "client capture", "server capture", "43.0 MB/s"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestRerunKeepsTheCommandLine(t *testing.T) {
	tu := &Tuning{
		Client: []tuner.Change{{Key: "net.ipv4.tcp_rmem", To: "4096 131072 16777216", Side: "receiver"},
			{Key: "net.core.rmem_max", To: "8388608", Side: "receiver", HostOnly: true}},
		Server: []tuner.Change{{Key: "net.ipv4.tcp_wmem", To: "4096 16384 16777216", Side: "sender"}},
	}
	cfg := Config{Name: "seed001", Args: []string{"experiment", "--delay", "20ms", "--out", "/tmp/x", "--impair", "to-client=loss 1%"}}
	got := rerun(cfg, tu)
	want := `wanlab experiment --delay 20ms --impair 'to-client=loss 1%' --client-sysctl 'net.ipv4.tcp_rmem=4096 131072 16777216' --server-sysctl 'net.ipv4.tcp_wmem=4096 16384 16777216'`
	if got != want {
		t.Errorf("rerun =\n%s\nwant\n%s", got, want)
	}
	if got := rerun(Config{Name: "seed001"}, tu); !strings.HasPrefix(got, "wanlab experiment --preset seed001 --client-sysctl") {
		t.Errorf("rerun without a command line = %s", got)
	}
	if got := rerun(Config{}, &Tuning{Client: tu.Client[1:]}); got != "" {
		t.Errorf("rerun with only host-wide changes = %q, want none", got)
	}
}

func TestCheckSysctls(t *testing.T) {
	ok := Config{ClientSysctls: map[string]string{"net.ipv4.tcp_rmem": "4096 131072 16777216", "net.ipv4.tcp_ecn": "1"},
		ServerSysctls: map[string]string{"net.ipv4.tcp_wmem": "4096 4096 4096"}}
	if err := ok.CheckSysctls(); err != nil {
		t.Errorf("valid sysctls refused: %v", err)
	}
	for _, bad := range []map[string]string{
		{"net.ipv4.tcp_rmem": "9000 100 10"},
		{"net.ipv4.tcp_rmem": "lots"},
		{"net.core.rmem_max": "8388608"},
		{"kernel.hostname": "x"},
	} {
		if err := (Config{ClientSysctls: bad}).CheckSysctls(); !errors.Is(err, ErrBadSysctl) {
			t.Errorf("CheckSysctls(%v) = %v, want ErrBadSysctl", bad, err)
		}
	}
}

func TestScenarioNamesAreAliases(t *testing.T) {
	for id, name := range map[string]string{"seed000": "send-buffer", "seed001": "receive-window", "seed002": "shaped-link",
		"seed003": "delayed-ack", "seed004": "random-loss"} {
		if got := ScenarioName(id); got != name {
			t.Errorf("ScenarioName(%s) = %q, want %q", id, got, name)
		}
		a, err := Preset(id)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if a.Size != b.Size || fmt.Sprint(a.Impair) != fmt.Sprint(b.Impair) || b.Name != name || PresetAbout(name) != PresetAbout(id) {
			t.Errorf("%s and %s differ: %+v / %+v", id, name, a, b)
		}
	}
	if _, err := Preset("nonsense"); err == nil || !strings.Contains(err.Error(), "receive-window (seed001)") {
		t.Errorf("unknown preset: %v", err)
	}
}
