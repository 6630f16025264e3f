// Package plot turns the analyzer's decimated series into the graphs the
// seeds read in Wireshark (tcptrace time-sequence, Stevens, RTT, window
// scaling, throughput) and renders them to SVG and PNG with gonum/plot.
//
// The graphs are described once, as Graph values made of styled layers, so
// the static renderer here and the interactive report (analyzer/report)
// draw the same data the same way.
package plot

import (
	"fmt"
	"github.com/wanlab/wanlab/units"
	"image/color"
	"time"

	"github.com/wanlab/wanlab/analyzer"
)

// Kind names a graph; it is the last part of the file names --plots writes.
type Kind string

// The graphs of one direction, in the order they are drawn.
const (
	TimeSequence Kind = "tcptrace"   // tcptrace-style time-sequence
	Stevens      Kind = "stevens"    // sequence dots over time
	RTT          Kind = "rtt"        // RTT samples over time
	Window       Kind = "window"     // advertised window and bytes in flight
	Throughput   Kind = "throughput" // throughput and goodput over time
)

// Kinds lists every graph kind in drawing order.
var Kinds = []Kind{TimeSequence, Stevens, RTT, Window, Throughput}

// Style says how a layer's points are drawn.
type Style string

// Layer styles. Each point i has a time X[i] and values Lo[i] <= Hi[i].
const (
	// Bars: a vertical bar from Lo to Hi at X (segments, SACK blocks).
	Bars Style = "bars"
	// Step: a line holding each Hi until the next X (ACK and rwnd lines).
	Step Style = "step"
	// Line: straight segments through (X, Hi).
	Line Style = "line"
	// Dots: a dot at Hi, and at Lo when it differs (Stevens, RTT).
	Dots Style = "dots"
	// Ticks: a short horizontal tick at Hi (duplicate ACKs).
	Ticks Style = "ticks"
	// Marks: a cross marker at Hi (retransmissions, zero windows).
	Marks Style = "marks"
	// Rate: Hi holds bytes counted in a bucket Bucket seconds wide starting
	// at X; drawn as a line of bit/s after summing the buckets into bins
	// wide enough for the drawing's resolution (empty buckets count zero).
	Rate Style = "rate"
)

// Unit of a graph's y values; it selects how ticks are written.
type Unit string

// Units of the y axis.
const (
	Bytes      Unit = "bytes"
	Millis     Unit = "ms"
	BitsPerSec Unit = "bit/s"
)

// Layer is one legend entry of a graph.
type Layer struct {
	Label string
	Style Style
	Color color.RGBA
	// X is seconds since the capture's first packet.
	X      []float64
	Lo, Hi []float64
	// Bucket is the width in seconds of a Rate layer's buckets.
	Bucket float64
	// Dashed lines let a layer that often equals another (goodput and
	// throughput without retransmissions) show through it.
	Dashed bool
}

// Len is the number of points.
func (l *Layer) Len() int { return len(l.X) }

// Graph is one graph of one direction of one connection.
type Graph struct {
	Conn      int    // connection index, as the analyzer numbers them
	Direction string // "c2s" (client to server data) or "s2c"
	Kind      Kind
	Title     string
	XLabel    string
	YLabel    string
	YUnit     Unit
	// XMin and XMax frame the direction's whole life (seconds since the
	// capture's first packet).
	XMin, XMax float64
	// RateBin is the narrowest bin (seconds) Rate layers are summed into
	// while the view spans many of them: the path's RTT, so a rate shows
	// what one window per round trip delivers rather than the bursts
	// inside a round trip (0: no floor).
	RateBin float64
	Layers  []Layer
}

// Name is "<conn>-<dir>-<kind>", the base name of the graph's files.
func (g *Graph) Name() string { return fmt.Sprintf("%d-%s-%s", g.Conn, g.Direction, g.Kind) }

// Empty reports whether no layer has a point.
func (g *Graph) Empty() bool {
	for i := range g.Layers {
		if g.Layers[i].Len() > 0 {
			return false
		}
	}
	return true
}

