package analyzer

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"github.com/wanlab/wanlab/units"
	"io"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/wanlab/wanlab/analyzer/pcapfile"
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
	if r.BadRecords == nil {
		r.BadRecords = []pcapfile.RecordWarning{}
	}
	if r.SkippedInterfaces == nil {
		r.SkippedInterfaces = []SkippedInterface{}
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
	// that need no quoting (csvField quotes a name that would), and
	// encoding/csv's string per field cost more than the analysis of a
	// bulk capture's packets.
	// Series are formatted in windows of about csvWindowPoints points,
	// the series of a window on all cores at once, and written in order.
	bw := bufio.NewWriterSize(w, 64<<10)
	var win []csvJob
	points := 0
	flush := func() error {
		formatCSVJobs(win, points)
		for i := range win {
			if _, err := bw.Write(win[i].out); err != nil {
				return err
			}
		}
		win, points = win[:0], 0
		return nil
	}
	for _, c := range conns {
		end := time.Duration(c.firstT + int64(c.Duration))
		for i, d := range c.Directions {
			name := "client->server"
			if i == 1 {
				name = "server->client"
			}
			if d.Series == nil {
				continue
			}
			for _, s := range d.Series.All() {
				if len(s.Points) == 0 {
					continue
				}
				if len(win) < cap(win) {
					// Reuse the window's buffers.
					win = win[:len(win)+1]
					win[len(win)-1] = csvJob{index: c.Index, dir: name, s: s, end: end, out: win[len(win)-1].out[:0]}
				} else {
					win = append(win, csvJob{index: c.Index, dir: name, s: s, end: end})
				}
				points += len(s.Points)
				if points >= csvWindowPoints {
					if err := flush(); err != nil {
						return err
					}
				}
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	return bw.Flush()
}

// csvWindowPoints is how many points WriteCSV formats before it writes;
// csvParallelPoints the fewest worth spreading over the cores.
const (
	csvWindowPoints   = 32768
	csvParallelPoints = 4096
)

// csvJob is one series to format as CSV rows into out.
type csvJob struct {
	index int
	dir   string
	s     *Series
	end   time.Duration
	out   []byte
}

// formatCSVJobs formats every job of a window of points points, on up to
// GOMAXPROCS goroutines when there is enough to share.
func formatCSVJobs(jobs []csvJob, points int) {
	workers := min(runtime.GOMAXPROCS(0), len(jobs))
	if workers < 2 || points < csvParallelPoints {
		for i := range jobs {
			jobs[i].format()
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(jobs) {
					return
				}
				jobs[i].format()
			}
		})
	}
	wg.Wait()
}

// format appends the job's rows to out.
func (j *csvJob) format() {
	s, row := j.s, j.out
	f := appendG10
	series, unit := csvField(s.Name), csvField(s.Unit)
	bucket := strconv.FormatFloat(s.Bucket.Seconds(), 'f', 6, 64)
	rate := s.Unit == "bytes/bucket"
	// Room for the rows at a typical width (names, then about 90 bytes
	// of numbers), so that appending does not copy them as it grows.
	row = slices.Grow(row, len(s.Points)*(len(j.dir)+len(series)+len(unit)+len(bucket)+96))
	for k := range s.Points {
		p := &s.Points[k]
		row = strconv.AppendInt(row, int64(j.index), 10)
		row = append(append(row, ','), j.dir...)
		row = append(append(row, ','), series...)
		row = append(append(row, ','), unit...)
		row = appendSeconds6(append(row, ','), p.T)
		row = append(append(row, ','), bucket...)
		row = f(append(row, ','), p.First)
		row = f(append(row, ','), p.Min)
		row = f(append(row, ','), p.Max)
		row = f(append(row, ','), p.Last)
		row = f(append(row, ','), p.Sum)
		row = strconv.AppendInt(append(row, ','), int64(p.N), 10)
		row = append(row, ',')
		if rate {
			row = f(row, 8*s.Rate(k, j.end))
		}
		row = append(row, '\n')
	}
	j.out = row
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

// textColumns is the heading of the two directions' columns.
var textColumns = fmt.Sprintf("   %-38s %s\n", "a->b:", "b->a:")

// textWriter writes a connection's text as fmt's verbs did (widths in
// runes, as fmt counts them), from appends into one scratch buffer.
type textWriter struct {
	b   *strings.Builder
	tmp [64]byte
}

func (w *textWriter) s(s string) { w.b.WriteString(s) }

func (w *textWriter) int(n int64) { w.b.Write(strconv.AppendInt(w.tmp[:0], n, 10)) }

func (w *textWriter) dur(d time.Duration) {
	w.b.Write(append(strconv.AppendFloat(w.tmp[:0], d.Seconds(), 'f', 6, 64), " s"...))
}

func (w *textWriter) addrPort(ap netip.AddrPort) {
	if !ap.IsValid() {
		w.s("invalid AddrPort") // AddrPort.String's word for the zero AddrPort
		return
	}
	w.b.Write(ap.AppendTo(w.tmp[:0]))
}

func (w *textWriter) pad(n int) {
	for ; n > 0; n-- {
		w.b.WriteByte(' ')
	}
}

// cell writes "%-20s %14s" of label+":" and v.
func (w *textWriter) cell(label string, v []byte) {
	w.s(label)
	w.b.WriteByte(':')
	w.pad(19 - utf8.RuneCountInString(label))
	w.b.WriteByte(' ')
	w.pad(14 - utf8.RuneCount(v))
	w.b.Write(v)
}

// row writes a row of both directions, "     %-20s %14s      %-20s %14s\n".
func (w *textWriter) row(label string, a, z []byte) {
	w.s("     ")
	w.cell(label, a)
	w.s("      ")
	w.cell(label, z)
	w.b.WriteByte('\n')
}

func (w *textWriter) rowInt(label string, a, z int64) {
	var bz [24]byte
	w.row(label, strconv.AppendInt(w.tmp[:0], a, 10), strconv.AppendInt(bz[:0], z, 10))
}

// rowFloat writes "%.3f" and unit of both.
func (w *textWriter) rowFloat(label, unit string, a, z float64) {
	var bz [48]byte
	w.row(label, append(strconv.AppendFloat(w.tmp[:0], a, 'f', 3, 64), unit...),
		append(strconv.AppendFloat(bz[:0], z, 'f', 3, 64), unit...))
}

func writeConnText(b *strings.Builder, c *Connection) {
	w := &textWriter{b: b}
	w.s("================================\nTCP connection ")
	w.int(int64(c.Index))
	w.s(":\n\thost a:        ")
	w.addrPort(c.Client)
	w.s(" (client)\n\thost b:        ")
	w.addrPort(c.Server)
	w.s(" (server)\n\thandshake:     ")
	if c.HandshakeSeen {
		w.s("yes")
	} else {
		w.s("no")
	}
	if len(c.Encapsulation) > 0 {
		w.s("\n\tcarried in:    ")
		w.s(strings.Join(c.Encapsulation, ", "))
	}
	w.s("\n\tstate:         ")
	w.s(c.State)
	w.s("\n\tfirst packet:  ")
	w.dur(c.Start)
	w.s("\n\telapsed time:  ")
	w.dur(c.Duration)
	w.s("\n")
	if c.hsRTT > 0 {
		w.s("\thandshake RTT: ")
		w.b.Write(strconv.AppendFloat(w.tmp[:0], float64(c.hsRTT)/1e6, 'f', 3, 64))
		w.s(" ms\n")
	}
	a, z := &c.Directions[0].DirectionStats, &c.Directions[1].DirectionStats
	w.s(textColumns)
	w.rowInt("total packets", int64(a.Packets), int64(z.Packets))
	w.rowInt("pure acks sent", int64(a.PureAcks), int64(z.PureAcks))
	w.rowInt("sack pkts sent", int64(a.SACKPackets), int64(z.SACKPackets))
	w.rowInt("unique bytes sent", a.UniqueBytes, z.UniqueBytes)
	w.rowInt("actual data pkts", int64(a.DataPackets), int64(z.DataPackets))
	w.rowInt("actual data bytes", a.DataBytes, z.DataBytes)
	w.rowInt("rexmt data pkts", int64(a.RetransmittedPackets), int64(z.RetransmittedPackets))
	w.rowInt("rexmt data bytes", a.RetransmittedBytes, z.RetransmittedBytes)
	w.rowInt("fast rexmt pkts", int64(a.FastRetransmissions), int64(z.FastRetransmissions))
	w.rowInt("spurious rexmt pkts", int64(a.SpuriousRetransmissions), int64(z.SpuriousRetransmissions))
	w.rowInt("outoforder pkts", int64(a.OutOfOrderPackets), int64(z.OutOfOrderPackets))
	w.rowInt("lost segments", int64(a.LostSegments), int64(z.LostSegments))
	w.rowInt("dup acks", int64(a.DupAcks), int64(z.DupAcks))
	w.rowInt("triple dup acks", int64(a.TripleDupAcks), int64(z.TripleDupAcks))
	w.rowInt("zero win adv", int64(a.ZeroWindows), int64(z.ZeroWindows))
	w.rowInt("window full", int64(a.WindowFull), int64(z.WindowFull))
	w.rowInt("zwnd probe pkts", int64(a.ZeroWindowProbes), int64(z.ZeroWindowProbes))
	w.rowInt("keep alives", int64(a.KeepAlives), int64(z.KeepAlives))
	w.rowInt("mss requested", int64(a.MSS), int64(z.MSS))
	w.rowInt("adv wind scale", int64(a.WindowScale), int64(z.WindowScale))
	w.rowInt("max segm size", int64(a.MaxSegmentBytes), int64(z.MaxSegmentBytes))
	w.rowInt("max win adv", a.MaxWindowBytes, z.MaxWindowBytes)
	w.rowInt("min win adv", a.MinWindowBytes, z.MinWindowBytes)
	w.rowInt("max in flight", a.MaxInFlightBytes, z.MaxInFlightBytes)
	w.rowFloat("throughput", " Bps", a.ThroughputBps/8, z.ThroughputBps/8)
	w.rowFloat("data rate", " Bps", a.DataRateBps/8, z.DataRateBps/8)
	w.rowFloat("transfer time", " ms", a.TransferMs, z.TransferMs)
	w.rowInt("idle gaps", int64(a.IdleGaps), int64(z.IdleGaps))
	w.rowFloat("idle total", " ms", a.IdleTotalMs, z.IdleTotalMs)
	w.row("captured near", []byte(a.CapturedNear), []byte(z.CapturedNear))
	w.rowInt("RTT samples", int64(a.RTTSamples), int64(z.RTTSamples))
	w.rowFloat("RTT min", " ms", a.RTTMinMs, z.RTTMinMs)
	w.rowFloat("RTT max", " ms", a.RTTMaxMs, z.RTTMaxMs)
	w.rowFloat("RTT avg", " ms", a.RTTAvgMs, z.RTTAvgMs)
	w.rowFloat("RTT stdev", " ms", a.RTTStdevMs, z.RTTStdevMs)
	w.rowFloat("RTT p50", " ms", a.RTTP50Ms, z.RTTP50Ms)
	w.rowFloat("RTT p99", " ms", a.RTTP99Ms, z.RTTP99Ms)
	w.rowInt("TS RTT samples", int64(a.TSRTTSamples), int64(z.TSRTTSamples))
	w.rowFloat("TS RTT p50", " ms", a.TSRTTP50Ms, z.TSRTTP50Ms)
	for _, d := range c.Directions {
		dg := d.Diagnosis
		if dg == nil {
			continue
		}
		w.s("diagnosis ")
		w.s(dg.Direction)
		w.s(": ")
		w.s(dg.Limit)
		if dg.RateBps > 0 {
			w.s(" at ")
			w.b.Write(appendMB(w.tmp[:0], dg.RateBps/8))
		}
		if dg.PredictedBps > 0 {
			w.s(", predicted after the change ")
			w.b.Write(appendMB(w.tmp[:0], dg.PredictedBps/8))
		}
		w.s("\n")
		if len(dg.Limits) > 0 {
			w.s("  periods:  ")
			for i, p := range dg.Limits {
				if i > 0 {
					w.s(", ")
				}
				w.s(p.Limit)
				w.s(" ")
				w.b.Write(units.AppendSig(w.tmp[:0], p.StartMs, 3))
				w.s("-")
				w.b.Write(units.AppendSig(w.tmp[:0], p.EndMs, 3))
				w.s(" ms (")
				w.int(int64(p.Rounds))
				w.s(" round trips)")
			}
			w.s("\n")
		}
		for _, e := range dg.Evidence {
			w.s("  evidence: ")
			w.s(e)
			w.s("\n")
		}
		for _, a := range dg.Advice {
			w.s("  advice:   ")
			w.s(a)
			w.s("\n")
		}
	}
}
