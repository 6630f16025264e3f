package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/analyzer/internal/synth"
	"github.com/wanlab/wanlab/analyzer/pcapfile"
	"github.com/wanlab/wanlab/analyzer/plot"
)

var update = flag.Bool("update", false, "rewrite golden files")

// analyze reads one of the analyzer's committed captures.
func analyze(t testing.TB, name string) *analyzer.Result {
	t.Helper()
	res, err := analyzer.AnalyzeFile(filepath.Join("..", "testdata", name+".pcap"), analyzer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// parse checks that b is well-formed HTML by parsing it and walking every
// element; it returns the elements by tag with their attributes.
func parse(t *testing.T, b []byte) map[string][]map[string]string {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("report is not valid HTML: %v", err)
	}
	// html.Parse recovers from almost anything; the tokenizer shows
	// mismatched structure as stray end tags.
	z := html.NewTokenizer(bytes.NewReader(b))
	var stack []string
	void := map[string]bool{"meta": true, "br": true, "img": true, "input": true, "link": true, "hr": true}
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		name, _ := z.TagName()
		switch tt {
		case html.StartTagToken:
			if !void[string(name)] {
				stack = append(stack, string(name))
			}
		case html.EndTagToken:
			if len(stack) == 0 || stack[len(stack)-1] != string(name) {
				t.Fatalf("end tag </%s> does not close the open <%v>", name, stack)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) != 0 {
		t.Fatalf("unclosed elements %v", stack)
	}
	els := map[string][]map[string]string{}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			attrs := map[string]string{}
			for _, a := range n.Attr {
				attrs[a.Key] = a.Val
			}
			els[n.Data] = append(els[n.Data], attrs)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return els
}

func TestReportValidSelfContainedWithEveryGraph(t *testing.T) {
	client, server := analyze(t, "rwnd"), analyze(t, "loss")
	page := Page{Title: "two captures <side by side>", Intro: "client & server",
		Sections: []Section{
			{Title: "client capture", Result: client, Tables: []Table{KV("impairment", "to-client", "delay 35ms", "to-server", "(none)")}},
			{Title: "server capture", Result: server, Tables: []Table{{Title: "sysctls", Header: []string{"host", "key", "value"},
				Rows: [][]string{{"server", "net.ipv4.tcp_wmem", "4096 4096 4096"}}}}},
		}}
	var buf bytes.Buffer
	if err := Write(&buf, page); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	els := parse(t, b)
	// The verdict, then one section per capture.
	if n := len(els["section"]); n != 3 {
		t.Errorf("%d sections, want the verdict and 2 captures", n)
	}
	// No external resource: nothing loads from the network.
	for tag, list := range els {
		for _, a := range list {
			for _, k := range []string{"src", "href", "action", "data"} {
				if v, ok := a[k]; ok && v != "" && !strings.HasPrefix(v, "#") {
					t.Errorf("<%s %s=%q> refers outside the file", tag, k, v)
				}
			}
		}
	}
	if m := regexp.MustCompile(`(?i)(src|href|url)\s*[=(]\s*["']?(https?:)?//`).Find(b); m != nil {
		t.Errorf("external reference %q", m)
	}
	if bytes.Contains(b, []byte("http://")) || bytes.Contains(b, []byte("https://")) {
		i := max(bytes.Index(b, []byte("http://")), bytes.Index(b, []byte("https://")))
		t.Errorf("URL in the report: %q", b[max(0, i-40):min(len(b), i+60)])
	}
	// Text is escaped, not markup.
	if !bytes.Contains(b, []byte("two captures &lt;side by side&gt;")) {
		t.Error("title not escaped")
	}
	// Every graph of every data direction of every connection, with a
	// canvas placeholder and its data.
	ids := map[string]bool{}
	for _, a := range els["div"] {
		if strings.Contains(a["class"], "graph") {
			ids[a["id"]] = true
		}
	}
	for si, res := range []*analyzer.Result{client, server} {
		for _, c := range res.Connections {
			dirs := 0
			for di := range c.Directions {
				if !plot.HasData(c, di) {
					continue
				}
				dirs++
				for _, k := range plot.Kinds {
					id := fmt.Sprintf("s%d-c%d-%s-%s", si+1, c.Index, plot.DirectionName(di), k)
					if !ids[id] {
						t.Errorf("section %d: graph %s missing", si+1, id)
					}
					if !bytes.Contains(b, []byte(`"id":"`+id+`"`)) {
						t.Errorf("section %d: no data for graph %s", si+1, id)
					}
				}
			}
			if dirs == 0 {
				t.Errorf("section %d connection %d: no data direction", si+1, c.Index)
			}
		}
	}
	if len(ids) < 10 {
		t.Errorf("only %d graphs", len(ids))
	}
	// The diagnosis of each capture is in the page.
	for _, res := range []*analyzer.Result{client, server} {
		d := res.Connections[0].Diagnosis
		if d == nil {
			t.Fatal("capture without diagnosis")
		}
		if !bytes.Contains(b, []byte(html.EscapeString(d.Limit)+" limited")) {
			t.Errorf("diagnosis %q not shown", d.Limit)
		}
		for _, a := range d.Advice {
			if !bytes.Contains(b, []byte(html.EscapeString(a))) && !bytes.Contains(b, []byte(escapeLikeTemplate(a))) {
				t.Errorf("advice %q not shown", a)
			}
		}
	}
	if t.Failed() {
		os.WriteFile(filepath.Join(t.TempDir(), "report.html"), b, 0o644)
	}
}

// escapeLikeTemplate escapes as html/template does (it writes &#39; and
// &#34; where html.EscapeString writes &#39; and &#34; too, but also
// escapes '+').
func escapeLikeTemplate(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '+':
			b.WriteString("&#43;")
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '"':
			b.WriteString("&#34;")
		case '\'':
			b.WriteString("&#39;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// fixedConnection is a connection with known values, so the golden
// summary tests the rendering, not the analyzer's arithmetic.
func fixedConnection() *analyzer.Connection {
	c := &analyzer.Connection{Index: 3,
		Client: netip.MustParseAddrPort("10.0.0.2:40000"), Server: netip.MustParseAddrPort("10.0.0.1:80"),
		Start: 12 * time.Millisecond, Duration: 2*time.Second + 500*time.Millisecond, HandshakeSeen: true, State: "closed"}
	up := &analyzer.Direction{From: c.Client, To: c.Server}
	up.Packets, up.PureAcks, up.DataPackets, up.DataBytes, up.UniqueBytes = 900, 899, 1, 120, 120
	up.MSS, up.WindowScale, up.SACKPermitted, up.Timestamps, up.WindowScaleKnown = 1460, 7, true, true, true
	up.MaxWindowBytes, up.MinWindowBytes = 1_510_000, 64_000
	down := &analyzer.Direction{From: c.Server, To: c.Client}
	down.Packets, down.DataPackets, down.DataBytes, down.UniqueBytes = 1800, 1799, 2_610_000, 2_600_000
	down.RetransmittedPackets, down.RetransmittedBytes, down.FastRetransmissions = 7, 10_136, 5
	down.DupAcks, down.TripleDupAcks, down.MSS, down.WindowScale = 21, 5, 1460, 7
	down.RTTSamples, down.RTTMinMs, down.RTTAvgMs, down.RTTMaxMs, down.RTTP50Ms, down.RTTP99Ms = 800, 35.012, 36.5, 48.25, 35.9, 47.125
	down.PeerMaxWindowBytes, down.MaxInFlightBytes, down.P50InFlightBytes = 1_510_000, 1_509_000, 1_480_000
	down.ThroughputBps, down.DataRateBps, down.TransferMs = 8_320_000, 8_400_000, 2476.19
	down.CapturedNear, down.PathRTTMs, down.WindowLimitedShare = "sender", 35.012, 0.81
	down.Diagnosis = &analyzer.Diagnosis{Direction: "server->client", Limit: analyzer.LimitReceiveWindow,
		Evidence:     []string{"bytes in flight at the peer's window (1.51 MB) on 81 % of data segments", "1.51 MB / 35 ms = 43 MB/s"},
		Advice:       []string{`client: net.ipv4.tcp_rmem max >= 8388608 bytes (wanlab tune apply --rmem-max 8M)`},
		RateBps:      8_400_000,
		PredictedBps: 100_000_000}
	c.Directions = [2]*analyzer.Direction{up, down}
	c.Diagnosis = down.Diagnosis
	return c
}

func TestSummaryGolden(t *testing.T) {
	var buf bytes.Buffer
	cv := connView(fixedConnection(), "s1-c3")
	// Every JSON field of the statistics is a row (checked against the
	// JSON encoding itself); the golden file keeps the fields the issue
	// names, so the analyzer can add fields without touching it.
	js, err := json.Marshal(cv.Stats)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	dj, _ := json.Marshal(fixedConnection().Directions[1].DirectionStats)
	if err := json.Unmarshal(dj, &fields); err != nil {
		t.Fatal(err)
	}
	for f := range fields {
		if !strings.Contains(string(js), `"Field":"`+f+`"`) {
			t.Errorf("JSON field %s is not a row of the statistics table", f)
		}
	}
	keep := []string{"packets", "data_packets", "data_bytes", "unique_bytes", "retransmitted_packets", "retransmitted_bytes",
		"fast_retransmissions", "out_of_order_packets", "dup_acks", "triple_dup_acks", "zero_windows", "mss", "window_scale",
		"sack_permitted", "timestamps", "rtt_samples", "rtt_min_ms", "rtt_avg_ms", "rtt_max_ms", "rtt_p50_ms", "rtt_p99_ms",
		"max_window_bytes", "peer_max_window_bytes", "max_in_flight_bytes", "throughput_bps", "data_rate_bps", "captured_near",
		"window_limited_share"}
	cv.Stats = slices.DeleteFunc(cv.Stats, func(r statRow) bool { return !slices.Contains(keep, r.Field) })
	for _, name := range []string{"summary", "stats"} {
		if err := pageTemplate().ExecuteTemplate(&buf, name, cv); err != nil {
			t.Fatal(err)
		}
	}
	golden := filepath.Join("testdata", "summary.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./analyzer/report -run Golden -update)", err)
	}
	if got := buf.String(); got != string(want) {
		t.Errorf("summary differs from %s (run with -update if the change is meant):\n%s", golden, diff(string(want), got))
	}
	// The table follows the JSON schema: every field the issue names.
	for _, f := range []string{"packets", "data_bytes", "unique_bytes", "retransmitted_packets", "retransmitted_bytes",
		"out_of_order_packets", "dup_acks", "zero_windows", "rtt_samples", "rtt_min_ms", "rtt_avg_ms", "rtt_max_ms",
		"max_window_bytes", "max_in_flight_bytes", "throughput_bps"} {
		if !strings.Contains(buf.String(), "<th>"+f+"</th>") {
			t.Errorf("summary lacks field %s", f)
		}
	}
}

// diff shows the first differing lines.
func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return fmt.Sprintf("line %d:\nwant %q\ngot  %q", i+1, a, b)
		}
	}
	return ""
}