// Colours, close to the ones tcptrace/xplot and Wireshark use so a reader
// of the seeds recognizes the lines.
var (
	colorSegment = color.RGBA{0x1f, 0x4e, 0xb4, 0xff} // data: blue
	colorRetrans = color.RGBA{0xd6, 0x27, 0x28, 0xff} // retransmissions: red
	colorAck     = color.RGBA{0x2c, 0x9c, 0x2c, 0xff} // ACK line: green
	colorRwnd    = color.RGBA{0xc8, 0x96, 0x00, 0xff} // receive window: yellow-brown
	colorSACK    = color.RGBA{0x9c, 0x4d, 0xcc, 0xff} // SACK blocks: purple
	colorDupAck  = color.RGBA{0x17, 0xa2, 0xb8, 0xff} // duplicate ACK ticks: cyan
	colorZeroWin = color.RGBA{0xff, 0x7f, 0x0e, 0xff} // zero windows: orange
	colorTSRTT   = color.RGBA{0x80, 0x80, 0x80, 0xff} // timestamp RTT: grey
	colorFlight  = color.RGBA{0x1f, 0x4e, 0xb4, 0xff}
	colorGoodput = color.RGBA{0x2c, 0x9c, 0x2c, 0xff}
)

// DirectionName is the short name used in file names: c2s for the data the
// client sent (Directions[0]), s2c for the server's.
func DirectionName(i int) string {
	if i == 0 {
		return "c2s"
	}
	return "s2c"
}

// HasData reports whether direction i of c carried data, the condition for
// drawing its graphs.
func HasData(c *analyzer.Connection, i int) bool {
	d := c.Directions[i]
	return d != nil && d.Series != nil && d.DataPackets > 0
}

// Graphs returns every graph of direction i (0: client to server, 1:
// server to client) of c, in Kinds order. It returns nil when the
// direction has no series (an analysis without graphs).
func Graphs(c *analyzer.Connection, i int) []*Graph {
	d := c.Directions[i]
	if d == nil || d.Series == nil {
		return nil
	}
	s := d.Series
	who := fmt.Sprintf("connection %d, %s → %s", c.Index, d.From, d.To)
	x0 := c.Start.Seconds()
	x1 := (c.Start + c.Duration).Seconds()
	mk := func(k Kind, what, ylabel string, unit Unit, layers ...Layer) *Graph {
		return &Graph{Conn: c.Index, Direction: DirectionName(i), Kind: k,
			Title: what + ": " + who, XLabel: "time since capture start (s)", YLabel: ylabel, YUnit: unit,
			XMin: x0, XMax: x1, Layers: layers}
	}
	seqLabel := "relative sequence number (bytes)"
	tput := mk(Throughput, "Throughput", "bit/s", BitsPerSec,
		rate("throughput (all data sent)", colorSegment, &s.Throughput),
		dashed(rate("goodput (new data)", colorGoodput, &s.Goodput)))
	tput.RateBin = d.PathRTTMs / 1e3
	return []*Graph{
		mk(TimeSequence, "Time-sequence (tcptrace)", seqLabel, Bytes,
			step("receive window (ACK + rwnd)", colorRwnd, &s.ReceiveWindow),
			step("ACK", colorAck, &s.Acks),
			spread("SACK blocks", Bars, colorSACK, &s.SACK),
			spread("data segments", Bars, colorSegment, &s.Segments),
			spread("retransmissions", Bars, colorRetrans, &s.Retransmissions),
			spread("retransmission marks", Marks, colorRetrans, &s.Retransmissions),
			spread("duplicate ACKs", Ticks, colorDupAck, &s.DupAcks),
			spread("zero window", Marks, colorZeroWin, &s.ZeroWindows)),
		mk(Stevens, "Stevens sequence", seqLabel, Bytes,
			spread("data segments", Dots, colorSegment, &s.Segments),
			spread("retransmissions", Dots, colorRetrans, &s.Retransmissions)),
		rttGraph(mk, d, s),
		mk(Window, "Window scaling", "bytes", Bytes,
			step("advertised window (peer's rwnd)", colorRwnd, &s.AdvWindow),
			line("bytes in flight (max per bucket)", colorFlight, &s.InFlight)),
		tput,
	}
}

