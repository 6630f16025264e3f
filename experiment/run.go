package experiment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/vishvananda/netns"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/internal/hostfile"
	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/capture"
	"github.com/wanlab/wanlab/lab/traffic"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/tuner"
)

// Capture sides.
const (
	SideClient = "client"
	SideServer = "server"
)

// CaptureResult is one capture and what the analyzer made of it.
type CaptureResult struct {
	Path  string        `json:"path"`
	Stats capture.Stats `json:"stats"`
	// Connections is the analyzer's view of the experiment's connections
	// in this capture (all of them in a request/response run).
	Connections []*analyzer.Connection `json:"connections"`
	// Diagnosis is the diagnosis of the download's connection, or the
	// most common one across request/response connections.
	Diagnosis *analyzer.Diagnosis `json:"diagnosis,omitempty"`
	// Limits counts connections by diagnosed limit.
	Limits   map[string]int `json:"limits"`
	Warnings []string       `json:"warnings,omitempty"`
	// Analysis is the analyzer's whole result (every connection, the
	// frame counts), for the report.
	Analysis *analyzer.Result `json:"-"`
}

// Result is everything an experiment produced.
type Result struct {
	LabID   string            `json:"lab_id"`
	Config  Config            `json:"config"`
	Specs   map[string]string `json:"specs"` // canonical, per direction
	Mode    string            `json:"mode"`  // "proxy", "kernel" or "routing" (no impairment)
	Started time.Time         `json:"started"`
	Elapsed time.Duration     `json:"elapsed_ns"`
	Out     string            `json:"out"`
	Client  netip.AddrPort    `json:"client"`
	Server  netip.AddrPort    `json:"server"`
	// Hosts says what ran the client, the router and the server: the
	// kernel release and whether it was a VM.
	Hosts map[string]HostInfo `json:"hosts"`
	// Ping is the median round trip of Config.Ping pings.
	Ping time.Duration `json:"ping_ns,omitempty"`

	Download *traffic.DownloadResult `json:"download,omitempty"`
	// ClientCmd is how Config.ClientCmd ran, when it replaced the download.
	ClientCmd *CommandResult            `json:"client_cmd_result,omitempty"`
	RR        *traffic.RRResult         `json:"rr,omitempty"`
	Captures  map[string]*CaptureResult `json:"captures"`
	// Impairment are the counters of the proxy or the qdiscs per direction.
	Impairment *ImpairStats `json:"impairment,omitempty"`
	// Tuning is the tuner's plan from the server capture (nil when the
	// diagnosis predicts no gain).
	Tuning *Tuning `json:"tuning,omitempty"`
	// Advice is the tuner's and the analyzer's advice, deduplicated.
	Advice []string `json:"advice,omitempty"`
	// Report and JSON are the files written.
	Report string `json:"report"`
	JSON   string `json:"json"`
}

// Run performs one experiment. Everything it creates in the system (lab
// namespaces, proxy TUNs and rules, qdiscs) is removed before it returns,
// also on error and when ctx is cancelled.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.VMs {
		return runVMs(ctx, cfg)
	}
	return run(ctx, cfg, &namespaces{})
}

// endpoints is where the client and the server of an experiment live:
// namespaces of a lab on this host (namespaces) or two VMs on the TAPs of
// its router namespace (guests). run takes every step through it, in one
// order, so that both run the same experiment; the router and what
// impairs it are the same for both.
type endpoints interface {
	// open readies the hosts with cfg's sysctls and offloads, logs where
	// they are, and returns the lab and what runs each host; close undoes
	// what open did, also after a failed open.
	open(ctx context.Context, cfg Config, logf func(string, ...any)) (*lab.Lab, map[string]HostInfo, error)
	close() error
	// serve starts the traffic server and returns its address and stop.
	serve(ctx context.Context, c traffic.ServerConfig) (netip.AddrPort, func() error, error)
	// startKernel applies the specs as qdiscs (cfg.Kernel).
	startKernel(ctx context.Context, specs map[string]*spec.Spec) (impairment, error)
	// capturePoint is where one side's capture listens, and its comment.
	capturePoint(side string) (ns netns.NsHandle, link, comment string)
	// in names where the traffic runs, for the log ("" or " in the
	// client VM").
	in() string
	download(ctx context.Context, c traffic.DownloadConfig) (*traffic.DownloadResult, error)
	requestResponse(ctx context.Context, c traffic.RRConfig) (*traffic.RRResult, error)
	// snapshot reads the tuner's keys of the client or the server.
	snapshot(ctx context.Context, role string) (*tuner.Snapshot, error)
}

// pinger is what endpoints that can ping the server have (cfg.Ping: the
// guests, with busybox's ping).
type pinger interface {
	ping(ctx context.Context, dst netip.Addr, n int) (time.Duration, error)
}

