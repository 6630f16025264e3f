package plot

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer"
)

func analyze(t testing.TB, name string) *analyzer.Result {
	t.Helper()
	res, err := analyzer.AnalyzeFile(filepath.Join("..", "testdata", name+".pcap"), analyzer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func layer(t *testing.T, g *Graph, label string) *Layer {
	t.Helper()
	for i := range g.Layers {
		if g.Layers[i].Label == label {
			return &g.Layers[i]
		}
	}
	t.Fatalf("%s has no layer %q", g.Name(), label)
	return nil
}

func TestGraphsOfALossyTransfer(t *testing.T) {
	c := analyze(t, "loss").Connections[0]
	d := c.Directions[1]
	// Duplicate ACKs count in the direction that sent them (the client's).
	if !HasData(c, 1) || d.RetransmittedPackets == 0 || c.Directions[0].DupAcks == 0 {
		t.Fatalf("loss.pcap server->client: data %v, %d retransmissions, %d dup ACKs: not the capture this test needs",
			HasData(c, 1), d.RetransmittedPackets, c.Directions[0].DupAcks)
	}
	gs := Graphs(c, 1)
	var kinds []Kind
	for _, g := range gs {
		kinds = append(kinds, g.Kind)
		if g.Name() != "1-s2c-"+string(g.Kind) {
			t.Errorf("name %q", g.Name())
		}
		if !strings.Contains(g.Title, d.From.String()+" → "+d.To.String()) {
			t.Errorf("%s: title %q does not name the direction", g.Name(), g.Title)
		}
		if g.XLabel == "" || g.YLabel == "" {
			t.Errorf("%s: axis without a label", g.Name())
		}
		for _, l := range g.Layers {
			if len(l.Lo) != len(l.X) || len(l.Hi) != len(l.X) {
				t.Fatalf("%s %s: %d x, %d lo, %d hi", g.Name(), l.Label, len(l.X), len(l.Lo), len(l.Hi))
			}
			for k, x := range l.X {
				if x < g.XMin-0.01 || x > g.XMax+0.01 {
					t.Errorf("%s %s: point at %v s outside the connection's %v..%v s", g.Name(), l.Label, x, g.XMin, g.XMax)
					break
				}
				if l.Lo[k] > l.Hi[k] {
					t.Errorf("%s %s: lo %v > hi %v", g.Name(), l.Label, l.Lo[k], l.Hi[k])
					break
				}
				if k > 0 && x < l.X[k-1] {
					t.Errorf("%s %s: time goes back at %d", g.Name(), l.Label, k)
					break
				}
			}
		}
	}
	if !slices.Equal(kinds, Kinds) {
		t.Fatalf("kinds %v, want %v", kinds, Kinds)
	}
	ts := gs[0]
	for _, label := range []string{"retransmissions", "retransmission marks", "duplicate ACKs", "data segments", "ACK", "receive window (ACK + rwnd)"} {
		if layer(t, ts, label).Len() == 0 {
			t.Errorf("time-sequence layer %q is empty", label)
		}
	}
	// The data segments reach the last byte sent; the ACK line ends there.
	seg, ack, rwnd := layer(t, ts, "data segments"), layer(t, ts, "ACK"), layer(t, ts, "receive window (ACK + rwnd)")
	top := slices.Max(seg.Hi)
	if top < float64(d.UniqueBytes) {
		t.Errorf("segments reach %v, want the %d bytes sent", top, d.UniqueBytes)
	}
	if last := ack.Hi[len(ack.Hi)-1]; last < float64(d.UniqueBytes) {
		t.Errorf("ACK line ends at %v, want >= %d", last, d.UniqueBytes)
	}
	for k := range rwnd.X {
		if rwnd.Hi[k] < ack.Hi[min(k, len(ack.Hi)-1)]-1 && k < len(ack.Hi) && rwnd.X[k] == ack.X[k] {
			t.Fatalf("rwnd line %v below the ACK line %v at %v s", rwnd.Hi[k], ack.Hi[k], rwnd.X[k])
		}
	}
	// RTT in milliseconds, within the analyzer's min..max: data to ACK
	// (near the receiver named the ACK delay it is there), and near the
	// receiver the round trip from its echoed timestamps.
	karn := "RTT (Karn, ACK of a segment)"
	if d.CapturedNear == "receiver" {
		karn = "ACK delay at the receiver (data to its ACK)"
		echo := layer(t, gs[2], "RTT (the receiver's TSval to the data echoing it)")
		if echo.Len() == 0 {
			t.Error("no echo RTT drawn near the receiver")
		} else if m := slices.Min(echo.Lo); m < d.EchoRTTMinMs-1e-9 {
			t.Errorf("echo RTT layer down to %v ms, the analyzer's minimum is %v", m, d.EchoRTTMinMs)
		}
	}
	rtt := layer(t, gs[2], karn)
	if rtt.Len() == 0 {
		t.Fatal("no RTT samples drawn")
	}
	if lo, hi := slices.Min(rtt.Lo), slices.Max(rtt.Hi); lo < d.RTTMinMs-1e-9 || hi > d.RTTMaxMs+1e-9 {
		t.Errorf("RTT layer spans %v..%v ms, analyzer says %v..%v", lo, hi, d.RTTMinMs, d.RTTMaxMs)
	}
	// The throughput layer holds every byte sent: rebinned at any width,
	// rate x width sums back to the data bytes.
	thr := layer(t, gs[4], "throughput (all data sent)")
	for _, w := range []float64{0.001, 0.01, 0.05, 1} {
		xs, bps := thr.Rebin(ts.XMin, ts.XMax, w)
		bw := max(w, thr.Bucket)
		total := 0.0
		for _, v := range bps {
			total += v * bw / 8
		}
		if len(xs) != len(bps) || total < float64(d.DataBytes)-0.5 || total > float64(d.DataBytes)+0.5 {
			t.Errorf("rebinned at %v s: %v bytes, want %d", w, total, d.DataBytes)
		}
	}
}

func TestEmptyDirectionHasNoData(t *testing.T) {
	c := analyze(t, "rwnd").Connections[0]
	if HasData(c, 0) {
		t.Fatal("rwnd.pcap: the client sent data; the test needs an ACK-only direction")
	}
	for _, g := range Graphs(c, 0) {
		if g.Kind == TimeSequence || g.Kind == Stevens {
			if l := layer(t, g, "data segments"); l.Len() != 0 {
				t.Errorf("%s: %d data points in an ACK-only direction", g.Name(), l.Len())
			}
		}
	}
}

func TestRenderSVGAndPNG(t *testing.T) {
	c := analyze(t, "loss").Connections[0]
	for _, g := range Graphs(c, 1) {
		var svg bytes.Buffer
		if err := Render(&svg, g, SVG); err != nil {
			t.Fatal(err)
		}
		// Well-formed XML with an <svg> root, the title and the legend.
		dec := xml.NewDecoder(bytes.NewReader(svg.Bytes()))
		var root string
		var text strings.Builder
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s.svg is not XML: %v", g.Name(), err)
			}
			switch tk := tok.(type) {
			case xml.StartElement:
				if root == "" {
					root = tk.Name.Local
				}
			case xml.CharData:
				text.Write(tk)
			}
		}
		if root != "svg" {
			t.Errorf("%s.svg root <%s>", g.Name(), root)
		}
		for _, want := range []string{g.Title, g.XLabel, g.YLabel, g.Layers[0].Label} {
			if !strings.Contains(text.String(), want) {
				t.Errorf("%s.svg lacks the text %q", g.Name(), want)
			}
		}
		var pngBuf bytes.Buffer
		if err := Render(&pngBuf, g, PNG); err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(&pngBuf)
		if err != nil {
			t.Fatalf("%s.png: %v", g.Name(), err)
		}
		if b := img.Bounds(); b.Dx() != 1000 || b.Dy() != 560 {
			t.Errorf("%s.png is %v, want 1000x560", g.Name(), b)
		}
		// Something was drawn in each layer's colour.
		b := img.Bounds()
		for _, l := range g.Layers {
			if l.Len() == 0 {
				continue
			}
			found := false
			for y := b.Min.Y; y < b.Max.Y && !found; y++ {
				for x := b.Min.X; x < b.Max.X; x++ {
					r, gg, bb, _ := img.At(x, y).RGBA()
					if near(r, l.Color.R) && near(gg, l.Color.G) && near(bb, l.Color.B) {
						found = true
						break
					}
				}
			}
			if !found {
				t.Errorf("%s.png: no pixel in the colour of %q", g.Name(), l.Label)
			}
		}
	}
	if err := Render(io.Discard, Graphs(c, 1)[0], "gif"); err == nil || !strings.Contains(err.Error(), `"gif"`) {
		t.Errorf("unknown format: %v", err)
	}
}

