// Package report writes the analyzer's results as one self-contained HTML
// file: summary tables, diagnoses and every graph, zoomable in time by a
// small inline plotter, with no network access needed to open it.
//
// A page holds one or more sections side by side (one capture each, such
// as the client and server captures of an experiment), each with extra
// key/value tables for whatever produced the capture.
package report

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"fmt"
	"github.com/wanlab/wanlab/units"
	"html/template"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/analyzer/plot"
)

// Page is a whole report.
type Page struct {
	Title string
	// Intro is a paragraph under the title (plain text).
	Intro    string
	Sections []Section
	// VerdictTables are shown with the verdict, under its cards (for
	// --like: the original beside the reproduction).
	VerdictTables []Table
}

// Section is one capture's analysis.
type Section struct {
	Title string
	// Result, when set, adds the capture's file, frame counts and warnings.
	Result *analyzer.Result
	// Connections to show; nil shows every connection of Result.
	Connections []*analyzer.Connection
	// Warnings are shown under the capture's (a capture's kernel drops...).
	Warnings []string
	// Start is the time of the capture's first packet (default
	// Result.Start). Sections with a start can zoom together: the same
	// connection in two captures, aligned in time.
	Start time.Time
	// Tables are shown before the capture's connections (the spec, the
	// sysctls, the tuner's advice...).
	Tables []Table
	// DetailConnections bounds how many connections get a detailed block
	// with graphs, largest transfers first (0: DefaultDetailConnections).
	// Every connection still appears in the overview table.
	DetailConnections int
}

// DefaultDetailConnections is the number of connections per section drawn
// in detail unless Section.DetailConnections says otherwise.
const DefaultDetailConnections = 12

// Table is an extra table; a key/value table has two columns.
type Table struct {
	Title  string
	Header []string // optional
	Rows   [][]string
}

// KV builds a two-column table from alternating keys and values.
func KV(title string, kv ...string) Table {
	t := Table{Title: title}
	for i := 0; i+1 < len(kv); i += 2 {
		t.Rows = append(t.Rows, []string{kv[i], kv[i+1]})
	}
	return t
}

//go:embed plotter.js
var plotterJS string

//go:embed style.css
var styleCSS string

// Write renders p as HTML to w.
func Write(w io.Writer, p Page) error {
	bw := bufio.NewWriter(w)
	v := pageView{Title: p.Title, Intro: p.Intro, CSS: template.CSS(styleCSS), JS: template.JS(plotterJS),
		Columns: min(max(len(p.Sections), 1), 2)}
	graphs := []graphJSON{}
	var vc *analyzer.Connection
	var vdir int
	v.Verdicts, vc, vdir = verdicts(p.Sections)
	v.VerdictTables = p.VerdictTables
	if vc != nil {
		if g := plot.Verdict(vc, vdir); g != nil {
			gj := toJSON(g, "verdict-throughput", "verdict")
			graphs = append(graphs, gj)
			v.VerdictGraph = &graphRef{ID: "verdict-throughput", Kind: string(g.Kind)}
		}
	}
	var base time.Time
	for _, s := range p.Sections {
		if st := sectionStart(s); !st.IsZero() && (base.IsZero() || st.Before(base)) {
			base = st
		}
	}
	for si, s := range p.Sections {
		start := sectionStart(s)
		sv := sectionView{Title: s.Title, Tables: s.Tables, Warnings: s.Warnings}
		conns := s.Connections
		if r := s.Result; r != nil {
			sv.Capture = captureRows(r)
			sv.Warnings = append(slices.Clone(r.Warnings), s.Warnings...)
			if conns == nil {
				conns = r.Connections
			}
		}
		detail := s.DetailConnections
		if detail <= 0 {
			detail = DefaultDetailConnections
		}
		chosen := largest(conns, detail)
		for _, c := range conns {
			row := overview{Cells: overviewRow(c)}
			if chosen[c] {
				row.Link = fmt.Sprintf("s%d-c%d", si+1, c.Index)
			}
			sv.Overview = append(sv.Overview, row)
		}
		var detailed []*analyzer.Connection
		for _, c := range conns {
			if chosen[c] {
				detailed = append(detailed, c)
			}
		}
		// addGraph adds g's data to the page and returns its reference;
		// link names the direction a graph of a capture with a start
		// links to.
		addGraph := func(g *plot.Graph, id, group, link string) graphRef {
			gj := toJSON(g, id, group)
			gj.Section = si
			if !start.IsZero() {
				gj.Offset = start.Sub(base).Seconds()
				gj.Link = link
			}
			graphs = append(graphs, gj)
			return graphRef{ID: id, Kind: string(g.Kind)}
		}
		for _, g := range plot.Compare(detailed) {
			id := fmt.Sprintf("s%d-compare-%s", si+1, g.Kind)
			sv.Compare = append(sv.Compare, addGraph(g, id, fmt.Sprintf("s%d-compare", si+1), ""))
		}
		for _, c := range conns {
			if !chosen[c] {
				continue
			}
			cv := connView(c, fmt.Sprintf("s%d-c%d", si+1, c.Index))
			for k := range cv.Dirs {
				dv := &cv.Dirs[k]
				if !dv.HasData {
					continue
				}
				for _, g := range plot.Graphs(c, dv.index) {
					id := fmt.Sprintf("%s-%s-%s", cv.ID, g.Direction, g.Kind)
					dv.Graphs = append(dv.Graphs, addGraph(g, id, cv.ID+"-"+dv.Name, dv.Label))
				}
			}
			sv.Conns = append(sv.Conns, cv)
		}
		sv.Omitted = len(conns) - len(sv.Conns)
		v.Sections = append(v.Sections, sv)
	}
	data, err := json.Marshal(graphs)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	v.Data = template.JS(data)
	if err := pageTemplate().Execute(bw, v); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return bw.Flush()
}

