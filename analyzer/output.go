package analyzer

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// FlowSelector picks connections: a comma-separated list of terms, any of
// which may match. A term is a connection index ("3"), an address ("10.0.0.1"),
// an address and port ("10.0.0.1:80", "[fd00::1]:443") or a port (":80");
// addresses and ports match either endpoint.
type FlowSelector struct {
	terms []flowTerm
}

type flowTerm struct {
	index int
	addr  netip.Addr
	port  uint16
}

// ParseFlowSelector parses s; the empty string selects everything.
func ParseFlowSelector(s string) (FlowSelector, error) {
	var fs FlowSelector
	for _, tok := range strings.Split(s, ",") {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			continue
		}
		var t flowTerm
		if n, err := strconv.Atoi(tok); err == nil {
			if n < 1 {
				return fs, fmt.Errorf("flow %q: connection numbers start at 1", tok)
			}
			t.index = n
		} else if strings.HasPrefix(tok, ":") {
			p, err := strconv.ParseUint(tok[1:], 10, 16)
			if err != nil || p == 0 {
				return fs, fmt.Errorf("flow %q: bad port", tok)
			}
			t.port = uint16(p)
		} else if ap, err := netip.ParseAddrPort(tok); err == nil {
			t.addr, t.port = ap.Addr().Unmap(), ap.Port()
		} else if a, err := netip.ParseAddr(strings.Trim(tok, "[]")); err == nil {
			t.addr = a.Unmap()
		} else {
			return fs, fmt.Errorf("flow %q: want a connection number, ADDR, ADDR:PORT or :PORT", tok)
		}
		fs.terms = append(fs.terms, t)
	}
	return fs, nil
}

// Match reports whether c is selected.
func (fs FlowSelector) Match(c *Connection) bool {
	if len(fs.terms) == 0 {
		return true
	}
	for _, t := range fs.terms {
		if t.index != 0 {
			if c.Index == t.index {
				return true
			}
			continue
		}
		for _, ep := range []netip.AddrPort{c.Client, c.Server} {
			if (!t.addr.IsValid() || ep.Addr().Unmap() == t.addr) && (t.port == 0 || ep.Port() == t.port) {
				return true
			}
		}
	}
	return false
}

// Select returns the selected connections.
func (r *Result) Select(fs FlowSelector) []*Connection {
	var out []*Connection
	for _, c := range r.Connections {
		if fs.Match(c) {
			out = append(out, c)
		}
	}
	return out
}

// WriteJSON writes the result (without series) as documented in SCHEMA.md.
func WriteJSON(w io.Writer, r *Result, conns []*Connection) error {
	j := NewJSONWriter(w)
	for _, c := range conns {
		if err := j.Connection(c); err != nil {
			return err
		}
	}
	return j.Close(r)
}

// JSONWriter writes the JSON of SCHEMA.md one connection at a time (as
// Options.OnFinish hands them over), then the capture's totals, so that
// the output of a capture with any number of connections never has to be
// held in memory.
type JSONWriter struct {
	w       io.Writer
	started bool
	n       int
	err     error
	buf     []byte
}

// NewJSONWriter returns a JSONWriter; nothing is written before the
// first Connection or Close.
func NewJSONWriter(w io.Writer) *JSONWriter { return &JSONWriter{w: w} }

func (j *JSONWriter) write(s string) {
	if j.err == nil {
		_, j.err = io.WriteString(j.w, s)
	}
}

func (j *JSONWriter) start() {
	if !j.started {
		j.started = true
		j.write("{\n  \"schema_version\": 1,\n  \"connections\": [")
	}
}

// Connection writes one connection, on one line.
func (j *JSONWriter) Connection(c *Connection) error {
	j.start()
	b := j.buf[:0]
	if j.n > 0 {
		b = append(b, ',')
	}
	b = append(b, "\n    "...)
	b, err := appendConnectionJSON(b, c)
	if err != nil {
		return fmt.Errorf("json: connection %d: %w", c.Index, err)
	}
	j.buf = b
	if j.err == nil {
		_, j.err = j.w.Write(b)
	}
	j.n++
	return j.err
}