func near(v uint32, c uint8) bool {
	d := int(v>>8) - int(c)
	return d > -24 && d < 24
}

func TestWriteDir(t *testing.T) {
	res := analyze(t, "delack")
	dir := filepath.Join(t.TempDir(), "plots")
	paths, err := WriteDir(dir, res.Connections)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, c := range res.Connections {
		for i := range c.Directions {
			if !HasData(c, i) {
				continue
			}
			for _, k := range Kinds {
				for _, ext := range []string{"svg", "png"} {
					want = append(want, filepath.Join(dir, (&Graph{Conn: c.Index, Direction: DirectionName(i), Kind: k}).Name()+"."+ext))
				}
			}
		}
	}
	if len(want) == 0 {
		t.Fatal("delack.pcap: no data direction")
	}
	slices.Sort(want)
	slices.Sort(paths)
	if !slices.Equal(paths, want) {
		t.Fatalf("wrote %v\nwant %v", paths, want)
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil || fi.Size() < 1000 {
			t.Errorf("%s: %v, %d bytes", p, err, fi.Size())
		}
	}
	// A directory that cannot be made is an error naming it.
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, err := WriteDir(filepath.Join(file, "sub"), res.Connections); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("WriteDir under a file: %v", err)
	}
}

func TestSI(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 512: "512", 1500: "1.5k", 1_500_000: "1.5M", 43e6: "43M", 2.5e9: "2.5G", -2000: "-2k"} {
		if got := SI(v); got != want {
			t.Errorf("SI(%v) = %q, want %q", v, got, want)
		}
	}
}