func sectionStart(s Section) time.Time {
	if s.Start.IsZero() && s.Result != nil {
		return s.Result.Start
	}
	return s.Start
}

// largest picks the n connections that carried the most unique bytes.
func largest(conns []*analyzer.Connection, n int) map[*analyzer.Connection]bool {
	s := slices.Clone(conns)
	slices.SortStableFunc(s, func(a, b *analyzer.Connection) int {
		return int(b.UniqueBytes() - a.UniqueBytes())
	})
	m := make(map[*analyzer.Connection]bool)
	for _, c := range s[:min(n, len(s))] {
		m[c] = true
	}
	return m
}

type pageView struct {
	Title         string
	Intro         string
	CSS           template.CSS
	JS            template.JS
	Data          template.JS
	Columns       int
	Verdicts      []verdictView
	VerdictTables []Table
	VerdictGraph  *graphRef
	Sections      []sectionView
}

type sectionView struct {
	Title    string
	Tables   []Table
	Capture  [][2]string
	Warnings []string
	Overview []overview
	// Compare: the connections drawn in detail, overlaid (goodput, RTT).
	Compare []graphRef
	Conns   []connectionView
	Omitted int
}

// overview is a row of the connections table; Link is the id of the
// connection's detailed block, if it has one.
type overview struct {
	Cells []string
	Link  string
}

type connectionView struct {
	ID        string
	Index     int
	Heading   string
	Limit     string
	Info      [][2]string
	Diagnoses []*analyzer.Diagnosis
	Stats     []statRow
	// Dirs lists the directions, the one that carried more data first.
	Dirs []dirView
}

type dirView struct {
	ID      string
	Name    string // c2s or s2c
	Label   string // "10.0.0.2:40000 → 10.0.0.1:80"
	HasData bool
	// Open: drawn expanded. A direction with under a tenth of the other's
	// data (requests, ACK-only) is collapsed.
	Open   bool
	Bytes  int64
	Graphs []graphRef
	index  int
}

type graphRef struct {
	ID   string
	Kind string
}

type statRow struct {
	Field string // the JSON field name
	C2S   string
	S2C   string
}

func captureRows(r *analyzer.Result) [][2]string {
	rows := [][2]string{}
	if r.File != "" {
		rows = append(rows, [2]string{"file", r.File})
	}
	rows = append(rows,
		[2]string{"frames", strconv.Itoa(r.Frames)},
		[2]string{"TCP packets", strconv.Itoa(r.TCPPackets)},
		[2]string{"connections", strconv.Itoa(len(r.Connections))})
	if !r.Start.IsZero() {
		rows = append(rows,
			[2]string{"first packet", r.Start.UTC().Format("2006-01-02 15:04:05.000000 UTC")},
			[2]string{"duration", secs(r.End.Sub(r.Start))})
	}
	if r.NotTCP > 0 {
		rows = append(rows, [2]string{"frames not TCP", strconv.Itoa(r.NotTCP)})
	}
	return rows
}