// run is one experiment between ep's hosts: it sets them up, impairs the
// router, serves, captures both ends while the traffic runs, stops
// everything, analyzes and writes the outputs.
func run(ctx context.Context, cfg Config, ep endpoints) (_ *Result, err error) {
	cfg = cfg.withDefaults()
	specs, err := cfg.Specs()
	if err != nil {
		return nil, err
	}
	if _, err := cfg.Schedules(); err != nil {
		return nil, err
	}
	if err := cfg.CheckSysctls(); err != nil {
		return nil, err
	}
	if err := cfg.checkOwnCommands(); err != nil {
		return nil, err
	}
	if err := cfg.CheckRange(); err != nil {
		return nil, err
	}
	res := &Result{Config: cfg, Started: time.Now(), Specs: map[string]string{}, Captures: map[string]*CaptureResult{}}
	for dir, s := range specs {
		res.Specs[dir] = s.String()
	}
	if res.Out, err = outDir(cfg.Out, res.Started, cfg.Force); err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(cfg.Log, format+"\n", args...) }

	defer func() { err = errors.Join(err, ep.close()) }()
	l, hosts, err := ep.open(ctx, cfg, logf)
	if err != nil {
		return nil, err
	}
	res.LabID, res.Hosts = l.ID, hosts

	srvAddr, cliAddr := l.Server.IPv4, l.Client.IPv4
	if cfg.IPv6 {
		srvAddr, cliAddr = l.Server.IPv6, l.Client.IPv6
	}
	srv, stopServer, err := ep.serve(ctx, traffic.ServerConfig{
		Listen:    netip.AddrPortFrom(srvAddr, 80),
		Sockopt:   cfg.Server,
		Nagle:     cfg.Requests > 0 && !cfg.NoNagle,
		ThinkTime: cfg.ThinkTime,
		WriteRate: cfg.WriteRate, WriteChunk: cfg.WriteChunk, WritePauses: cfg.WritePauses, WritePause: cfg.WritePause,
	})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, stopServer()) }()
	res.Server = srv
	res.Client = netip.AddrPortFrom(cliAddr, 0)

	imp, err := startImpairment(ctx, ep, l, cfg, specs, res.Out)
	if err != nil {
		return nil, err
	}
	defer func() {
		if imp != nil {
			_, serr := imp.Stop()
			err = errors.Join(err, serr)
		}
	}()
	res.Mode = imp.Mode()
	logf("impairment: %s", imp.Describe())

	if p, ok := ep.(pinger); ok && cfg.Ping > 0 {
		if res.Ping, err = p.ping(ctx, srvAddr, cfg.Ping); err != nil {
			return nil, err
		}
		logf("ping %s: %d × average %v", srvAddr, cfg.Ping, res.Ping.Round(10*time.Microsecond))
	}

	caps := map[string]*capture.Capture{}
	defer func() {
		for _, c := range caps {
			_, _ = c.Stop()
		}
	}()
	for _, side := range []string{SideClient, SideServer} {
		ns, link, comment := ep.capturePoint(side)
		path := filepath.Join(res.Out, side+".pcapng")
		c, err := capture.StartFile(ns, link, path, capture.Config{
			Snaplen: cfg.Snaplen, MaxBytes: cfg.MaxCapture, Comment: comment, Replace: cfg.Force,
		})
		if err != nil {
			return nil, err
		}
		caps[side] = c
		res.Captures[side] = &CaptureResult{Path: path}
	}

	if cfg.ServerCmd != "" {
		stopCmd, serr := startServerCmd(l, cfg, res.Out)
		if serr != nil {
			return nil, serr
		}
		defer func() { err = errors.Join(err, stopCmd()) }()
	}

	tctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if cfg.ClientCmd != "" {
		logf("client command: %s", cfg.ClientCmd)
		if res.ClientCmd, err = runClientCmd(tctx, l, cfg, res.Out); err != nil {
			return nil, err
		}
	} else if cfg.Requests > 0 {
		logf("request/response%s: %d requests over %d connections to %s", ep.in(), cfg.Requests, cfg.Concurrency, srv)
		if res.RR, err = ep.requestResponse(tctx, traffic.RRConfig{
			Server: srv, Requests: cfg.Requests, Concurrency: cfg.Concurrency,
			BodySize: cfg.RRBody, Sockopt: cfg.Client, Timeout: cfg.RequestTimeout,
		}); err != nil {
			return nil, err
		}
	} else {
		logf("download%s: %s from http://%s%s%d", ep.in(), cfg.Size.Human(), srv, traffic.GenPath, uint64(cfg.Size))
		if res.Download, err = ep.download(tctx, traffic.DownloadConfig{
			Server: srv, Size: cfg.Size, Sockopt: cfg.Client,
			Progress: cfg.Progress, ProgressEvery: cfg.ProgressEvery,
		}); err != nil {
			return nil, err
		}
		res.Client = res.Download.Local
	}

	serverAnalysis, err := stopAndAnalyze(res, caps, &imp)
	if err != nil {
		return nil, err
	}
	if res.Download != nil {
		snapshot := func(role string) (*tuner.Snapshot, error) { return ep.snapshot(ctx, role) }
		if res.Tuning, err = planTuning(snapshot, res, serverAnalysis); err != nil {
			return nil, err
		}
	}
	res.Advice = advice(res)
	if w := guestCPUWarning(res); w != "" {
		res.Advice = append(res.Advice, w)
	}
	res.Elapsed = time.Since(res.Started)
	if err := writeOutputs(res); err != nil {
		return nil, err
	}
	return res, nil
}