func BenchmarkRender(b *testing.B) {
	c := analyze(b, "loss").Connections[0]
	g := Graphs(c, 1)[0]
	for _, f := range []Format{SVG, PNG} {
		b.Run(string(f), func(b *testing.B) {
			b.ReportAllocs()
			points := 0
			for _, l := range g.Layers {
				points += l.Len()
			}
			b.SetBytes(int64(points))
			for b.Loop() {
				if err := Render(io.Discard, g, f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestTicks(t *testing.T) {
	label := func(u Unit, lo, hi float64) string {
		var ls []string
		for _, tk := range (unitTicks{unit: u}).Ticks(lo, hi) {
			ls = append(ls, tk.Label)
		}
		return strings.Join(ls, " ")
	}
	for _, c := range []struct {
		unit   Unit
		lo, hi float64
		want   string
	}{
		{"s", 0, 2.83, "0.0 0.5 1.0 1.5 2.0 2.5"},
		{"s", 1.3871, 1.4371, "1.39 1.40 1.41 1.42 1.43"},
		{Bytes, 0, 2.3e6, "0 500k 1M 1.5M 2M"},
		{Millis, -0.5, 41, "0 10 20 30 40"},
	} {
		if got := label(c.unit, c.lo, c.hi); got != c.want {
			t.Errorf("ticks %s %v..%v: %q, want %q", c.unit, c.lo, c.hi, got, c.want)
		}
	}
}

// TestCompare checks the overlay of several connections: one layer per
// connection with data, framed by all of them.
func TestCompare(t *testing.T) {
	a := analyze(t, "loss").Connections[0]
	b := *analyze(t, "rwnd").Connections[0]
	b.Index = 2
	b.Start += time.Second
	gs := Compare([]*analyzer.Connection{a, &b})
	if len(gs) != 2 || gs[0].Kind != Throughput || gs[1].Kind != RTT {
		t.Fatalf("graphs %v", gs)
	}
	for _, g := range gs {
		if len(g.Layers) != 2 || g.Layers[0].Len() == 0 || g.Layers[1].Len() == 0 {
			t.Errorf("%s: %d layers", g.Kind, len(g.Layers))
		}
		if g.XMin != a.Start.Seconds() || g.XMax != (b.Start+b.Duration).Seconds() {
			t.Errorf("%s: x range %v..%v", g.Kind, g.XMin, g.XMax)
		}
	}
	if Compare([]*analyzer.Connection{a}) != nil {
		t.Error("one connection compared")
	}
}
