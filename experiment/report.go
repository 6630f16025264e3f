package experiment

import (
	"encoding/json"
	"html/template"
	"io"
	"maps"
	"slices"
	"strconv"

	"github.com/wanlab/wanlab/analyzer"
)

// reportData is what the report template sees.
type reportData struct {
	R        *Result
	About    string
	Specs    [][2]string
	Sysctls  [][3]string
	Sockopts [][2]string
	Summary  []string
	TCPInfo  [][3]string
	Sides    []reportSide
	Rows     []graphRow
	JSON     string
}

type reportSide struct {
	Name      string
	Path      string
	Stats     string
	Conn      *analyzer.Connection
	Diagnosis *analyzer.Diagnosis
	Limits    string
}

// graphRow puts one graph of the client capture beside the same graph of
// the server capture.
type graphRow struct {
	Title          string
	Client, Server template.HTML
}

// dataDirection is the direction of c that carried the most data.
func dataDirection(c *analyzer.Connection) *analyzer.Direction {
	if c == nil {
		return nil
	}
	d := c.Directions[1]
	if c.Directions[0] != nil && (d == nil || c.Directions[0].UniqueBytes > d.UniqueBytes) {
		d = c.Directions[0]
	}
	return d
}

// reportConn is the connection a capture's graphs show: the one its
// diagnosis came from, else the first.
func reportConn(cr *CaptureResult) *analyzer.Connection {
	if cr == nil || len(cr.Connections) == 0 {
		return nil
	}
	for _, c := range cr.Connections {
		if c.Diagnosis != nil && c.Diagnosis == cr.Diagnosis {
			return c
		}
	}
	return cr.Connections[0]
}

