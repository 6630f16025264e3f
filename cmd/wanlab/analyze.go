package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/analyzer/decode"
	"github.com/wanlab/wanlab/analyzer/pcapfile"
	"github.com/wanlab/wanlab/internal/heapbound"
	"github.com/wanlab/wanlab/internal/hostfile"
)

func init() {
	register(&cli.Command{
		Name:      "analyze",
		Usage:     "explain the TCP connections in a pcap/pcapng capture",
		ArgsUsage: "FILE (- for stdin)",
		UsageText: "wanlab analyze [--json | --format text|json|csv] [--flow SELECTOR] [--plots DIR] [--report FILE.html] FILE\n\n" +
			"examples:\n" +
			"   wanlab analyze download.pcap\n" +
			"   wanlab analyze server.pcapng --flow 10.0.0.1:80 --json > report.json\n" +
			"   wanlab analyze --flow 2 --format csv capture.pcap > series.csv\n" +
			"   tcpdump -i eth0 -s 96 -w - port 80 | wanlab analyze -\n" +
			"   wanlab analyze --plots graphs --report report.html download.pcap",
		Description: "Reads a capture (pcap or pcapng; Ethernet, Linux cooked v1/v2, raw IP, loopback,\n" +
			"PPP, Cisco HDLC, NFLOG; TCP inside VLAN/QinQ, MPLS, PPPoE, GRE, ERSPAN, IP-in-IP,\n" +
			"VXLAN and GENEVE tunnels: see docs/analyzer.md) and prints, per TCP connection and\n" +
			"direction, the counters tcptrace -l shows plus Wireshark's analysis flags (retransmissions, fast/spurious\n" +
			"retransmissions, out-of-order, lost segments, duplicate ACKs, zero windows,\n" +
			"window full, keep-alives), RTT statistics (Karn's rule and TCP timestamps), windows,\n" +
			"bytes in flight and throughput, then a diagnosis of what limited each transfer\n" +
			"(receive window, send buffer, loss, delayed ACKs, application, bandwidth) with the\n" +
			"setting to change and the throughput predicted after the change.\n\n" +
			"--format json prints the schema in analyzer/SCHEMA.md; --format csv prints the\n" +
			"decimated time series (sequence, ACK, window, SACK, RTT, in flight, throughput).\n" +
			"--flow takes a comma-separated list of connection numbers, ADDR, ADDR:PORT or :PORT.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "format", Value: "text", Usage: "output format: text, json or csv"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON (the same as --format json)"},
			&cli.StringFlag{Name: "flow", Usage: "connections to show: `N,ADDR,ADDR:PORT,:PORT` (default all)"},
			&cli.IntFlag{Name: "max-points", Value: 4096, Usage: "points per time series before decimation"},
			maxOpenFlag(),
			&cli.StringSliceFlag{Name: "decode-as", Usage: "decode a UDP port as a tunnel, as Wireshark's -d: `udp.port=PORT,vxlan` or udp.port=PORT,geneve (repeatable)"},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a Go CPU profile of the run to `FILE` (go tool pprof)", Hidden: true},
		}, plotFlags()...),
		Args:   true,
		Action: runAnalyze,
	})
}

// analyzeHeapFloor is the memory limit of an analysis whose live data is
// small (the process then peaks near 80 MB with the binary's own pages).
const analyzeHeapFloor = 64 << 20