// Close writes the capture's totals and ends the document.
func (j *JSONWriter) Close(r *Result) error {
	j.start()
	type totals struct {
		*Result
		Connections []*Connection `json:"connections,omitempty"` // shadows Result's: written above
	}
	if r.Warnings == nil {
		r.Warnings = []string{}
	}
	b, err := json.MarshalIndent(totals{Result: r}, "", "  ")
	if err != nil {
		return fmt.Errorf("json: %w", err)
	}
	if j.n > 0 {
		j.write("\n  ")
	}
	j.write("],\n")
	j.write(strings.TrimPrefix(string(b), "{\n"))
	j.write("\n")
	return j.err
}

// WriteCSV writes every series of the selected connections in long form:
// one row per point.
func WriteCSV(w io.Writer, conns []*Connection) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"connection", "direction", "series", "unit", "t_s", "bucket_s", "first", "min", "max", "last", "sum", "n", "rate_bps"})
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	// The rows are appended by hand: their fields are numbers and names
	// that need no quoting (csvSafe), and encoding/csv's string per
	// field cost more than the analysis of a bulk capture's packets.
	bw := bufio.NewWriterSize(w, 64<<10)
	var row []byte
	f := func(b []byte, v float64) []byte { return strconv.AppendFloat(b, v, 'g', 10, 64) }
	for _, c := range conns {
		for i, d := range c.Directions {
			name := "client->server"
			if i == 1 {
				name = "server->client"
			}
			if d.Series == nil {
				continue
			}
			end := time.Duration(c.firstT + int64(c.Duration))
			for _, s := range d.Series.All() {
				series, unit := csvField(s.Name), csvField(s.Unit)
				bucket := strconv.FormatFloat(s.Bucket.Seconds(), 'f', 6, 64)
				for k, p := range s.Points {
					row = strconv.AppendInt(row[:0], int64(c.Index), 10)
					row = append(append(row, ','), name...)
					row = append(append(row, ','), series...)
					row = append(append(row, ','), unit...)
					row = strconv.AppendFloat(append(row, ','), p.T.Seconds(), 'f', 6, 64)
					row = append(append(row, ','), bucket...)
					row = f(append(row, ','), p.First)
					row = f(append(row, ','), p.Min)
					row = f(append(row, ','), p.Max)
					row = f(append(row, ','), p.Last)
					row = f(append(row, ','), p.Sum)
					row = strconv.AppendInt(append(row, ','), int64(p.N), 10)
					row = append(row, ',')
					if s.Unit == "bytes/bucket" {
						row = f(row, 8*s.Rate(k, end))
					}
					row = append(row, '\n')
					if _, err := bw.Write(row); err != nil {
						return err
					}
				}
			}
		}
	}
	return bw.Flush()
}

// csvField is name as encoding/csv writes it (quoted if it must be).
func csvField(name string) string {
	if !strings.ContainsAny(name, ",\"\r\n") && !strings.HasPrefix(name, " ") && !strings.HasPrefix(name, "\t") && name != `\.` {
		return name
	}
	var b strings.Builder
	cw := csv.NewWriter(&b)
	cw.Write([]string{name})
	cw.Flush()
	return strings.TrimSuffix(b.String(), "\n")
}

// WriteText writes a tcptrace -l style summary per connection followed by
// the diagnosis.
func WriteText(w io.Writer, r *Result, conns []*Connection) error {
	b := &strings.Builder{}
	writeTextHeader(b, r, len(r.Connections), len(conns))
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	// A connection at a time: the output of a busy server's capture is
	// tens of MB, and never held whole.
	for _, c := range conns {
		b.Reset()
		writeConnText(b, c)
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	return nil
}

// writeTextHeader writes the capture's totals that head the text output:
// total connections in the capture, shown of them in the output.
func writeTextHeader(b *strings.Builder, r *Result, total, shown int) {
	fmt.Fprintf(b, "file: %s\n", r.File)
	fmt.Fprintf(b, "%d frames, %d TCP packets, %d connections (%d shown)", r.Frames, r.TCPPackets, total, shown)
	if r.Frames > 0 {
		fmt.Fprintf(b, ", %s of capture", fmtDur(r.End.Sub(r.Start)))
	}
	b.WriteString("\n")
	if r.NotTCP > 0 {
		fmt.Fprintf(b, "%d frames were not TCP\n", r.NotTCP)
	}
	for _, wn := range r.Warnings {
		fmt.Fprintf(b, "warning: %s\n", wn)
	}
}

func fmtDur(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 6, 64) + " s"
}

