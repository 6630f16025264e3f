package bench

import (
	"bytes"
	"cmp"
	"fmt"
	"html"
	"image/color"
	"io"
	"math"
	"slices"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

var pathColors = map[string]color.RGBA{
	PathRouting:           {0x44, 0x44, 0x44, 0xff},
	PathProxyOffload:      {0x1f, 0x77, 0xb4, 0xff},
	PathProxyOffload1:     {0x6b, 0xae, 0xd6, 0xff},
	PathProxyOffloadCPU:   {0x17, 0xbe, 0xcf, 0xff},
	PathProxyWater:        {0xff, 0x7f, 0x0e, 0xff},
	PathKernel:            {0x2c, 0xa0, 0x2c, 0xff},
	PathKernelVM + "/tcg": {0x94, 0x67, 0xbd, 0xff},
	PathKernelVM + "/kvm": {0x94, 0x67, 0xbd, 0xff},
}

// WriteHTML writes a self-contained page: per table, one plot per metric
// (configured against realized, or both against the sweep variable, with
// error bars where a measurement has an interval) as inline SVG, then the
// table itself.
func (r *Report) WriteHTML(w io.Writer) error {
	var b strings.Builder
	title := "wanlab bench " + r.Bench
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title>\n", html.EscapeString(title))
	b.WriteString(`<style>body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;font-size:13px;margin:1em 0}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td:first-child,td:nth-child(2),td:nth-child(3){text-align:left}
.miss{background:#fdd}.ok{background:#dfd}.na{color:#888}.plots{display:flex;flex-wrap:wrap;gap:1em}</style></head><body>`)
	fmt.Fprintf(&b, "<h1>%s</h1>\n<p>%s, kernel %s, %s", html.EscapeString(title), r.Date.UTC().Format("2006-01-02 15:04 MST"),
		html.EscapeString(r.Kernel), r.Duration.Round(1e9))
	if r.Quick {
		b.WriteString(" (quick)")
	}
	if r.Command != "" {
		fmt.Fprintf(&b, "<br><code>%s</code>", html.EscapeString(r.Command))
	}
	b.WriteString("</p>\n")
	for _, t := range r.Tables {
		fmt.Fprintf(&b, "<h2>%s</h2>\n<p>configured = %s</p>\n<div class=\"plots\">\n", html.EscapeString(t.Title), html.EscapeString(t.Model))
		for _, metric := range metricsOf(t) {
			svg, err := plotMetric(t, metric)
			if err != nil {
				return err
			}
			if svg != "" {
				b.WriteString("<div>" + svg + "</div>\n")
			}
		}
		b.WriteString("</div>\n<table><tr><th>case</th><th>path</th><th>metric</th><th>configured</th><th>realized</th><th>error</th><th>target</th></tr>\n")
		for _, m := range t.Rows {
			cls := ""
			switch {
			case m.NA != "":
				cls = "na"
			case m.Pass != nil && *m.Pass:
				cls = "ok"
			case m.Pass != nil:
				cls = "miss"
			}
			fmt.Fprintf(&b, "<tr class=\"%s\">", cls)
			for _, c := range textCells(m) {
				fmt.Fprintf(&b, "<td>%s</td>", html.EscapeString(c))
			}
			b.WriteString("</tr>\n")
		}
		b.WriteString("</table>\n")
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "<p>note: %s</p>\n", html.EscapeString(n))
	}
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func metricsOf(t Table) []string {
	var out []string
	for _, m := range t.Rows {
		if m.NA == "" && !slices.Contains(out, m.Metric) {
			out = append(out, m.Metric)
		}
	}
	return out
}

// errPoints are points with asymmetric vertical error bars.
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

// plotMetric draws one metric of a table as an SVG element ("" when
// nothing can be drawn).
func plotMetric(t Table, metric string) (string, error) {
	p := gplot.New()
	p.Title.Text = metric
	p.BackgroundColor = color.White
	unit := ""
	sweep := t.XLabel != ""
	// Configured against realized runs along y = x, leaving the lower
	// right free; sweeps mostly fall from the upper left.
	p.Legend.Top, p.Legend.Left = sweep, false
	var rows []Measurement
	for _, m := range t.Rows {
		if m.Metric == metric && m.NA == "" {
			rows = append(rows, m)
			unit = m.Unit
		}
	}
	if sweep {
		p.X.Label.Text = t.XLabel
	} else {
		p.X.Label.Text = "configured (" + unit + ")"
	}
	p.Y.Label.Text = "realized (" + unit + ")"
	// Log axes when the values span more than two decades.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, m := range rows {
		for _, v := range []float64{m.Realized, m.Configured} {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	logY := hi/lo > 100
	x := func(m Measurement) float64 {
		if sweep {
			return m.X
		}
		return m.Configured
	}
	usable := func(m Measurement) bool {
		if !sweep && !m.HasConfigured {
			return false
		}
		if logY && (m.Realized <= 0 || (!sweep && m.Configured <= 0)) {
			return false
		}
		return true
	}
	var paths []string
	for _, m := range rows {
		if usable(m) && !slices.Contains(paths, m.Path) {
			paths = append(paths, m.Path)
		}
	}
	if len(paths) == 0 {
		return "", nil
	}
	if logY {
		p.Y.Scale, p.Y.Tick.Marker = gplot.LogScale{}, gplot.LogTicks{}
		if !sweep {
			p.X.Scale, p.X.Tick.Marker = gplot.LogScale{}, gplot.LogTicks{}
		}
	}
	// The model: y = x for configured-against-realized, the configured
	// values along X for a sweep.
	var model plotter.XYs
	for _, m := range rows {
		if !usable(m) || !m.HasConfigured || (logY && m.Configured <= 0) {
			continue
		}
		pt := plotter.XY{X: x(m), Y: m.Configured}
		if !slices.Contains(model, pt) {
			model = append(model, pt)
		}
	}
	slices.SortFunc(model, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
	if len(model) > 0 {
		l, err := plotter.NewLine(model)
		if err != nil {
			return "", err
		}
		l.Color = color.Gray{0x99}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		p.Legend.Add("configured", l)
	}
	for _, path := range paths {
		var pts errPoints
		for _, m := range rows {
			if m.Path != path || !usable(m) {
				continue
			}
			pts.XYs = append(pts.XYs, plotter.XY{X: x(m), Y: m.Realized})
			var e struct{ Low, High float64 }
			if m.HasInterval {
				e.Low, e.High = math.Max(0, m.Realized-m.Low), math.Max(0, m.High-m.Realized)
				if logY {
					e.Low = math.Min(e.Low, m.Realized*0.99)
				}
			}
			pts.YErrors = append(pts.YErrors, e)
		}
		s, err := plotter.NewScatter(pts.XYs)
		if err != nil {
			return "", err
		}
		c := pathColors[path]
		s.GlyphStyle.Color = c
		s.GlyphStyle.Radius = vg.Points(3)
		s.GlyphStyle.Shape = draw.CircleGlyph{}
		p.Add(s)
		p.Legend.Add(path, s)
		eb, err := plotter.NewYErrorBars(pts)
		if err != nil {
			return "", err
		}
		eb.Color = c
		p.Add(eb)
	}
	c := vgsvg.NewWith(vgsvg.UseWH(5*vg.Inch, 3.6*vg.Inch))
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return "", err
	}
	svg := buf.String()
	// Drop the XML prolog so the SVG can sit inside the page.
	if i := strings.Index(svg, "<svg"); i > 0 {
		svg = svg[i:]
	}
	return svg, nil
}
