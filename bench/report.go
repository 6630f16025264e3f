// Package bench measures wanlab against its own promises: how exactly the
// userspace proxy (each TUN backend) and the kernel's qdiscs realize a
// configured impairment, how fast the proxy forwards next to kernel
// routing, and the seeds' throughput tables set beside their models. Every
// run builds its own lab (lab package), drives traffic in-process and
// returns a Report that prints as a table, as JSON and as an HTML page.
package bench

import (
	"encoding/json"
	"fmt"
	"github.com/wanlab/wanlab/units"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// Paths a measurement went through.
const (
	PathRouting      = "routing"       // kernel routing, no impairment
	PathProxyOffload = "proxy-offload" // userspace proxy, offload backend
	// PathProxyOffload1 is the offload backend with one queue per TUN
	// (one reader per direction) and PathProxyOffloadCPU with a queue
	// per CPU, to compare with PathProxyOffload's default
	// (proxy.DefaultQueues) in one run.
	PathProxyOffload1   = "proxy-offload-1q"
	PathProxyOffloadCPU = "proxy-offload-cpuq"
	PathProxyWater      = "proxy-water" // userspace proxy, water backend
	PathKernel          = "kernel"      // the same spec as qdiscs on the router's veths
	// PathKernelVM is the same spec as qdiscs of the reference VM's kernel
	// (lab/vm), for what the host's kernel lacks; the report names it with
	// the accelerator: "kernel-vm/tcg" or "kernel-vm/kvm".
	PathKernelVM = "kernel-vm"
)

// Report is the result of one bench run. The JSON field names are a
// contract with regression tracking: keep them.
type Report struct {
	Bench   string    `json:"bench"` // "accuracy", "forward" or "sweep"
	Date    time.Time `json:"date"`
	Command string    `json:"command,omitempty"`
	Quick   bool      `json:"quick"`
	Kernel  string    `json:"kernel"` // uname release of the machine
	// Duration is the wall time of the whole run.
	Duration time.Duration `json:"duration_ns"`
	Tables   []Table       `json:"tables"`
	Notes    []string      `json:"notes,omitempty"`
}

// Table is one group of measurements, printed and plotted together.
type Table struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	// Model says what the "configured" column holds for this table.
	Model string `json:"model"`
	// XLabel names the sweep variable of Measurement.X, when the table is
	// a sweep; plots then draw realized and configured against X.
	XLabel string        `json:"x_label,omitempty"`
	Rows   []Measurement `json:"rows"`
}

// Measurement is one configured-against-realized figure.
type Measurement struct {
	Label  string `json:"label"` // the spec, workload or sweep point
	Path   string `json:"path"`
	Metric string `json:"metric"`
	Unit   string `json:"unit"`
	// X is the sweep variable (tables with an XLabel).
	X float64 `json:"x,omitempty"`
	// Configured is what the spec or model predicts (HasConfigured false:
	// no prediction), Realized what was measured, Error Realized minus
	// Configured in Unit, Ratio Realized over Configured.
	Configured    float64 `json:"configured"`
	HasConfigured bool    `json:"has_configured"`
	Realized      float64 `json:"realized"`
	Error         float64 `json:"error"`
	Ratio         float64 `json:"ratio,omitempty"`
	// Low and High bound Realized (a confidence interval or the spread of
	// repeated runs) when HasInterval.
	Low         float64 `json:"low,omitempty"`
	High        float64 `json:"high,omitempty"`
	HasInterval bool    `json:"has_interval,omitempty"`
	// Target is the target for this figure and Pass whether the
	// measurement meets it ("" and nil when there is none).
	Target string `json:"target,omitempty"`
	Pass   *bool  `json:"pass,omitempty"`
	// NA, when set, says why there is no measurement ("n/a: kernel has no
	// netem"); the numbers are then zero.
	NA string `json:"na,omitempty"`
	// Note is a remark for the reader (e.g. what the CPU figure includes).
	Note string `json:"note,omitempty"`
}