func writeConnText(b *strings.Builder, c *Connection) {
	b.WriteString("================================\n")
	fmt.Fprintf(b, "TCP connection %d:\n", c.Index)
	fmt.Fprintf(b, "\thost a:        %s (client)\n", c.Client)
	fmt.Fprintf(b, "\thost b:        %s (server)\n", c.Server)
	hs := "no"
	if c.HandshakeSeen {
		hs = "yes"
	}
	fmt.Fprintf(b, "\thandshake:     %s\n", hs)
	fmt.Fprintf(b, "\tstate:         %s\n", c.State)
	fmt.Fprintf(b, "\tfirst packet:  %s\n", fmtDur(c.Start))
	fmt.Fprintf(b, "\telapsed time:  %s\n", fmtDur(c.Duration))
	if c.hsRTT > 0 {
		fmt.Fprintf(b, "\thandshake RTT: %.3f ms\n", float64(c.hsRTT)/1e6)
	}
	a, z := &c.Directions[0].DirectionStats, &c.Directions[1].DirectionStats
	b.WriteString("   a->b:                                  b->a:\n")
	var va, vz [40]byte
	for i := range textRows {
		r := &textRows[i]
		// "     %-20s %14s      %-20s %14s\n" without fmt's cost, which
		// is most of the text output's time on a capture of many
		// connections.
		b.WriteString("     ")
		padRight(b, r.label, 20)
		b.WriteByte(' ')
		padLeft(b, r.value(va[:0], a), 14)
		b.WriteString("      ")
		padRight(b, r.label, 20)
		b.WriteByte(' ')
		padLeft(b, r.value(vz[:0], z), 14)
		b.WriteByte('\n')
	}
	for _, d := range c.Directions {
		dg := d.Diagnosis
		if dg == nil {
			continue
		}
		fmt.Fprintf(b, "diagnosis %s: %s", dg.Direction, dg.Limit)
		if dg.RateBps > 0 {
			fmt.Fprintf(b, " at %s", mb(dg.RateBps/8))
		}
		if dg.PredictedBps > 0 {
			fmt.Fprintf(b, ", predicted after the change %s", mb(dg.PredictedBps/8))
		}
		b.WriteString("\n")
		for _, e := range dg.Evidence {
			fmt.Fprintf(b, "  evidence: %s\n", e)
		}
		for _, a := range dg.Advice {
			fmt.Fprintf(b, "  advice:   %s\n", a)
		}
	}
}

// textRow is one line of the per-direction table of the text output: the
// label (with its colon) and the value's formatter.
type textRow struct {
	label string
	value func(b []byte, s *DirectionStats) []byte
}

func intRow(label string, f func(*DirectionStats) int64) textRow {
	return textRow{label + ":", func(b []byte, s *DirectionStats) []byte { return strconv.AppendInt(b, f(s), 10) }}
}

func floatRow(label, unit string, f func(*DirectionStats) float64) textRow {
	return textRow{label + ":", func(b []byte, s *DirectionStats) []byte {
		return append(strconv.AppendFloat(b, f(s), 'f', 3, 64), unit...)
	}}
}