// WriteReport writes the self-contained HTML report (no scripts, no
// network): setting, results, TCP_INFO, diagnosis and advice, and the four
// graphs of both captures side by side.
func WriteReport(w io.Writer, r *Result) error {
	d := reportData{R: r, About: PresetAbout(r.Config.Name)}
	for _, dir := range []string{ToClient, ToServer} {
		s := r.Specs[dir]
		if s == "" {
			s = "(none)"
		}
		d.Specs = append(d.Specs, [2]string{dir, s})
	}
	for _, h := range []struct {
		name string
		kv   map[string]string
	}{{"client", r.Config.ClientSysctls}, {"server", r.Config.ServerSysctls}} {
		for _, k := range slices.Sorted(maps.Keys(h.kv)) {
			d.Sysctls = append(d.Sysctls, [3]string{h.name, k, h.kv[k]})
		}
	}
	if s := optString(r.Config.Client); s != "" {
		d.Sockopts = append(d.Sockopts, [2]string{"client", s})
	}
	if s := optString(r.Config.Server); s != "" {
		d.Sockopts = append(d.Sockopts, [2]string{"server", s})
	}
	if dl := r.Download; dl != nil {
		d.Summary = append(d.Summary,
			"downloaded "+dl.Bytes.Human()+" in "+secs(dl.Elapsed),
			"average "+mbps(dl.Average), "connect "+ms(dl.Connect)+", first byte "+ms(dl.FirstByte))
		c := dl.Client
		s := dl.Server
		if s == nil {
			s = &c
		}
		d.TCPInfo = [][3]string{
			{"rtt / min rtt", ms(c.RTT) + " / " + ms(c.MinRTT), ms(s.RTT) + " / " + ms(s.MinRTT)},
			{"cwnd", "", s.CwndBytes().Human()},
			{"peer window (snd_wnd)", c.SndWnd.Human(), s.SndWnd.Human()},
			{"own window (rcv_wnd)", c.RcvWnd.Human(), s.RcvWnd.Human()},
			{"delivery rate", c.DeliveryRate.Human(), s.DeliveryRate.Human()},
			{"retransmitted segments", itoa(int(c.TotalRetrans)), itoa(int(s.TotalRetrans))},
			{"rwnd-limited / sndbuf-limited", "", pct(s.RwndLimitedFraction()) + " / " + pct(s.SndbufLimitedFraction())},
		}
	}
	if rr := r.RR; rr != nil {
		l := rr.Latency
		d.Summary = append(d.Summary,
			itoa(rr.Requests)+" requests, "+itoa(rr.Errors)+" errors, "+itoa(int(rr.PerSec))+" requests/s",
			"latency p50 "+ms(l.P50)+", p90 "+ms(l.P90)+", p99 "+ms(l.P99)+", max "+ms(l.Max))
	}
	var sideCharts [2][]chart
	for i, name := range []string{SideClient, SideServer} {
		cr := r.Captures[name]
		if cr == nil {
			cr = &CaptureResult{}
		}
		conn := reportConn(cr)
		sd := reportSide{Name: name, Path: cr.Path, Conn: conn, Diagnosis: cr.Diagnosis,
			Stats: itoa(int(cr.Stats.Packets)) + " packets, " + itoa(int(cr.Stats.KernelDrops)) + " dropped by the kernel"}
		for _, k := range slices.Sorted(maps.Keys(cr.Limits)) {
			if sd.Limits != "" {
				sd.Limits += ", "
			}
			sd.Limits += k + ": " + itoa(cr.Limits[k])
		}
		d.Sides = append(d.Sides, sd)
		sideCharts[i] = charts(dataDirection(conn))
	}
	for i := range sideCharts[0] {
		d.Rows = append(d.Rows, graphRow{Title: sideCharts[0][i].title, Client: sideCharts[0][i].svg(), Server: sideCharts[1][i].svg()})
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	d.JSON = string(b)
	return reportTemplate.Execute(w, d)
}

func itoa(n int) string { return strconv.Itoa(n) }

func pct(f float64) string { return itoa(int(f*100+0.5)) + " %" }

var reportTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>wanlab experiment {{.R.Config.Name}}</title>
<style>
body{font-family:sans-serif;margin:1.5em;max-width:1200px}
table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
.graphs td{border:none;padding:0 .5em}
.limit{font-weight:bold}
pre{background:#f6f6f6;padding:.5em;overflow:auto;max-height:30em}
</style></head><body>
<h1>wanlab experiment {{.R.Config.Name}}</h1>
{{if .About}}<p>{{.About}}</p>{{end}}
<p>lab {{.R.LabID}}, {{.R.Mode}}, started {{.R.Started.UTC.Format "2006-01-02 15:04:05 UTC"}}; client {{.R.Client}}, server {{.R.Server}}</p>

<h2>Setting</h2>
<table><tr><th>direction</th><th>impairment (tc syntax)</th></tr>
{{range .Specs}}<tr><td>{{index . 0}}</td><td><code>{{index . 1}}</code></td></tr>{{end}}
</table>
{{if .Sysctls}}<table><tr><th>host</th><th>sysctl</th><th>value</th></tr>
{{range .Sysctls}}<tr><td>{{index . 0}}</td><td><code>{{index . 1}}</code></td><td><code>{{index . 2}}</code></td></tr>{{end}}
</table>{{end}}
{{if .Sockopts}}<table><tr><th>host</th><th>socket options</th></tr>
{{range .Sockopts}}<tr><td>{{index . 0}}</td><td><code>{{index . 1}}</code></td></tr>{{end}}
</table>{{end}}

<h2>Result</h2>
<ul>{{range .Summary}}<li>{{.}}</li>{{end}}</ul>
{{if .TCPInfo}}<table><tr><th>TCP_INFO</th><th>client</th><th>server</th></tr>
{{range .TCPInfo}}<tr><td>{{index . 0}}</td><td>{{index . 1}}</td><td>{{index . 2}}</td></tr>{{end}}
</table>{{end}}

<h2>Diagnosis</h2>
{{range .Sides}}<h3>{{.Name}} capture</h3>
<p>{{.Stats}}{{if .Limits}}; connections by limit: {{.Limits}}{{end}}. File: <code>{{.Path}}</code></p>
{{with .Diagnosis}}<p><span class="limit">{{.Direction}}: {{.Limit}} limited</span></p>
<ul>{{range .Evidence}}<li>{{.}}</li>{{end}}</ul>
{{if .Advice}}<p>Advice:</p><ul>{{range .Advice}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{else}}<p>no diagnosis</p>{{end}}
{{end}}
{{if .R.Advice}}<h2>Advice</h2><ul>{{range .R.Advice}}<li>{{.}}</li>{{end}}</ul>{{end}}

<h2>Graphs</h2>
<table class="graphs"><tr><th>client capture</th><th>server capture</th></tr>
{{range .Rows}}<tr><td>{{.Client}}</td><td>{{.Server}}</td></tr>
{{end}}</table>

<h2>Raw result</h2>
<pre>{{.JSON}}</pre>
</body></html>
`))
