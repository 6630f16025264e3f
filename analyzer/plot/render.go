package plot

import (
	"fmt"
	"github.com/wanlab/wanlab/units"
	"image/color"
	"io"
	"math"
	"strconv"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Size of a rendered graph: 1000 x 560 pixels at 96 dpi for PNG.
const (
	Width  = 1000 * vg.Inch / 96
	Height = 560 * vg.Inch / 96
	dpi    = 96
)

// rateBins is how many bins a Rate layer is summed into across the graph
// in a static rendering: about 4 pixels per bin.
const rateBins = 250

// Format of a rendered file.
type Format string

// Output formats.
const (
	SVG Format = "svg"
	PNG Format = "png"
)

// Render draws g in format f to w.
func Render(w io.Writer, g *Graph, f Format) error {
	p := build(g)
	var wt io.WriterTo
	switch f {
	case SVG:
		c := vgsvg.NewWith(vgsvg.UseWH(Width, Height))
		p.Draw(draw.New(c))
		wt = c
	case PNG:
		c := vgimg.NewWith(vgimg.UseWH(Width, Height), vgimg.UseDPI(dpi))
		p.Draw(draw.New(c))
		wt = vgimg.PngCanvas{Canvas: c}
	default:
		return fmt.Errorf("plot: format %q: want svg or png", f)
	}
	if _, err := wt.WriteTo(w); err != nil {
		return fmt.Errorf("plot: write %s %s: %w", g.Name(), f, err)
	}
	return nil
}

// build makes the gonum plot of g.
func build(g *Graph) *gplot.Plot {
	p := gplot.New()
	p.Title.Text = g.Title
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = g.XLabel
	p.Y.Label.Text = g.YLabel
	p.X.Tick.Marker = unitTicks{unit: "s"}
	p.Y.Tick.Marker = unitTicks{unit: g.YUnit}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Legend.ThumbnailWidth = vg.Points(16)
	p.BackgroundColor = color.White
	p.Add(grid{})
	x0, x1 := g.XMin, g.XMax
	if x1 <= x0 {
		x1 = x0 + 1e-3
	}
	p.X.Min, p.X.Max = x0, x1
	ymin, ymax := math.Inf(1), math.Inf(-1)
	entries := 0
	for i := range g.Layers {
		l := &g.Layers[i]
		lp := &layerPlot{l: l}
		if l.Style == Rate {
			lp.xs, lp.ys = l.Rebin(x0, x1, max((x1-x0)/rateBins, g.RateBin))
		}
		lo, hi := lp.yRange()
		ymin, ymax = math.Min(ymin, lo), math.Max(ymax, hi)
		p.Add(lp)
		if l.Len() > 0 {
			p.Legend.Add(l.Label, lp)
			entries++
		}
	}
	if math.IsInf(ymin, 0) {
		ymin, ymax = 0, 1
	}
	if g.YUnit != Bytes || g.Kind == Window {
		ymin = math.Min(ymin, 0) // rates, RTTs and windows start at zero
	}
	if ymax <= ymin {
		ymax = ymin + 1
	}
	// Room above the data for the legend, one line per entry.
	pad := (ymax - ymin) * (0.03 + 0.045*float64(entries))
	p.Y.Min, p.Y.Max = ymin, ymax+pad
	if g.Empty() {
		p.Title.Text += " (no samples)"
	}
	return p
}

// layerPlot draws one Layer on a gonum plot.
type layerPlot struct {
	l      *Layer
	xs, ys []float64 // Rate layers, rebinned
}

func (lp *layerPlot) yRange() (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	if lp.l.Style == Rate {
		for _, y := range lp.ys {
			lo, hi = math.Min(lo, y), math.Max(hi, y)
		}
		return lo, hi
	}
	for k := range lp.l.X {
		lo, hi = math.Min(lo, lp.l.Lo[k]), math.Max(hi, lp.l.Hi[k])
	}
	return lo, hi
}

func (lp *layerPlot) lineStyle(w float64) draw.LineStyle {
	st := draw.LineStyle{Color: lp.l.Color, Width: vg.Points(w)}
	if lp.l.Dashed {
		st.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	return st
}

// Plot draws the layer; nothing outside the data area is drawn.
func (lp *layerPlot) Plot(c draw.Canvas, p *gplot.Plot) {
	tx, ty := p.Transforms(&c)
	l := lp.l
	in := func(x float64) bool { return x >= p.X.Min && x <= p.X.Max }
	switch l.Style {
	case Bars:
		for k, x := range l.X {
			if !in(x) {
				continue
			}
			y0, y1 := ty(l.Lo[k]), ty(l.Hi[k])
			if y1-y0 < vg.Points(1) {
				y1 = y0 + vg.Points(1) // a bar always shows
			}
			c.StrokeLine2(lp.lineStyle(1.2), tx(x), y0, tx(x), y1)
		}
	case Step, Line:
		var pts []vg.Point
		for k, x := range l.X {
			pt := vg.Point{X: tx(x), Y: ty(l.Hi[k])}
			if l.Style == Step && len(pts) > 0 {
				pts = append(pts, vg.Point{X: pt.X, Y: pts[len(pts)-1].Y})
			}
			pts = append(pts, pt)
		}
		if len(pts) > 1 {
			c.StrokeLines(lp.lineStyle(1), c.ClipLinesXY(pts)...)
		}
	case Rate:
		var pts []vg.Point
		for k, x := range lp.xs {
			pts = append(pts, vg.Point{X: tx(x), Y: ty(lp.ys[k])})
		}
		if len(pts) > 1 {
			c.StrokeLines(lp.lineStyle(1.2), c.ClipLinesXY(pts)...)
		}
	case Dots:
		gs := draw.GlyphStyle{Color: l.Color, Radius: vg.Points(1.3), Shape: draw.CircleGlyph{}}
		for k, x := range l.X {
			if !in(x) {
				continue
			}
			c.DrawGlyph(gs, vg.Point{X: tx(x), Y: ty(l.Hi[k])})
			if l.Lo[k] != l.Hi[k] {
				c.DrawGlyph(gs, vg.Point{X: tx(x), Y: ty(l.Lo[k])})
			}
		}
	case Ticks:
		w := vg.Points(3)
		for k, x := range l.X {
			if !in(x) {
				continue
			}
			y := ty(l.Hi[k])
			c.StrokeLine2(lp.lineStyle(1), tx(x)-w, y, tx(x)+w, y)
		}
	case Marks:
		gs := draw.GlyphStyle{Color: l.Color, Radius: vg.Points(2.5), Shape: draw.CrossGlyph{}}
		for k, x := range l.X {
			if in(x) {
				c.DrawGlyph(gs, vg.Point{X: tx(x), Y: ty(l.Hi[k])})
			}
		}
	}
}

// Thumbnail draws the layer's legend icon.
func (lp *layerPlot) Thumbnail(c *draw.Canvas) {
	l := lp.l
	cx := (c.Min.X + c.Max.X) / 2
	cy := (c.Min.Y + c.Max.Y) / 2
	switch l.Style {
	case Bars:
		c.StrokeLine2(lp.lineStyle(2), cx, c.Min.Y, cx, c.Max.Y)
	case Dots:
		c.DrawGlyph(draw.GlyphStyle{Color: l.Color, Radius: vg.Points(2), Shape: draw.CircleGlyph{}}, vg.Point{X: cx, Y: cy})
	case Marks:
		c.DrawGlyph(draw.GlyphStyle{Color: l.Color, Radius: vg.Points(3), Shape: draw.CrossGlyph{}}, vg.Point{X: cx, Y: cy})
	case Ticks:
		c.StrokeLine2(lp.lineStyle(1.5), cx-vg.Points(4), cy, cx+vg.Points(4), cy)
	default:
		c.StrokeLine2(lp.lineStyle(1.5), c.Min.X, cy, c.Max.X, cy)
	}
}

// grid draws light grid lines at the major ticks.
type grid struct{}

func (grid) Plot(c draw.Canvas, p *gplot.Plot) {
	tx, ty := p.Transforms(&c)
	st := draw.LineStyle{Color: color.Gray{Y: 225}, Width: vg.Points(0.5)}
	for _, t := range p.X.Tick.Marker.Ticks(p.X.Min, p.X.Max) {
		if t.Label != "" {
			c.StrokeLine2(st, tx(t.Value), c.Min.Y, tx(t.Value), c.Max.Y)
		}
	}
	for _, t := range p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max) {
		if t.Label != "" {
			c.StrokeLine2(st, c.Min.X, ty(t.Value), c.Max.X, ty(t.Value))
		}
	}
}

// unitTicks places about six ticks at round values and labels them in a
// unit: bytes and bit/s with SI prefixes (1.5M), milliseconds and seconds
// as plain numbers with the decimals the step needs.
type unitTicks struct{ unit Unit }

func (u unitTicks) Ticks(lo, hi float64) []gplot.Tick {
	step := niceStep((hi - lo) / 6)
	var ts []gplot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		label := strconv.FormatFloat(v, 'f', max(0, -int(math.Floor(math.Log10(step)+1e-9))), 64)
		if u.unit == Bytes || u.unit == BitsPerSec {
			label = SI(v)
		}
		ts = append(ts, gplot.Tick{Value: v, Label: label})
	}
	return ts
}

// niceStep rounds a raw tick step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if !(raw > 0) || math.IsInf(raw, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// SI writes v with an SI prefix (k, M, G) and at most four significant
// digits: 1500000 is "1.5M".
func SI(v float64) string {
	a := math.Abs(v)
	if a == 0 {
		return "0"
	}
	switch {
	case a >= 1e9:
		return units.SigN(v/1e9, 4) + "G"
	case a >= 1e6:
		return units.SigN(v/1e6, 4) + "M"
	case a >= 1e3:
		return units.SigN(v/1e3, 4) + "k"
	}
	return units.SigN(v, 4)
}
