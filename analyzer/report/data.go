package report

import (
	"fmt"
	"math"
	"strconv"

	"github.com/wanlab/wanlab/analyzer/plot"
)

// graphJSON is a graph as the inline plotter reads it.
type graphJSON struct {
	ID    string `json:"id"`
	Group string `json:"group"` // graphs of one group zoom and pan together
	// Section is the capture's index on the page; Offset is its start in
	// seconds after the page's earliest capture start, and Link names the
	// flow (from → to) so the same flow in two captures can zoom together.
	Section int     `json:"section"`
	Offset  float64 `json:"offset"`
	Link    string  `json:"link,omitempty"`
	Kind    string  `json:"kind"`
	Title   string  `json:"title"`
	XLabel  string  `json:"xlabel"`
	YLabel  string  `json:"ylabel"`
	Unit    string  `json:"unit"`
	X0      float64 `json:"x0"`
	X1      float64 `json:"x1"`
	// RateBin: Rate layers are binned no finer than this while the view
	// spans more than 20 of it.
	RateBin float64     `json:"ratebin,omitempty"`
	Layers  []layerJSON `json:"layers"`
}

type layerJSON struct {
	Label  string  `json:"label"`
	Style  string  `json:"style"`
	Color  string  `json:"color"`
	Bucket float64 `json:"bucket,omitempty"`
	Dashed bool    `json:"dashed,omitempty"`
	X      numbers `json:"x"`
	Hi     numbers `json:"hi"`
	// Lo is omitted when it equals Hi everywhere (single-valued buckets).
	Lo numbers `json:"lo,omitempty"`
}

// numbers marshals compactly: times to the microsecond and values to three
// decimals are all a plot can show.
type numbers []float64

func (ns numbers) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 8*len(ns)+2)
	b = append(b, '[')
	for i, v := range ns {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			b = append(b, "null"...)
			continue
		}
		b = strconv.AppendFloat(b, math.Round(v*1e6)/1e6, 'f', -1, 64)
	}
	return append(b, ']'), nil
}

func toJSON(g *plot.Graph, id, group string) graphJSON {
	out := graphJSON{ID: id, Group: group, Kind: string(g.Kind), Title: g.Title, XLabel: g.XLabel,
		YLabel: g.YLabel, Unit: string(g.YUnit), X0: g.XMin, X1: g.XMax, RateBin: g.RateBin}
	for i := range g.Layers {
		l := &g.Layers[i]
		lj := layerJSON{Label: l.Label, Style: string(l.Style),
			Color:  fmt.Sprintf("#%02x%02x%02x", l.Color.R, l.Color.G, l.Color.B),
			Bucket: l.Bucket, Dashed: l.Dashed, X: l.X, Hi: l.Hi}
		for k := range l.Lo {
			if l.Lo[k] != l.Hi[k] {
				lj.Lo = l.Lo
				break
			}
		}
		if lj.X == nil {
			lj.X, lj.Hi = numbers{}, numbers{}
		}
		out.Layers = append(out.Layers, lj)
	}
	return out
}