// textRows are the rows of tcptrace -l's table that the text output prints.
var textRows = [...]textRow{
	intRow("total packets", func(s *DirectionStats) int64 { return int64(s.Packets) }),
	intRow("pure acks sent", func(s *DirectionStats) int64 { return int64(s.PureAcks) }),
	intRow("sack pkts sent", func(s *DirectionStats) int64 { return int64(s.SACKPackets) }),
	intRow("unique bytes sent", func(s *DirectionStats) int64 { return s.UniqueBytes }),
	intRow("actual data pkts", func(s *DirectionStats) int64 { return int64(s.DataPackets) }),
	intRow("actual data bytes", func(s *DirectionStats) int64 { return s.DataBytes }),
	intRow("rexmt data pkts", func(s *DirectionStats) int64 { return int64(s.RetransmittedPackets) }),
	intRow("rexmt data bytes", func(s *DirectionStats) int64 { return s.RetransmittedBytes }),
	intRow("fast rexmt pkts", func(s *DirectionStats) int64 { return int64(s.FastRetransmissions) }),
	intRow("spurious rexmt pkts", func(s *DirectionStats) int64 { return int64(s.SpuriousRetransmissions) }),
	intRow("outoforder pkts", func(s *DirectionStats) int64 { return int64(s.OutOfOrderPackets) }),
	intRow("lost segments", func(s *DirectionStats) int64 { return int64(s.LostSegments) }),
	intRow("dup acks", func(s *DirectionStats) int64 { return int64(s.DupAcks) }),
	intRow("triple dup acks", func(s *DirectionStats) int64 { return int64(s.TripleDupAcks) }),
	intRow("zero win adv", func(s *DirectionStats) int64 { return int64(s.ZeroWindows) }),
	intRow("window full", func(s *DirectionStats) int64 { return int64(s.WindowFull) }),
	intRow("zwnd probe pkts", func(s *DirectionStats) int64 { return int64(s.ZeroWindowProbes) }),
	intRow("keep alives", func(s *DirectionStats) int64 { return int64(s.KeepAlives) }),
	intRow("mss requested", func(s *DirectionStats) int64 { return int64(s.MSS) }),
	intRow("adv wind scale", func(s *DirectionStats) int64 { return int64(s.WindowScale) }),
	intRow("max segm size", func(s *DirectionStats) int64 { return int64(s.MaxSegmentBytes) }),
	intRow("max win adv", func(s *DirectionStats) int64 { return s.MaxWindowBytes }),
	intRow("min win adv", func(s *DirectionStats) int64 { return s.MinWindowBytes }),
	intRow("max in flight", func(s *DirectionStats) int64 { return s.MaxInFlightBytes }),
	floatRow("throughput", " Bps", func(s *DirectionStats) float64 { return s.ThroughputBps / 8 }),
	floatRow("data rate", " Bps", func(s *DirectionStats) float64 { return s.DataRateBps / 8 }),
	floatRow("transfer time", " ms", func(s *DirectionStats) float64 { return s.TransferMs }),
	intRow("idle gaps", func(s *DirectionStats) int64 { return int64(s.IdleGaps) }),
	floatRow("idle total", " ms", func(s *DirectionStats) float64 { return s.IdleTotalMs }),
	{"captured near:", func(b []byte, s *DirectionStats) []byte { return append(b, s.CapturedNear...) }},
	intRow("RTT samples", func(s *DirectionStats) int64 { return int64(s.RTTSamples) }),
	floatRow("RTT min", " ms", func(s *DirectionStats) float64 { return s.RTTMinMs }),
	floatRow("RTT max", " ms", func(s *DirectionStats) float64 { return s.RTTMaxMs }),
	floatRow("RTT avg", " ms", func(s *DirectionStats) float64 { return s.RTTAvgMs }),
	floatRow("RTT stdev", " ms", func(s *DirectionStats) float64 { return s.RTTStdevMs }),
	floatRow("RTT p50", " ms", func(s *DirectionStats) float64 { return s.RTTP50Ms }),
	floatRow("RTT p99", " ms", func(s *DirectionStats) float64 { return s.RTTP99Ms }),
	intRow("TS RTT samples", func(s *DirectionStats) int64 { return int64(s.TSRTTSamples) }),
	floatRow("TS RTT p50", " ms", func(s *DirectionStats) float64 { return s.TSRTTP50Ms }),
}

// padRight writes s padded with spaces to width runes, as fmt's %-Ns.
func padRight(b *strings.Builder, s string, width int) {
	b.WriteString(s)
	for n := utf8.RuneCountInString(s); n < width; n++ {
		b.WriteByte(' ')
	}
}

// padLeft writes v right-aligned in width runes, as fmt's %Ns.
func padLeft(b *strings.Builder, v []byte, width int) {
	for n := utf8.RuneCount(v); n < width; n++ {
		b.WriteByte(' ')
	}
	b.Write(v)
}
