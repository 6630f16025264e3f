package report

import (
	"html/template"
	"sync"
)

var funcs = template.FuncMap{
	"rate": rateText,
	"kindName": func(k string) string {
		switch k {
		case "tcptrace":
			return "time-sequence (tcptrace)"
		case "stevens":
			return "Stevens"
		case "rtt":
			return "RTT"
		case "window":
			return "window scaling"
		}
		return k
	},
}

// The summary template is separate so its golden test can render one
// connection's summary alone. It is parsed on first use, not when every
// command of the binary starts.
var pageTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("page").Funcs(funcs).Parse(pageText))
})

const pageText = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="wanlab">
<title>{{.Title}}</title>
<style>{{.CSS}}</style>
</head><body>
<header><h1>{{.Title}}</h1>
{{if .Intro}}<p>{{.Intro}}</p>{{end}}
</header>
{{if .Verdicts}}<section id="verdict" class="verdict"><h2>What limited the transfer</h2>
<div class="cards">{{range .Verdicts}}<div class="card limit-{{.Limit}}"><h3>{{.Title}}: {{.Words}}</h3>
<p class="measured">measured <b>{{.Rate}}</b>, <span class="class">{{.Limit}}</span> limited</p>
{{if .Ceilings}}<ul class="ceilings">{{range .Ceilings}}<li>{{.Limit}} allows <b>{{.Rate}}</b>: {{.How}}</li>{{end}}</ul>{{end}}
{{if .Fix}}<p class="fix">What to do: {{.Fix}}</p>{{end}}
{{if .Predicted}}<p class="predicted">Predicted after the fix: <b>{{.Predicted}}</b></p>{{end}}
{{range .Others}}<p class="note">{{.}}</p>{{end}}
</div>{{end}}</div>
{{range .VerdictTables}}{{template "table" .}}{{end}}
{{if .VerdictGraph}}<div class="dir verdict-graph"><div class="graph" id="{{.VerdictGraph.ID}}" data-kind="{{.VerdictGraph.Kind}}"></div></div>{{end}}
</section>{{end}}
<p class="help">Graphs: mouse wheel zooms time, drag pans, double-click resets (keys: + and - zoom, arrows pan, 0 resets); the buttons jump to a window around the view's centre; click a legend entry to hide it. Graphs of one direction zoom together.</p>
<noscript><p class="warn">JavaScript is off: the tables are complete, the graphs need scripts (inline, no network).</p></noscript>
<div class="sections cols{{.Columns}}">
{{range .Sections}}<section>
<h2>{{.Title}}</h2>
{{if or .Tables .Capture}}<details class="fold"><summary>settings and measurements</summary>
{{range .Tables}}{{template "table" .}}{{end}}
{{if .Capture}}<table class="kv"><caption>capture</caption>
{{range .Capture}}<tr><th>{{index . 0}}</th><td>{{index . 1}}</td></tr>
{{end}}</table>{{end}}
</details>{{end}}
{{range .Warnings}}<p class="warn">warning: {{.}}</p>
{{end}}
{{if .Overview}}<div class="scroll"><table class="overview"><caption>connections</caption>
<tr><th rowspan="2">#</th><th rowspan="2">client</th><th rowspan="2">server</th><th rowspan="2">duration</th><th colspan="3">client → server</th><th colspan="3">server → client</th><th rowspan="2">limit</th></tr>
<tr><th>unique bytes</th><th>rexmt</th><th>RTT p50 ms</th><th>unique bytes</th><th>rexmt</th><th>RTT p50 ms</th></tr>
{{range .Overview}}<tr>{{$link := .Link}}{{range $i, $c := .Cells}}<td>{{if and (eq $i 0) $link}}<a href="#{{$link}}">{{$c}}</a>{{else}}{{$c}}{{end}}</td>{{end}}</tr>
{{end}}</table></div>{{end}}
{{if .Omitted}}<p class="note">{{.Omitted}} smaller connections are in the table above only.</p>{{end}}
{{if .Compare}}<details class="dir compare" open><summary><h4>connections compared (each one's main direction)</h4></summary>
{{range .Compare}}<div class="graph" id="{{.ID}}" data-kind="{{.Kind}}"></div>
{{end}}</details>{{end}}
{{range .Conns}}{{template "connection" .}}{{end}}
</section>
{{end}}</div>
<script>
"use strict";
const WANLAB_GRAPHS = {{.Data}};
{{.JS}}
</script>
</body></html>
{{define "table"}}<table class="kv">{{if .Title}}<caption>{{.Title}}</caption>{{end}}
{{if .Header}}<tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>{{end}}
{{range .Rows}}<tr>{{range $i, $c := .}}{{if eq $i 0}}<th>{{$c}}</th>{{else}}<td>{{$c}}</td>{{end}}{{end}}</tr>
{{end}}</table>
{{end}}
{{define "connection"}}<div class="conn" id="{{.ID}}">
<h3>{{.Heading}}{{if .Limit}} <span class="limit">{{.Limit}} limited</span>{{end}}</h3>
{{template "summary" .}}
{{range .Dirs}}{{if .HasData}}<details class="dir" id="{{.ID}}"{{if .Open}} open{{end}}>
<summary><h4>{{.Label}} <span class="dirname">({{.Name}}, {{.Bytes}} bytes of data)</span></h4></summary>
{{range .Graphs}}<div class="graph" id="{{.ID}}" data-kind="{{.Kind}}"></div>
{{end}}</details>
{{else}}<p class="note">{{.Label}}: no data sent, no graphs.</p>
{{end}}{{end}}{{template "stats" .}}</div>
{{end}}
{{define "summary"}}<div class="summary">
<table class="kv">{{range .Info}}<tr><th>{{index . 0}}</th><td>{{index . 1}}</td></tr>{{end}}</table>
{{range .Diagnoses}}<div class="diag limit-{{.Limit}}"><p><b>{{.Direction}}: {{.Limit}} limited</b>{{if gt .RateBps 0.0}} at {{rate .RateBps}}{{end}}{{if gt .PredictedBps 0.0}}; after the change: {{rate .PredictedBps}}{{end}}</p>
{{if .Evidence}}<p>Evidence:</p><ul>{{range .Evidence}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .Advice}}<p>Advice:</p><ul>{{range .Advice}}<li>{{.}}</li>{{end}}</ul>{{end}}
</div>
{{end}}</div>
{{end}}
{{define "stats"}}<details><summary>statistics per direction (JSON field names)</summary>
<table class="stats"><tr><th>field</th><th>client → server</th><th>server → client</th></tr>
{{range .Stats}}<tr><th>{{.Field}}</th><td>{{.C2S}}</td><td>{{.S2C}}</td></tr>
{{end}}</table></details>
{{end}}`