// rttGraph draws the round trips the capture point can time. Near the
// sender data to its ACK is the round trip; near the receiver it is only
// the receiver's ACK delay, and the round trip is the receiver's TSval to
// the new data echoing it: drawn as the RTT, the ACK delays beside it
// under their own name.
func rttGraph(mk func(Kind, string, string, Unit, ...Layer) *Graph, d *analyzer.Direction, s *analyzer.DirectionSeries) *Graph {
	if d.CapturedNear == "receiver" {
		return mk(RTT, "Round-trip time, seen near the receiver", "RTT (ms)", Millis,
			spread("RTT (the receiver's TSval to the data echoing it)", Dots, colorSegment, &s.EchoRTT),
			spread("ACK delay at the receiver (data to its ACK)", Dots, colorTSRTT, &s.RTT))
	}
	return mk(RTT, "Round-trip time", "RTT (ms)", Millis,
		spread("RTT (Karn, ACK of a segment)", Dots, colorSegment, &s.RTT),
		spread("RTT (TCP timestamps)", Dots, colorTSRTT, &s.TSRTT))
}

// Verdict is the throughput of direction i of c over time with the rate
// each limit the diagnosis found allows drawn across it (Diagnosis
// .Ceilings): the report's first graph. Nil without series or diagnosis.
func Verdict(c *analyzer.Connection, i int) *Graph {
	d := c.Directions[i]
	if d == nil || d.Series == nil || d.Diagnosis == nil {
		return nil
	}
	g := Graphs(c, i)[len(Kinds)-1]
	g.Title = fmt.Sprintf("Throughput and what each limit allows: connection %d, %s → %s", c.Index, d.From, d.To)
	// A ceiling far above the rate would flatten the rate to the floor:
	// those over ceilingScale times the rate are named in the verdict,
	// not drawn.
	for k, cl := range d.Diagnosis.Ceilings {
		if cl.Bps > ceilingScale*max(d.Diagnosis.RateBps, 1) {
			continue
		}
		g.Layers = append(g.Layers, Layer{Label: cl.Limit + " allows " + units.Rate(cl.Bps).Human(), Style: Line,
			Color: ceilingColors[k%len(ceilingColors)], Dashed: true,
			X: []float64{g.XMin, g.XMax}, Lo: []float64{cl.Bps, cl.Bps}, Hi: []float64{cl.Bps, cl.Bps}})
	}
	return g
}

// ceilingScale bounds the ceilings drawn (see Verdict).
const ceilingScale = 4.0

// ceilingColors tell the ceilings apart from the rate lines.
var ceilingColors = []color.RGBA{colorRwnd, colorRetrans, colorSACK, colorZeroWin}

func secs(d time.Duration) float64 { return d.Seconds() }

// mid is the middle of point k's bucket: where a bar or dot standing for
// the bucket's samples is drawn.
func mid(s *analyzer.Series, k int) float64 { return secs(s.Points[k].T + s.Bucket/2) }

// step draws a value that holds between samples: each bucket contributes
// its first value at its start and its last value at its end.
func step(label string, c color.RGBA, s *analyzer.Series) Layer {
	l := Layer{Label: label, Style: Step, Color: c}
	for _, p := range s.Points {
		t0 := secs(p.T)
		l.X = append(l.X, t0)
		l.Lo = append(l.Lo, p.First)
		l.Hi = append(l.Hi, p.First)
		if p.N > 1 {
			// Within a bucket the line may have dipped to Min or peaked
			// at Max; a step through First and Last keeps the ends, which
			// is what a cumulative ACK or a window line shows.
			l.X = append(l.X, secs(p.T+s.Bucket))
			l.Lo = append(l.Lo, p.Last)
			l.Hi = append(l.Hi, p.Last)
		}
	}
	return l
}

// line draws each bucket's highest value (the peak bytes in flight): the
// spread with its low ends raised to the high ones.
func line(label string, c color.RGBA, s *analyzer.Series) Layer {
	l := spread(label, Line, c, s)
	copy(l.Lo, l.Hi)
	return l
}