// measured builds a measurement with its error and ratio filled in.
func measured(label, path, metric, unit string, configured, realized float64) Measurement {
	m := Measurement{Label: label, Path: path, Metric: metric, Unit: unit,
		Configured: configured, HasConfigured: true, Realized: realized, Error: realized - configured}
	if configured != 0 {
		m.Ratio = realized / configured
	}
	return m
}

// realizedOnly is a measurement without a prediction.
func realizedOnly(label, path, metric, unit string, realized float64) Measurement {
	return Measurement{Label: label, Path: path, Metric: metric, Unit: unit, Realized: realized}
}

func notAvailable(label, path, why string) Measurement {
	return Measurement{Label: label, Path: path, Metric: "-", NA: why}
}

func (m Measurement) withTarget(target string, pass bool) Measurement {
	m.Target, m.Pass = target, &pass
	return m
}

func (m Measurement) withInterval(lo, hi float64) Measurement {
	m.Low, m.High, m.HasInterval = lo, hi, true
	return m
}

// Finite reports the first measurement holding a NaN or an infinity, so a
// test can assert that every figure of a run is a number.
func (r *Report) Finite() error {
	for _, t := range r.Tables {
		for _, m := range t.Rows {
			for _, v := range []float64{m.X, m.Configured, m.Realized, m.Error, m.Ratio, m.Low, m.High} {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return fmt.Errorf("%s: %s %s %s: not a finite number", t.Name, m.Label, m.Path, m.Metric)
				}
			}
		}
	}
	return nil
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText prints every table aligned, one measurement per line.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "wanlab bench %s, %s, kernel %s", r.Bench, r.Date.UTC().Format("2006-01-02 15:04 MST"), r.Kernel)
	if r.Quick {
		b.WriteString(" (quick)")
	}
	b.WriteString("\n")
	for _, t := range r.Tables {
		fmt.Fprintf(&b, "\n%s\n  configured = %s\n", t.Title, t.Model)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  "+strings.Join([]string{"case", "path", "metric", "configured", "realized", "error", "target"}, "\t"))
		for _, m := range t.Rows {
			fmt.Fprintln(tw, "  "+strings.Join(textCells(m), "\t"))
		}
		tw.Flush()
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func textCells(m Measurement) []string {
	if m.NA != "" {
		return []string{m.Label, m.Path, m.Metric, "", m.NA, "", ""}
	}
	conf := "-"
	errS := ""
	if m.HasConfigured {
		conf = formatValue(m.Configured, m.Unit)
		errS = signed(m.Error, m.Unit)
		if m.Ratio != 0 {
			errS += fmt.Sprintf(" (×%.3f)", m.Ratio)
		}
	}
	real := formatValue(m.Realized, m.Unit)
	if m.HasInterval {
		real += fmt.Sprintf(" [%s, %s]", trim(m.Low), trim(m.High))
	}
	target := m.Target
	if m.Pass != nil {
		if *m.Pass {
			target += " ok"
		} else {
			target += " MISS"
		}
	}
	if m.Note != "" {
		target = strings.TrimSpace(target + " " + m.Note)
	}
	return []string{m.Label, m.Path, m.Metric, conf, real, errS, target}
}

// trim prints v with 4 significant digits, whole numbers from 1000 up
// (no exponents in a table).
func trim(v float64) string {
	if math.Abs(v) >= 1000 {
		return fmt.Sprintf("%.0f", v)
	}
	return units.Sprintf("%.4g", v)
}

func formatValue(v float64, unit string) string {
	if unit == "" {
		return trim(v)
	}
	return trim(v) + " " + unit
}

func signed(v float64, unit string) string {
	s := units.Sprintf("%+.3g", v)
	if math.Abs(v) >= 1000 {
		s = fmt.Sprintf("%+.0f", v)
	}
	if unit != "" {
		s += " " + unit
	}
	return s
}