// A section may come from connections alone (the experiment keeps no
// Result); connections beyond DetailConnections are in the overview only.
func TestSectionFromConnectionsWithDetailLimit(t *testing.T) {
	loss := analyze(t, "loss").Connections[0]
	small := fixedConnection() // no series: a table without graphs
	small.Index = 7
	for _, d := range small.Directions {
		d.UniqueBytes = 10
	}
	var buf bytes.Buffer
	err := Write(&buf, Page{Title: "t", Sections: []Section{{Title: "only connections",
		Connections: []*analyzer.Connection{small, loss}, DetailConnections: 1, Warnings: []string{"3 packets dropped by the kernel"}}}})
	if err != nil {
		t.Fatal(err)
	}
	b := buf.String()
	parse(t, buf.Bytes())
	for _, want := range []string{"3 packets dropped by the kernel", "1 smaller connections are in the table above only",
		`id="s1-c1-s2c-tcptrace"`, "<td>7</td>", `<td><a href="#s1-c1">1</a></td>`} {
		if !strings.Contains(b, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(b, `id="s1-c7`) {
		t.Error("the smaller connection got a detailed block")
	}
	if strings.Contains(b, "<caption>capture</caption>") {
		t.Error("capture table without a Result")
	}
}

func TestEmptyPage(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, Page{Title: "nothing", Sections: []Section{{Title: "no capture"}}}); err != nil {
		t.Fatal(err)
	}
	parse(t, buf.Bytes())
	if !strings.Contains(buf.String(), "const WANLAB_GRAPHS = [];") {
		t.Error("an empty page must still give the plotter an array")
	}
}

// BenchmarkWrite renders the report of a transfer whose series are all at
// their point budget (what a million-packet flow gives); bytes are the
// HTML written.
func BenchmarkWrite(b *testing.B) {
	var capture bytes.Buffer
	if _, err := synth.Write(&capture, synth.Config{Bytes: 96 << 20, AtSender: true, Reno: true,
		Drop: map[int]bool{1000: true, 30000: true}, Window: 4 << 20}); err != nil {
		b.Fatal(err)
	}
	r, err := pcapfile.NewReader(&capture, "synthetic")
	if err != nil {
		b.Fatal(err)
	}
	res, err := analyzer.AnalyzeReader(r, analyzer.Options{})
	if err != nil {
		b.Fatal(err)
	}
	page := Page{Title: "bench", Sections: []Section{{Title: "synthetic", Result: res}}}
	var n countingWriter
	if err := Write(&n, page); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		if err := Write(io.Discard, page); err != nil {
			b.Fatal(err)
		}
	}
}

type countingWriter int

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

// TestCompareGraphs checks that a section with several connections drawn
// in detail overlays their goodput and RTT on one graph each.
func TestCompareGraphs(t *testing.T) {
	a := analyze(t, "loss").Connections[0]
	b := *analyze(t, "rwnd").Connections[0]
	b.Index = 2
	var buf bytes.Buffer
	if err := Write(&buf, Page{Title: "t", Sections: []Section{{Title: "two", Connections: []*analyzer.Connection{a, &b}}}}); err != nil {
		t.Fatal(err)
	}
	parse(t, buf.Bytes())
	s := buf.String()
	for _, want := range []string{`id="s1-compare-throughput"`, `id="s1-compare-rtt"`, "connections compared", "connection 1 (", "connection 2 ("} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	buf.Reset()
	if err := Write(&buf, Page{Title: "t", Sections: []Section{{Title: "one", Connections: []*analyzer.Connection{a}}}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "compare") {
		t.Error("a single connection got a comparison graph")
	}
}