func secs(d time.Duration) string { return units.Sig(d.Seconds()) + " s" }

func dirLabel(d *analyzer.Direction) string {
	if d == nil {
		return "-"
	}
	return d.From.String() + " → " + d.To.String()
}

// overviewRow is one connection in the section's overview table.
func overviewRow(c *analyzer.Connection) []string {
	limit := "-"
	if c.Diagnosis != nil {
		limit = c.Diagnosis.Limit
	}
	row := []string{strconv.Itoa(c.Index), c.Client.String(), c.Server.String(), secs(c.Duration)}
	for _, d := range c.Directions {
		if d == nil {
			row = append(row, "-", "-", "-")
			continue
		}
		row = append(row, strconv.FormatInt(d.UniqueBytes, 10), strconv.Itoa(d.RetransmittedPackets), num(d.RTTP50Ms))
	}
	return append(row, limit)
}

func connView(c *analyzer.Connection, id string) connectionView {
	cv := connectionView{ID: id, Index: c.Index,
		Heading: fmt.Sprintf("connection %d: %s → %s", c.Index, c.Client, c.Server)}
	if c.Diagnosis != nil {
		cv.Limit = c.Diagnosis.Limit
	}
	hs := "no"
	if c.HandshakeSeen {
		hs = "yes"
	}
	cv.Info = [][2]string{
		{"client", c.Client.String()},
		{"server", c.Server.String()},
		{"start", secs(c.Start)},
		{"duration", secs(c.Duration)},
		{"handshake seen", hs},
		{"state", c.State},
	}
	for i, d := range c.Directions {
		dv := dirView{ID: id + "-" + plot.DirectionName(i), Name: plot.DirectionName(i), Label: dirLabel(d),
			HasData: plot.HasData(c, i), index: i}
		if d != nil {
			dv.Bytes = d.UniqueBytes
		}
		cv.Dirs = append(cv.Dirs, dv)
		if d != nil && d.Diagnosis != nil {
			cv.Diagnoses = append(cv.Diagnoses, d.Diagnosis)
		}
	}
	if cv.Dirs[1].Bytes > cv.Dirs[0].Bytes {
		cv.Dirs[0], cv.Dirs[1] = cv.Dirs[1], cv.Dirs[0]
	}
	cv.Dirs[0].Open = true
	cv.Dirs[1].Open = cv.Dirs[1].Bytes*10 >= cv.Dirs[0].Bytes
	// The connection's diagnosis (its bulk direction) comes first.
	if i := slices.Index(cv.Diagnoses, c.Diagnosis); i > 0 {
		cv.Diagnoses[0], cv.Diagnoses[i] = cv.Diagnoses[i], cv.Diagnoses[0]
	} else if i < 0 && c.Diagnosis != nil {
		cv.Diagnoses = append([]*analyzer.Diagnosis{c.Diagnosis}, cv.Diagnoses...)
	}
	cv.Stats = statRows(c)
	return cv
}

// statRows lists every JSON field of the two directions' statistics, in
// the analyzer's field order, so the table follows the JSON schema.
func statRows(c *analyzer.Connection) []statRow {
	var rows []statRow
	t := reflect.TypeFor[analyzer.DirectionStats]()
	var vals [2]reflect.Value
	for i, d := range c.Directions {
		if d != nil {
			vals[i] = reflect.ValueOf(d.DirectionStats)
		}
	}
	for f := range t.NumField() {
		sf := t.Field(f)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "" || name == "-" || !sf.IsExported() {
			continue
		}
		row := statRow{Field: name, C2S: "-", S2C: "-"}
		for i, v := range vals {
			if !v.IsValid() {
				continue
			}
			s := format(v.Field(f))
			if i == 0 {
				row.C2S = s
			} else {
				row.S2C = s
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func format(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		return num(v.Float())
	case reflect.Bool:
		if v.Bool() {
			return "yes"
		}
		return "no"
	case reflect.String:
		return v.String()
	case reflect.Struct:
		// A nested record (the ramp) as its JSON, field names and all.
		if b, err := json.Marshal(v.Interface()); err == nil {
			return string(b)
		}
	}
	return fmt.Sprint(v.Interface())
}

// num writes a float with three significant digits, as people read them.
func num(f float64) string { return units.Sig(f) }

// rateText writes a rate in bit/s as Mbit/s and MB/s, as the seeds quote
// speeds both ways.
func rateText(bps float64) string { return rateSig(bps) }
