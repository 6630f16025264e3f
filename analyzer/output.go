package analyzer

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"
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
	enc     jsonState
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

// jsonBatch is how much JSON a JSONWriter gathers before it writes: a
// short connection's JSON is a few KiB, and a write per connection was a
// system call per connection through a small bufio.Writer.
const jsonBatch = 64 << 10

// Connection writes one connection, on one line (at the latest when
// jsonBatch bytes have gathered, or at Close).
func (j *JSONWriter) Connection(c *Connection) error {
	j.start()
	mark := len(j.buf)
	b := j.buf
	if j.n > 0 {
		b = append(b, ',')
	}
	b = append(b, "\n    "...)
	b, err := j.enc.appendConnection(b, c)
	if err != nil {
		j.buf = b[:mark]
		return fmt.Errorf("json: connection %d: %w", c.Index, err)
	}
	j.buf = b
	j.n++
	if len(b) >= jsonBatch {
		j.flush()
	}
	return j.err
}

// flush writes the gathered connections.
func (j *JSONWriter) flush() {
	if j.err == nil && len(j.buf) > 0 {
		_, j.err = j.w.Write(j.buf)
	}
	j.buf = j.buf[:0]
}

// Close writes the capture's totals and ends the document.
func (j *JSONWriter) Close(r *Result) error {
	j.start()
	j.flush()
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
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 10, 64) }
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
				for k, p := range s.Points {
					rate := ""
					if s.Unit == "bytes/bucket" {
						rate = f(8 * s.Rate(k, end))
					}
					cw.Write([]string{strconv.Itoa(c.Index), name, s.Name, s.Unit,
						strconv.FormatFloat(p.T.Seconds(), 'f', 6, 64), strconv.FormatFloat(s.Bucket.Seconds(), 'f', 6, 64),
						f(p.First), f(p.Min), f(p.Max), f(p.Last), f(p.Sum), strconv.Itoa(p.N), rate})
				}
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteText writes a tcptrace -l style summary per connection followed by
// the diagnosis.
func WriteText(w io.Writer, r *Result, conns []*Connection) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "file: %s\n", r.File)
	fmt.Fprintf(b, "%d frames, %d TCP packets, %d connections (%d shown)", r.Frames, r.TCPPackets, len(r.Connections), len(conns))
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
	fmt.Fprintf(b, "   %-38s %s\n", "a->b:", "b->a:")
	row := func(label string, f func(s *DirectionStats) string) {
		fmt.Fprintf(b, "     %-20s %14s      %-20s %14s\n", label+":", f(a), label+":", f(z))
	}
	i := func(f func(s *DirectionStats) int64) func(s *DirectionStats) string {
		return func(s *DirectionStats) string { return strconv.FormatInt(f(s), 10) }
	}
	fl := func(unit string, f func(s *DirectionStats) float64) func(s *DirectionStats) string {
		return func(s *DirectionStats) string { return strconv.FormatFloat(f(s), 'f', 3, 64) + unit }
	}
	row("total packets", i(func(s *DirectionStats) int64 { return int64(s.Packets) }))
	row("pure acks sent", i(func(s *DirectionStats) int64 { return int64(s.PureAcks) }))
	row("sack pkts sent", i(func(s *DirectionStats) int64 { return int64(s.SACKPackets) }))
	row("unique bytes sent", i(func(s *DirectionStats) int64 { return s.UniqueBytes }))
	row("actual data pkts", i(func(s *DirectionStats) int64 { return int64(s.DataPackets) }))
	row("actual data bytes", i(func(s *DirectionStats) int64 { return s.DataBytes }))
	row("rexmt data pkts", i(func(s *DirectionStats) int64 { return int64(s.RetransmittedPackets) }))
	row("rexmt data bytes", i(func(s *DirectionStats) int64 { return s.RetransmittedBytes }))
	row("fast rexmt pkts", i(func(s *DirectionStats) int64 { return int64(s.FastRetransmissions) }))
	row("spurious rexmt pkts", i(func(s *DirectionStats) int64 { return int64(s.SpuriousRetransmissions) }))
	row("outoforder pkts", i(func(s *DirectionStats) int64 { return int64(s.OutOfOrderPackets) }))
	row("lost segments", i(func(s *DirectionStats) int64 { return int64(s.LostSegments) }))
	row("dup acks", i(func(s *DirectionStats) int64 { return int64(s.DupAcks) }))
	row("triple dup acks", i(func(s *DirectionStats) int64 { return int64(s.TripleDupAcks) }))
	row("zero win adv", i(func(s *DirectionStats) int64 { return int64(s.ZeroWindows) }))
	row("window full", i(func(s *DirectionStats) int64 { return int64(s.WindowFull) }))
	row("zwnd probe pkts", i(func(s *DirectionStats) int64 { return int64(s.ZeroWindowProbes) }))
	row("keep alives", i(func(s *DirectionStats) int64 { return int64(s.KeepAlives) }))
	row("mss requested", i(func(s *DirectionStats) int64 { return int64(s.MSS) }))
	row("adv wind scale", i(func(s *DirectionStats) int64 { return int64(s.WindowScale) }))
	row("max segm size", i(func(s *DirectionStats) int64 { return int64(s.MaxSegmentBytes) }))
	row("max win adv", i(func(s *DirectionStats) int64 { return s.MaxWindowBytes }))
	row("min win adv", i(func(s *DirectionStats) int64 { return s.MinWindowBytes }))
	row("max in flight", i(func(s *DirectionStats) int64 { return s.MaxInFlightBytes }))
	row("throughput", fl(" Bps", func(s *DirectionStats) float64 { return s.ThroughputBps / 8 }))
	row("data rate", fl(" Bps", func(s *DirectionStats) float64 { return s.DataRateBps / 8 }))
	row("transfer time", fl(" ms", func(s *DirectionStats) float64 { return s.TransferMs }))
	row("idle gaps", i(func(s *DirectionStats) int64 { return int64(s.IdleGaps) }))
	row("idle total", fl(" ms", func(s *DirectionStats) float64 { return s.IdleTotalMs }))
	row("captured near", func(s *DirectionStats) string { return s.CapturedNear })
	row("RTT samples", i(func(s *DirectionStats) int64 { return int64(s.RTTSamples) }))
	row("RTT min", fl(" ms", func(s *DirectionStats) float64 { return s.RTTMinMs }))
	row("RTT max", fl(" ms", func(s *DirectionStats) float64 { return s.RTTMaxMs }))
	row("RTT avg", fl(" ms", func(s *DirectionStats) float64 { return s.RTTAvgMs }))
	row("RTT stdev", fl(" ms", func(s *DirectionStats) float64 { return s.RTTStdevMs }))
	row("RTT p50", fl(" ms", func(s *DirectionStats) float64 { return s.RTTP50Ms }))
	row("RTT p99", fl(" ms", func(s *DirectionStats) float64 { return s.RTTP99Ms }))
	row("TS RTT samples", i(func(s *DirectionStats) int64 { return int64(s.TSRTTSamples) }))
	row("TS RTT p50", fl(" ms", func(s *DirectionStats) float64 { return s.TSRTTP50Ms }))
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
