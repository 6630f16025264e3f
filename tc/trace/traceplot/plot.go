// Package traceplot draws a trace's capacity over time as a PNG with
// gonum/plot (`wanlab trace plot`).
package traceplot

import (
	"fmt"
	"github.com/wanlab/wanlab/units"
	"image/color"
	"io"
	"time"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/wanlab/wanlab/tc/trace"
)

// PNG writes a 1000 x 500 pixel graph of t's capacity in Mbit/s over one
// period, summed over windows of bin (trace.CapacitySteps: points in
// proportion to the opportunities, not to the period), drawn as steps,
// with the mean as a dashed line.
func PNG(w io.Writer, t *trace.Trace, title string, bin time.Duration) error {
	steps := trace.CapacitySteps(t, bin)
	if len(steps) == 0 {
		return fmt.Errorf("traceplot: bin %s: want at least 1ms", bin)
	}
	p := gplot.New()
	p.Title.Text = title
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = fmt.Sprintf("capacity (Mbit/s, per %s)", bin)
	p.BackgroundColor = color.White
	p.Add(plotter.NewGrid())
	pts := make(plotter.XYs, 0, len(steps)+1)
	for _, s := range steps {
		pts = append(pts, plotter.XY{X: s.Start.Seconds(), Y: s.Bps / 1e6})
	}
	pts = append(pts, plotter.XY{X: t.Period().Seconds(), Y: steps[len(steps)-1].Bps / 1e6})
	line, err := plotter.NewLine(pts)
	if err != nil {
		return fmt.Errorf("traceplot: %w", err)
	}
	line.StepStyle = plotter.PostStep
	line.LineStyle = draw.LineStyle{Color: color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, Width: vg.Points(1)}
	mean := float64(t.MeanRate()) / 1e6
	ml, err := plotter.NewLine(plotter.XYs{{X: 0, Y: mean}, {X: t.Period().Seconds(), Y: mean}})
	if err != nil {
		return fmt.Errorf("traceplot: %w", err)
	}
	ml.LineStyle = draw.LineStyle{Color: color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, Width: vg.Points(1),
		Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
	p.Add(line, ml)
	p.Legend.Add("capacity", line)
	p.Legend.Add(units.Sprintf("mean %.3g Mbit/s", mean), ml)
	p.Legend.Top = true
	p.Y.Min = 0
	top := mean
	for _, s := range steps {
		top = max(top, s.Bps/1e6)
	}
	p.Y.Max = top*1.15 + 1e-3 // room for the legend
	c := vgimg.NewWith(vgimg.UseWH(1000*vg.Inch/96, 500*vg.Inch/96), vgimg.UseDPI(96))
	p.Draw(draw.New(c))
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(w); err != nil {
		return fmt.Errorf("traceplot: %w", err)
	}
	return nil
}