// spread draws each bucket as its range, lowest to highest value, at the
// bucket's middle: segments and SACK blocks as bars (seq to seq+len),
// Stevens and RTT as dots, retransmissions and dup ACKs as marks.
func spread(label string, st Style, c color.RGBA, s *analyzer.Series) Layer {
	l := Layer{Label: label, Style: st, Color: c}
	for k, p := range s.Points {
		l.X = append(l.X, mid(s, k))
		l.Lo = append(l.Lo, p.Min)
		l.Hi = append(l.Hi, p.Max)
	}
	return l
}

func dashed(l Layer) Layer {
	l.Dashed = true
	return l
}

func rate(label string, c color.RGBA, s *analyzer.Series) Layer {
	l := Layer{Label: label, Style: Rate, Color: c, Bucket: secs(s.Bucket)}
	for _, p := range s.Points {
		l.X = append(l.X, secs(p.T))
		l.Lo = append(l.Lo, p.Sum)
		l.Hi = append(l.Hi, p.Sum)
	}
	return l
}

// Rebin sums a Rate layer into bins of width w seconds (at least the
// layer's bucket) between x0 and x1, and returns the bin starts and the
// rate of each bin in bit/s. Empty buckets count as zero, so idle time
// shows as a drop to zero rather than a line bridging it.
func (l *Layer) Rebin(x0, x1, w float64) (xs, bps []float64) {
	if w < l.Bucket {
		w = l.Bucket
	}
	if w <= 0 || x1 <= x0 {
		return nil, nil
	}
	first := int64(x0 / w)
	n := int(int64(x1/w)-first) + 1
	if n > 1<<20 {
		return nil, nil
	}
	sums := make([]float64, n)
	for k, x := range l.X {
		b := int64((x+l.Bucket/2)/w) - first
		if b < 0 || b >= int64(n) {
			continue
		}
		sums[b] += l.Hi[k]
	}
	xs = make([]float64, n)
	bps = make([]float64, n)
	for b := range sums {
		xs[b] = float64(first+int64(b)) * w
		bps[b] = sums[b] * 8 / w
	}
	return xs, bps
}

// comparePalette colours the connections of a comparison graph.
var comparePalette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xd6, 0x27, 0x28, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xff, 0x7f, 0x0e, 0xff},
	{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x17, 0xbe, 0xcf, 0xff},
}

// Compare overlays several connections on one graph per kind: the
// goodput and the RTT samples of each connection's main direction (the
// one that carried the most data), one layer per connection. It returns
// nil for fewer than two connections with series and data.
func Compare(conns []*analyzer.Connection) []*Graph {
	type pick struct {
		c *analyzer.Connection
		i int
	}
	var picks []pick
	for _, c := range conns {
		i := 0
		if c.Directions[1] != nil && (c.Directions[0] == nil || c.Directions[1].UniqueBytes > c.Directions[0].UniqueBytes) {
			i = 1
		}
		if HasData(c, i) {
			picks = append(picks, pick{c, i})
		}
	}
	if len(picks) < 2 {
		return nil
	}
	tput := &Graph{Direction: "all", Kind: Throughput, Title: "Goodput, connections compared",
		XLabel: "time since capture start (s)", YLabel: "bit/s", YUnit: BitsPerSec, XMin: -1}
	rtt := &Graph{Direction: "all", Kind: RTT, Title: "Round-trip time, connections compared",
		XLabel: "time since capture start (s)", YLabel: "RTT (ms)", YUnit: Millis, XMin: -1}
	for k, p := range picks {
		d := p.c.Directions[p.i]
		col := comparePalette[k%len(comparePalette)]
		label := fmt.Sprintf("connection %d (%s → %s)", p.c.Index, d.From, d.To)
		tput.Layers = append(tput.Layers, rate(label, col, &d.Series.Goodput))
		rtt.Layers = append(rtt.Layers, spread(label, Dots, col, &d.Series.RTT))
		for _, g := range []*Graph{tput, rtt} {
			x0, x1 := p.c.Start.Seconds(), (p.c.Start + p.c.Duration).Seconds()
			if g.XMin < 0 || x0 < g.XMin {
				g.XMin = x0
			}
			g.XMax = max(g.XMax, x1)
		}
		if r := d.PathRTTMs / 1e3; r > 0 && (tput.RateBin == 0 || r < tput.RateBin) {
			tput.RateBin = r
		}
	}
	return []*Graph{tput, rtt}
}
