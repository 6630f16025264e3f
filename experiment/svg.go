package experiment

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"

	"github.com/wanlab/wanlab/analyzer"
)

// line is one drawn series of a chart.
type line struct {
	label string
	color string
	dots  bool // dots (segments) instead of a polyline
	xs    []float64
	ys    []float64
}

// chart is a static SVG plot of a few series against time.
type chart struct {
	title  string
	yLabel string
	yScale float64 // values are divided by this before printing ticks
	lines  []line
}

const (
	svgW, svgH               = 560, 300
	padL, padR, padT, padB   = 64, 12, 44, 36
	plotW, plotH             = svgW - padL - padR, svgH - padT - padB
	maxDotsPerLine           = 6000
	tickCount                = 5
	axisColor, gridColor     = "#444", "#ddd"
	colorData, colorAck      = "#1f77b4", "#2ca02c"
	colorWin, colorRetrans   = "#d62728", "#ff7f0e"
	colorFlight, colorAdvWin = "#9467bd", "#d62728"
)

// niceStep rounds a raw tick step to 1, 2 or 5 × 10^k.
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// svg renders the chart; an empty chart renders a placeholder saying so.
func (c chart) svg() template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" font-family="sans-serif" font-size="11">`, svgW, svgH, svgW, svgH)
	fmt.Fprintf(&b, `<text x="%d" y="16" font-size="13" font-weight="bold">%s</text>`, padL, template.HTMLEscapeString(c.title))
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), 0.0, math.Inf(-1)
	for _, l := range c.lines {
		for i := range l.xs {
			xmin, xmax = math.Min(xmin, l.xs[i]), math.Max(xmax, l.xs[i])
			ymin, ymax = math.Min(ymin, l.ys[i]), math.Max(ymax, l.ys[i])
		}
	}
	if math.IsInf(xmin, 0) {
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#888">no data in this capture</text></svg>`, padL, padT+plotH/2)
		return template.HTML(b.String())
	}
	if xmax == xmin {
		xmax = xmin + 1
	}
	if ymax == ymin {
		ymax = ymin + 1
	}
	ymax *= 1.05
	px := func(x float64) float64 { return padL + (x-xmin)/(xmax-xmin)*plotW }
	py := func(y float64) float64 { return padT + plotH - (y-ymin)/(ymax-ymin)*plotH }
	scale := c.yScale
	if scale == 0 {
		scale = 1
	}
	// Grid and ticks.
	xs := niceStep((xmax - xmin) / tickCount)
	for x := math.Ceil(xmin/xs) * xs; x <= xmax; x += xs {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`, px(x), padT, px(x), padT+plotH, gridColor)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%g</text>`, px(x), padT+plotH+14, roundTick(x))
	}
	ys := niceStep((ymax - ymin) / scale / tickCount)
	for y := math.Ceil(ymin/scale/ys) * ys; y*scale <= ymax; y += ys {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`, padL, py(y*scale), padL+plotW, py(y*scale), gridColor)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%g</text>`, padL-4, py(y*scale)+4, roundTick(y))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`, padL, padT, plotW, plotH, axisColor)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">time (s)</text>`, padL+plotW/2, svgH-4)
	fmt.Fprintf(&b, `<text transform="translate(12 %d) rotate(-90)" text-anchor="middle">%s</text>`, padT+plotH/2, template.HTMLEscapeString(c.yLabel))
	// Series, then the legend.
	for _, l := range c.lines {
		if len(l.xs) == 0 {
			continue
		}
		step := max(1, len(l.xs)/maxDotsPerLine)
		if l.dots {
			fmt.Fprintf(&b, `<g fill="%s">`, l.color)
			for i := 0; i < len(l.xs); i += step {
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="1.6" height="1.6"/>`, px(l.xs[i])-0.8, py(l.ys[i])-0.8)
			}
			b.WriteString(`</g>`)
			continue
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.2" points="`, l.color)
		for i := 0; i < len(l.xs); i += step {
			fmt.Fprintf(&b, "%.1f,%.1f ", px(l.xs[i]), py(l.ys[i]))
		}
		b.WriteString(`"/>`)
	}
	lx := padL
	for _, l := range c.lines {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`,
			lx, padT-16, l.color, lx+14, padT-7, template.HTMLEscapeString(l.label))
		lx += 22 + 7*len(l.label)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func roundTick(v float64) float64 { return math.Round(v*1e6) / 1e6 }

// seconds converts a series' bucket times to seconds since the capture's
// first packet.
func seconds(t time.Duration) float64 { return t.Seconds() }

// fromSeries takes one value per bucket: pick chooses it from the point.
func fromSeries(s *analyzer.Series, label, color string, dots bool, pick func(p analyzer.Point) float64) line {
	l := line{label: label, color: color, dots: dots}
	for _, p := range s.Points {
		l.xs = append(l.xs, seconds(p.T))
		l.ys = append(l.ys, pick(p))
	}
	return l
}

// rateLine turns a bytes-per-bucket series into bit/s.
func rateLine(s *analyzer.Series, label, color string) line {
	l := line{label: label, color: color}
	if len(s.Points) == 0 {
		return l
	}
	end := s.Points[len(s.Points)-1].T + s.Bucket
	for i, p := range s.Points {
		l.xs = append(l.xs, seconds(p.T))
		l.ys = append(l.ys, s.Rate(i, end)*8)
	}
	return l
}

func maxOf(p analyzer.Point) float64  { return p.Max }
func lastOf(p analyzer.Point) float64 { return p.Last }
func meanOf(p analyzer.Point) float64 {
	if p.N == 0 {
		return p.Last
	}
	return p.Sum / float64(p.N)
}

// charts draws the seeds' four graphs for the data direction of a
// connection: tcptrace/Stevens time-sequence, RTT, window scaling
// (advertised window and bytes in flight) and throughput.
func charts(d *analyzer.Direction) []chart {
	if d == nil || d.Series == nil {
		return []chart{{title: "time-sequence (tcptrace)"}, {title: "round-trip time"}, {title: "window scaling"}, {title: "throughput"}}
	}
	s := d.Series
	return []chart{
		{title: "time-sequence (tcptrace / Stevens)", yLabel: "relative sequence (MB)", yScale: 1e6, lines: []line{
			fromSeries(&s.Segments, "segments", colorData, true, maxOf),
			fromSeries(&s.Acks, "ACK", colorAck, false, maxOf),
			fromSeries(&s.ReceiveWindow, "receive window", colorWin, false, maxOf),
			fromSeries(&s.Retransmissions, "retransmissions", colorRetrans, true, maxOf),
		}},
		{title: "round-trip time", yLabel: "RTT (ms)", lines: []line{
			fromSeries(&s.RTT, "RTT (Karn)", colorData, true, meanOf),
			fromSeries(&s.TSRTT, "RTT (timestamps)", colorAck, true, meanOf),
		}},
		{title: "window scaling", yLabel: "bytes (KB)", yScale: 1e3, lines: []line{
			fromSeries(&s.AdvWindow, "advertised window", colorAdvWin, false, lastOf),
			fromSeries(&s.InFlight, "bytes in flight", colorFlight, false, maxOf),
		}},
		{title: "throughput", yLabel: "Mbit/s", yScale: 1e6, lines: []line{
			rateLine(&s.Throughput, "throughput", colorData),
			rateLine(&s.Goodput, "goodput", colorAck),
		}},
	}
}