// stopAndAnalyze stops the captures (removing each from caps) and the
// impairment (setting *imp to nil, so the caller's deferred stop does
// nothing), records their figures in res, and analyzes both captures; it
// returns the server capture's analysis, from which the tuner plans.
func stopAndAnalyze(res *Result, caps map[string]*capture.Capture, imp *impairment) (*analyzer.Result, error) {
	for name, c := range caps {
		st, err := c.Stop()
		if err != nil {
			return nil, err
		}
		res.Captures[name].Stats = st
		delete(caps, name)
	}
	st, err := (*imp).Stop()
	*imp = nil
	if err != nil {
		return nil, err
	}
	res.Impairment = st
	var server *analyzer.Result
	for _, name := range []string{SideClient, SideServer} {
		ar, err := analyzeCapture(res, name)
		if err != nil {
			return nil, err
		}
		if name == SideServer {
			server = ar
		}
	}
	return server, nil
}

// outDir creates the output directory: dir (refused if it exists, unless
// force), or a new "wanlab-experiment-YYYYmmdd-HHMMSS-<16 hex digits>"
// (mode 0700) under the current directory: a name no one can have
// pre-created.
func outDir(dir string, now time.Time, force bool) (string, error) {
	if dir == "" {
		d, err := hostfile.NewOutputDir(".", "wanlab-experiment-"+now.Format("20060102-150405")+"-")
		if err != nil {
			return "", fmt.Errorf("output directory: %w", err)
		}
		return filepath.Abs(d)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := hostfile.OutputDir(abs, force); err != nil {
		return "", fmt.Errorf("output directory: %w", err)
	}
	return abs, nil
}

// analyzeCapture runs the analyzer on one capture and keeps the
// experiment's connections.
func analyzeCapture(res *Result, side string) (*analyzer.Result, error) {
	cr := res.Captures[side]
	ar, err := analyzer.AnalyzeFile(cr.Path, analyzer.Options{})
	if err != nil {
		return nil, fmt.Errorf("analyze %s capture: %w", side, err)
	}
	cr.Analysis = ar
	cr.Warnings = ar.Warnings
	cr.Limits = map[string]int{}
	for _, c := range ar.Connections {
		if res.ClientCmd == nil && c.Server.Port() != res.Server.Port() {
			continue // another program's (own commands: every connection counts)
		}
		if res.Download != nil && c.Client != res.Download.Local {
			continue
		}
		cr.Connections = append(cr.Connections, c)
		if c.Diagnosis != nil {
			cr.Limits[c.Diagnosis.Limit]++
		}
	}
	// The download's connection, or the connection whose diagnosis names
	// the most common limit.
	best := ""
	for limit, n := range cr.Limits {
		if best == "" || n > cr.Limits[best] || n == cr.Limits[best] && limit < best {
			best = limit
		}
	}
	for _, c := range cr.Connections {
		if c.Diagnosis != nil && c.Diagnosis.Limit == best {
			cr.Diagnosis = c.Diagnosis
			break
		}
	}
	return ar, nil
}

// writeOutputs writes result.json and report.html into res.Out.
func writeOutputs(res *Result) error {
	res.JSON = filepath.Join(res.Out, "result.json")
	res.Report = filepath.Join(res.Out, "report.html")
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("result json: %w", err)
	}
	return writeFiles(res.JSON, b, res.Report, res.Config.Force, func(w io.Writer) error {
		if err := WriteReport(w, res); err != nil {
			return fmt.Errorf("report: %w", err)
		}
		return nil
	})
}

// writeFiles writes js, a line of JSON, to jsonPath and what report writes
// to reportPath; force replaces existing files by rename.
func writeFiles(jsonPath string, js []byte, reportPath string, force bool, report func(io.Writer) error) error {
	if err := hostfile.WriteOutput(jsonPath, append(js, '\n'), 0o644, force); err != nil {
		return err
	}
	f, err := hostfile.CreateOutput(reportPath, 0o644, force)
	if err != nil {
		return err
	}
	if err := report(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