func runAnalyze(cc *cli.Context) error {
	if cc.NArg() != 1 {
		return usageError(errors.New("analyze: want exactly one capture FILE"))
	}
	format := cc.String("format")
	if cc.Bool("json") {
		if cc.IsSet("format") && format != "json" {
			return usageError(fmt.Errorf("analyze: --json and --format %s: choose one", format))
		}
		format = "json"
	}
	switch format {
	case "text", "json", "csv":
	default:
		return usageError(fmt.Errorf("analyze: --format %q: want text, json or csv", format))
	}
	sel, err := analyzer.ParseFlowSelector(cc.String("flow"))
	if err != nil {
		return usageError(fmt.Errorf("analyze: --flow: %w", err))
	}
	stopProfile, err := startCPUProfile(cc.String("cpuprofile"))
	if err != nil {
		return fmt.Errorf("analyze: --cpuprofile: %w", err)
	}
	defer stopProfile()
	// The live data is the open connections; the rest churns. Keep the
	// heap near it (see heapbound) rather than at twice it.
	defer heapbound.Start(analyzeHeapFloor)()
	path := cc.Args().First()
	if err := captureInput(path); err != nil {
		return usageError(fmt.Errorf("analyze: %w", err))
	}
	maxOpen, err := maxOpenConnections(cc)
	if err != nil {
		return usageError(fmt.Errorf("analyze: %w", err))
	}
	opts := analyzer.Options{MaxPoints: cc.Int("max-points"), MaxOpen: maxOpen}
	for _, rule := range cc.StringSlice("decode-as") {
		if opts.Decode == nil {
			opts.Decode = new(decode.Config)
		}
		if err := opts.Decode.ParseDecodeAs(rule); err != nil {
			return usageError(fmt.Errorf("analyze: --%w", err))
		}
	}
	if cc.String("flow") != "" {
		opts.Wanted = sel.Match // what --flow leaves out is not diagnosed
	}
	graphs := cc.String("plots") != "" || cc.String("report") != ""
	if !graphs && format != "csv" {
		// Text and JSON show no series: a finished connection keeps only
		// its summary.
		opts.FinishedPoints, opts.NoSeries = -1, true
	}
	w := bufio.NewWriter(cc.App.Writer)
	var js *analyzer.JSONWriter
	var txt *analyzer.TextWriter
	var seen, shown int
	var write func(*analyzer.Connection) error
	switch {
	case graphs || format == "csv":
	case format == "json":
		js = analyzer.NewJSONWriter(w)
		write = js.Connection
	default:
		// Without a writable temporary directory (a read-only container)
		// the text is written at the end, from memory, as before.
		if txt, err = analyzer.NewTextWriter(w, ""); err == nil {
			write = txt.Connection
			defer txt.Discard() // when the analysis fails before Close
		}
	}
	if write != nil {
		// Connections are written as they finish (JSON to the output, text
		// to a spool behind the totals that head it), beside the analysis.
		opts.ConcurrentFinish = true
		opts.OnFinish = func(c *analyzer.Connection) {
			seen++
			if sel.Match(c) {
				shown++
				write(c)
			}
		}
	}
	res, err := analyzeWithProgress(path, opts)
	if err != nil {
		if errors.Is(err, pcapfile.ErrFormat) || errors.Is(err, os.ErrNotExist) || errors.Is(err, decode.ErrLinkType) {
			return usageError(fmt.Errorf("analyze: %w", err))
		}
		return fmt.Errorf("analyze: %w", err)
	}
	var conns []*analyzer.Connection
	if opts.OnFinish == nil {
		seen = len(res.Connections)
		conns = res.Select(sel)
		shown = len(conns)
	}
	if shown == 0 && cc.String("flow") != "" {
		return usageError(fmt.Errorf("analyze: --flow %q matches none of the %d connections in %s", cc.String("flow"), seen, hostfile.Name(path)))
	}
	switch {
	case js != nil:
		err = js.Close(res)
	case txt != nil:
		err = txt.Close(res, seen)
	case format == "json":
		err = analyzer.WriteJSON(w, res, conns)
	case format == "csv":
		err = analyzer.WriteCSV(w, conns)
	default:
		err = analyzer.WriteText(w, res, conns)
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil && graphs {
		err = applyPlotFlags(cc, res, conns)
	}
	return err
}

// analyzeWithProgress runs the analysis with a byte progress bar on stderr
// when stderr is a terminal and the file is large enough to wait for.
func analyzeWithProgress(path string, opts analyzer.Options) (*analyzer.Result, error) {
	if path == "-" {
		return analyzer.AnalyzeStream(os.Stdin, "stdin", opts)
	}
	var bar *progressbar.ProgressBar
	if fi, err := os.Stat(path); err == nil && fi.Size() > 32<<20 && term.IsTerminal(int(os.Stderr.Fd())) {
		bar = progressbar.NewOptions64(fi.Size(),
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription("analyzing "+hostfile.Name(path)),
			progressbar.OptionShowBytes(true),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(100_000_000))
		opts.Progress = func(n int64) { bar.Set64(n) }
	}
	res, err := analyzer.AnalyzeFile(path, opts)
	if bar != nil {
		bar.Finish()
		io.WriteString(os.Stderr, "")
	}
	return res, err
}

// captureInput refuses a capture path that is not a regular file (a FIFO
// would block the open, a device never end); "-" is standard input.
func captureInput(path string) error {
	if path == "-" {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return hostfile.PathError(path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file (%s): a capture is read from a file, or from standard input with -", hostfile.Name(path), fi.Mode().Type())
	}
	return nil
}
