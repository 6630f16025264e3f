// Package analyzer reads TCP captures and explains each connection: per
// direction counters classified as Wireshark does, RTT samples by Karn's
// rule and from TCP timestamps, windows, bytes in flight, throughput and
// decimated time series for graphs, and a diagnosis of what limited each
// transfer with advice that names the setting to change.
//
// Memory grows with the connections still open, never with the number of
// packets: statistics are streaming (log-bucket histograms for quantiles),
// series are decimated (see Series), and a connection that has finished
// (closed or reset and then silent, or idle) keeps only its summary and
// its series at reduced resolution (Options.FinishedPoints), or leaves
// altogether through Options.OnFinish.
package analyzer

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/wanlab/wanlab/analyzer/decode"
	"github.com/wanlab/wanlab/analyzer/pcapfile"
	"github.com/wanlab/wanlab/internal/hostfile"
)

// Options tune an analysis. The zero value is usable.
type Options struct {
	// MaxPoints bounds every time series (default 4096, minimum 16).
	MaxPoints int
	// IdleTimeout, when set, makes a packet arriving after this much
	// silence on a 4-tuple start a new connection. By default (0) only a
	// new SYN does, as Wireshark defines a stream: a connection silent
	// for any time goes on, and the segments lost in the silence show at
	// the join.
	IdleTimeout time.Duration
	// OnPacket, when set, is called for every TCP packet with its
	// per-packet analysis (agreement tests and debugging). The PacketInfo
	// is reused: copy what you keep.
	OnPacket func(*PacketInfo)
	// Progress, when set, is called every 64k frames with the bytes of the
	// file consumed so far.
	Progress func(bytesRead int64)
	// OnFinish, when set, receives each connection, in order of Index, as
	// soon as it and every connection before it have finished: closed or
	// reset and then silent for closedLinger, idle for IdleTimeout, or at
	// the end of the capture. The Result then lists no connections, so
	// memory stays bounded by the connections still open.
	OnFinish func(*Connection)
	// ConcurrentFinish runs OnFinish, and the diagnosis of the connection
	// it receives, on a goroutine of its own, so that writing finished
	// connections (JSON) overlaps the analysis of the rest. The calls stay
	// one at a time and in order; Finish returns after the last. A few
	// batches of connections wait for it at most: the analysis waits when
	// they are full.
	ConcurrentFinish bool
	// Wanted, when set, says which connections the caller will show
	// (`analyze --flow`): the others are not diagnosed, their Diagnosis
	// stays nil. It may be called on the finisher's goroutine.
	Wanted func(*Connection) bool
	// NoSeries: record no time series (outputs that show none); every
	// Direction's Series is then empty.
	NoSeries bool
	// Decode says which UDP ports carry tunnels beyond the defaults
	// (`analyze --decode-as`); nil decodes the defaults.
	Decode *decode.Config
	// WindowRatio is the share of a receive buffer the receiver's kernel
	// offers as window, for the diagnosis's advice and predictions
	// (`wanlab experiment` passes what the tuner measured); nil assumes
	// DefaultWindowRatio, which the diagnosis names.
	WindowRatio *WindowRatio
	// FinishedPoints is the point budget of each series of a connection
	// that finished before the end of the capture (default 64): it keeps
	// its summary and its series at that resolution. Negative drops the
	// series of finished connections, for outputs that show none.
	FinishedPoints int
	// MaxOpen is the budget of connections held open at once (0:
	// DefaultMaxOpen): past it, those silent longest are finished early
	// (Result.FinishedEarly, and a warning naming the budget).
	MaxOpen int
}

// maxTracked and idleRetire bound the connections held: past maxTracked
// tracked (or waiting for OnFinish), an open connection silent for
// idleRetire is retired.
const (
	maxTracked = 1 << 14
	idleRetire = 5 * time.Minute
)

// closedLinger is how long a closed or reset connection stays tracked
// after its last packet, for retransmitted FINs and late ACKs (Linux
// retransmits a FIN 0.2 and 0.6 s after the first at its minimum RTO).
const closedLinger = time.Second

// sweepEvery is the capture time between two searches for finished
// connections.
const sweepEvery = int64(250 * time.Millisecond)

// windowRatio is the ratio the diagnosis uses.
func (o *Options) windowRatio() WindowRatio {
	if o.WindowRatio != nil && o.WindowRatio.Ratio > 0 && o.WindowRatio.Ratio <= 1 {
		return *o.WindowRatio
	}
	return DefaultWindowRatio
}

func (o *Options) normalize() {
	if o.MaxPoints == 0 {
		o.MaxPoints = 4096
	}
	o.MaxPoints = max(o.MaxPoints, 16)
	if o.FinishedPoints == 0 {
		o.FinishedPoints = 64
	}
	if o.MaxOpen <= 0 {
		o.MaxOpen = DefaultMaxOpen
	}
}

// PacketFlags are Wireshark's tcp.analysis flags for one segment.
type PacketFlags uint32

// Per-packet analysis flags, named after Wireshark's tcp.analysis fields.
const (
	Retransmission         PacketFlags = 1 << iota // tcp.analysis.retransmission
	FastRetransmission                             // tcp.analysis.fast_retransmission
	SpuriousRetransmission                         // tcp.analysis.spurious_retransmission
	OutOfOrder                                     // tcp.analysis.out_of_order
	LostSegment                                    // tcp.analysis.lost_segment
	AckedUnseen                                    // tcp.analysis.ack_lost_segment
	DupAck                                         // tcp.analysis.duplicate_ack
	ZeroWindow                                     // tcp.analysis.zero_window
	ZeroWindowProbe                                // tcp.analysis.zero_window_probe
	ZeroWindowProbeAck                             // tcp.analysis.zero_window_probe_ack
	WindowFull                                     // tcp.analysis.window_full
	WindowUpdate                                   // tcp.analysis.window_update
	KeepAlive                                      // tcp.analysis.keep_alive
	KeepAliveAck                                   // tcp.analysis.keep_alive_ack
	ReusedPorts                                    // tcp.analysis.reused_ports: a new SYN on a 4-tuple seen before
)

// AnyRetransmission is the union Wireshark's tcp.analysis.retransmission
// field shows: it marks fast and spurious retransmissions as well.
const AnyRetransmission = Retransmission | FastRetransmission | SpuriousRetransmission

// PacketInfo is the per-packet analysis handed to Options.OnPacket.
type PacketInfo struct {
	Frame      int // 1-based frame number in the file, as tshark counts
	Conn       *Connection
	Dir        int // 0: client to server, 1: server to client
	Flags      PacketFlags
	PayloadLen int
	// AckRTT is Wireshark's tcp.analysis.ack_rtt: time since the first
	// transmission of the segment this ACK exactly covers (-1: none).
	AckRTT time.Duration
	// KarnRTT is the sample this analyzer keeps (tcptrace's rtt_ackin):
	// AckRTT unless that segment was retransmitted (-1: none).
	KarnRTT time.Duration
	// InFlight is the data of this direction unacknowledged after this
	// packet (-1 if unknown).
	InFlight int64
}

// Result is the analysis of one capture.
type Result struct {
	File  string    `json:"file"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Frames counts every record; TCPPackets those that decoded as TCP.
	Frames     int `json:"frames"`
	TCPPackets int `json:"tcp_packets"`
	// Skipped frames by reason.
	NotTCP      int `json:"not_tcp"`
	Truncated   int `json:"truncated_headers"`
	Corrupt     int `json:"corrupt_headers"`
	UnknownLink int `json:"unknown_link_type"`
	// TimeBackwards counts frames the reordering window could not place:
	// older than a frame already analyzed (see AddFrom); they are analyzed
	// at that frame's time.
	TimeBackwards int `json:"timestamps_backwards"`
	// MalformedLength counts TCP packets whose IP header stated more
	// bytes than the frame held on the wire (not a snap length cut):
	// they are analyzed with the payload that was there.
	MalformedLength int `json:"malformed_length"`
	// DuplicateFrames counts second copies of a packet (same IPv4 ID,
	// addresses, ports, sequence, ACK, flags and length) that only a
	// capture can make: on another interface within 200 ms (two
	// interfaces of one router, a tunnel's underlay and overlay), or on
	// the same one within 1 ms, sooner than any retransmission. They are
	// left out of the analysis (Wireshark counts them as
	// retransmissions or duplicate ACKs).
	DuplicateFrames int `json:"duplicate_frames"`
	// BadRecords lists the record headers of a classic pcap file that
	// were impossible (also in Warnings, as text); empty for none.
	BadRecords []pcapfile.RecordWarning `json:"bad_records"`
	// SkippedInterfaces lists the pcapng interfaces of a link type the
	// decoder does not know, with the frames skipped on each.
	SkippedInterfaces []SkippedInterface `json:"skipped_interfaces"`
	Warnings          []string           `json:"warnings"`
	// ReadStopped says why the reader gave up before the end of the file
	// (it ends mid-record, a gzip stream is cut, a record or block could
	// not be parsed): the frames before it were analyzed, the rest not.
	// Also in Warnings; empty when the whole file was read.
	ReadStopped string `json:"read_stopped,omitempty"`
	// FinishedEarly counts the connections finished before their end
	// because more than Options.MaxOpen were open at once (also in
	// Warnings, with the budget and the flag that raises it).
	FinishedEarly int           `json:"connections_finished_early,omitempty"`
	Connections   []*Connection `json:"connections"`
}

// SkippedInterface is a capture interface whose link type the decoder does
// not know: its frames were counted and skipped.
type SkippedInterface struct {
	Interface int    `json:"interface"`
	LinkType  int    `json:"link_type"`
	Name      string `json:"link_type_name"`
	Frames    int    `json:"frames"`
}

// Analyzer is the streaming form: feed frames with Add, then call Finish.
type Analyzer struct {
	opts  Options
	res   *Result
	conns map[connKey]*Connection
	pkt   decode.Packet
	info  PacketInfo
	start int64 // ns since epoch of the first frame
	last  int64 // ns relative to start of the latest frame
	// own is the frame's own capture time relative to start, which is
	// last unless its timestamp went back (last is then the frame's
	// before): Wireshark's ack_rtt is timed by the frames' own times
	// (PacketInfo.AckRTT); the samples and series by the analysis time.
	own    int64
	began  bool
	recent [2]recentTuple
	// scratch takes the ACK-side samples of directions without data.
	scratch DirectionSeries
	empty   *DirectionSeries
	nconns  int
	// live lists the tracked connections, unfinished lists those not yet
	// handed to OnFinish, both in order of Index.
	live       []*Connection
	unfinished []*Connection
	lastSweep  int64
	// Merging interfaces: a queue per interface, the frames buffered in
	// all of them, and the capture time of the latest frame analyzed.
	ifq      []frameQueue
	buffered int
	lastNs   int64
	frame    int // file frame number of the packet being analyzed
	dups     dupFilter
	retired  retiredTuples
	// freeDirs holds the per-packet state of retired connections, reset,
	// for new ones.
	freeDirs []*[2]dirAnalysis
	fin      *finisher // ConcurrentFinish's goroutine, once started
}

// maxFreeDirs bounds the pool of reusable per-packet states.
const maxFreeDirs = 1024

// New returns an Analyzer.
func New(opts Options) *Analyzer {
	opts.normalize()
	// lastNs starts past every time, so the first frame takes clockOther.
	return &Analyzer{opts: opts, res: &Result{}, conns: make(map[connKey]*Connection), lastNs: math.MaxInt64}
}

// AnalyzeFile analyzes the capture at path. A file that ends mid-record
// yields the analysis of what came before it plus a warning.
func AnalyzeFile(path string, opts Options) (*Result, error) {
	r, c, err := pcapfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	res, err := AnalyzeReader(r, opts)
	if res != nil {
		res.File = hostfile.Name(path)
	}
	return res, err
}

// AnalyzeStream analyzes a capture read from r as it arrives (a pipe from
// `tcpdump -w -`, a socket); name appears in messages.
func AnalyzeStream(r io.Reader, name string, opts Options) (*Result, error) {
	pr, err := pcapfile.NewReader(r, name)
	if err != nil {
		return nil, err
	}
	res, err := AnalyzeReader(pr, opts)
	if res != nil {
		res.File = hostfile.Name(name)
	}
	return res, err
}

// Add analyzes one frame of a single-interface capture. data is only read
// during the call.
func (a *Analyzer) Add(link decode.LinkType, data []byte, wireLen int, ts time.Time) {
	a.AddFrom(0, link, data, wireLen, ts)
}

// ExpectInterfaces tells the analyzer how many capture interfaces the
// file has (pcapng describes them before their frames), so that frames of
// every interface are merged in timestamp order from the first one.
func (a *Analyzer) ExpectInterfaces(n int) {
	if n > len(a.ifq) {
		a.ifq = append(a.ifq, make([]frameQueue, n-len(a.ifq))...)
	}
}

// AddFrom analyzes one frame captured on interface iface (the pcapng
// interface index; 0 for pcap). data is only read during the call.
//
// Each interface's frames come in time order, but a multi-interface file
// interleaves them in batches (dumpcap writes each interface's buffer as
// it fills). Frames are therefore merged across interfaces in timestamp
// order, as reordercap sorts them, through a window of at most
// reorderWindow frames; a frame older than one already analyzed (the
// window was too short, or one interface's clock went backwards) is
// analyzed at the latest time and counted in TimeBackwards.
func (a *Analyzer) AddFrom(iface int, link decode.LinkType, data []byte, wireLen int, ts time.Time) {
	fp, err := decodeFrame(a.opts.Decode, link, data, wireLen, &a.pkt)
	a.addDecoded(iface, err, &a.pkt, ts.UnixNano(), fp)
}

// decodeFrame decodes a frame into p, as decode.Decode, and takes the
// duplicate fingerprint of a TCP packet (0 for any other frame): what the
// reader stage does for each frame, and AddFrom for its caller's.
func decodeFrame(cfg *decode.Config, link decode.LinkType, data []byte, wireLen int, p *decode.Packet) (fp uint64, err error) {
	if err = cfg.Decode(link, data, wireLen, p); err == nil {
		fp = dupFingerprint(p)
	}
	return fp, err
}

// addDecoded analyzes one frame that decode.Decode read into p with
// verdict err, captured at ns on interface iface, of duplicate
// fingerprint fp (dupFingerprint; 0 for a frame that is not TCP). With
// one interface the packet is analyzed at once; otherwise it is copied
// into that interface's queue for the merge, so p is free again on
// return. The TCP packet of a single-interface capture, nearly every
// frame, takes the first branch alone.
func (a *Analyzer) addDecoded(iface int, err error, p *decode.Packet, ns int64, fp uint64) {
	if err == nil && iface == 0 && len(a.ifq) == 1 {
		a.res.Frames++
		a.res.TCPPackets++
		a.packet(p, ns, a.res.Frames, fp)
		return
	}
	a.addOther(iface, err, p, ns, fp)
}

// addOther is addDecoded for the first frame, frames that are not TCP, and
// captures of several interfaces.
func (a *Analyzer) addOther(iface int, err error, p *decode.Packet, ns int64, fp uint64) {
	a.res.Frames++
	a.ExpectInterfaces(iface + 1)
	if iface != 0 {
		p.Iface ^= int32(iface) << 24 // the duplicate filter's interface
	}
	if len(a.ifq) == 1 {
		// One interface: its frames are analyzed as they come.
		if a.count(err) {
			a.packet(p, ns, a.res.Frames, fp)
		} else {
			if err == decode.ErrLinkType {
				a.skipped(iface, p.UnknownLink)
			}
			a.clock(ns)
		}
		return
	}
	if !a.count(err) {
		if err == decode.ErrLinkType {
			a.skipped(iface, p.UnknownLink)
		}
		return
	}
	if a.began && ns < a.lastNs {
		a.packet(p, ns, a.res.Frames, fp) // too late to place
		return
	}
	q := &a.ifq[iface]
	slot := q.slot()
	slot.p, slot.ns, slot.frame, slot.fp = *p, ns, a.res.Frames, fp
	q.commit()
	a.buffered++
	a.merge(false)
}

// skipped counts a frame of interface iface, of a link type the decoder
// does not know.
func (a *Analyzer) skipped(iface int, link decode.LinkType) {
	for i := range a.res.SkippedInterfaces {
		if s := &a.res.SkippedInterfaces[i]; s.Interface == iface && s.LinkType == int(link) {
			s.Frames++
			return
		}
	}
	a.res.SkippedInterfaces = append(a.res.SkippedInterfaces, SkippedInterface{Interface: iface, LinkType: int(link), Name: link.Describe(), Frames: 1})
}

// reorderWindow bounds the frames held back for the merge of interfaces.
const reorderWindow = 1 << 15

// merge analyzes buffered frames in timestamp order while every interface
// has one buffered (so no older frame can still come), the window is
// full, or all is set (the end of the capture).
func (a *Analyzer) merge(all bool) {
	for a.buffered > 0 {
		best, ready := -1, true
		for i := range a.ifq {
			q := &a.ifq[i]
			if q.len() == 0 {
				ready = false
				continue
			}
			if best < 0 || q.first().ns < a.ifq[best].first().ns {
				best = i
			}
		}
		if !ready && !all && a.buffered <= reorderWindow {
			return
		}
		qp := a.ifq[best].pop()
		a.buffered--
		a.packet(&qp.p, qp.ns, qp.frame, qp.fp)
	}
}

// clock turns a frame's capture time into the analysis time: ns from the
// first frame analyzed, never earlier than the previous frame's.
// The test of a frame in order is small enough to inline; the first
// frame (lastNs starts at the largest time) and one that goes back in
// time take clockOther.
func (a *Analyzer) clock(ns int64) int64 {
	if ns < a.lastNs {
		return a.clockOther(ns)
	}
	a.lastNs = ns
	a.last = ns - a.start
	a.own = a.last
	return a.last
}

// clockOther is clock for the first frame and one older than the frame
// before.
func (a *Analyzer) clockOther(ns int64) int64 {
	if !a.began {
		a.began = true
		a.start = ns
		a.lastNs = ns
		a.res.Start = time.Unix(0, ns)
	}
	a.own = ns - a.start
	if ns < a.lastNs {
		a.res.TimeBackwards++
		ns = a.lastNs
	}
	a.lastNs = ns
	a.last = ns - a.start
	return a.last
}

// count counts a frame by decode's verdict err; it reports whether the
// frame is TCP.
func (a *Analyzer) count(err error) bool {
	switch err {
	case nil:
		a.res.TCPPackets++
		return true
	case decode.ErrNotTCP:
		a.res.NotTCP++
	case decode.ErrTruncated:
		a.res.Truncated++
	case decode.ErrLinkType:
		a.res.UnknownLink++
	default:
		a.res.Corrupt++
	}
	return false
}

// packet analyzes TCP packet p, frame number frame of the file, captured
// at ns, of duplicate fingerprint fp.
func (a *Analyzer) packet(p *decode.Packet, ns int64, frame int, fp uint64) {
	t := a.clock(ns)
	if fp != 0 && a.dups.duplicate(fp, ns, p.Iface) {
		a.duplicate(p)
		return
	}
	a.frame = frame
	// A two-entry cache of (source, destination) tuples: a bulk transfer
	// alternates data and ACKs of one connection, so the map and the
	// canonical key are skipped for almost every packet.
	var c *Connection
	var fromLow bool
	hit := -1
	for i := range a.recent {
		r := &a.recent[i]
		if r.c != nil && r.sport == p.SrcPort && r.dport == p.DstPort && r.src == p.Src && r.dst == p.Dst {
			hit = i
			c, fromLow = r.c, r.fromLow
			break
		}
	}
	if c == nil || a.startsNew(c, p, t) {
		var k connKey
		k, fromLow = makeKey(p)
		if c == nil {
			c = a.conns[k]
		}
		if c == nil || a.startsNew(c, p, t) {
			// Wireshark flags a SYN that reuses the ports of a stream it
			// has seen, whether that stream is still tracked here or was
			// retired.
			reused := p.Flags&(decode.FlagSYN|decode.FlagACK) == decode.FlagSYN &&
				(c != nil || a.retired.reused(k, fromLow, p.Seq))
			if c != nil {
				a.retire(c) // its 4-tuple now belongs to the new connection
			}
			if a.overBudget() {
				a.shed()
			}
			c = a.newConn(k, p, t)
			c.reusedSYN = reused
			a.conns[k] = c
			a.recent = [2]recentTuple{}
		}
		hit = -1
	}
	if hit < 0 {
		a.recent[1] = a.recent[0]
		a.recent[0] = recentTuple{src: p.Src, dst: p.Dst, sport: p.SrcPort, dport: p.DstPort, c: c, fromLow: fromLow}
	}
	dir := 0
	if fromLow != c.clientIsLow {
		dir = 1
	}
	if p.MalformedLength {
		a.res.MalformedLength++
	}
	c.process(a, dir, p, t)
	if t-a.lastSweep >= sweepEvery {
		a.lastSweep = t
		a.sweep(t)
	}
}

// duplicate counts packet p, a capture duplicate, in the totals and in
// its connection's direction.
func (a *Analyzer) duplicate(p *decode.Packet) {
	a.res.DuplicateFrames++
	k, fromLow := makeKey(p)
	if c := a.conns[k]; c != nil && c.dirs != nil {
		dir := 0
		if fromLow != c.clientIsLow {
			dir = 1
		}
		c.dirs[dir].stats.CaptureDuplicates++
	}
}

// sweep retires the connections that have finished by time now and hands
// the finished ones at the head of the order to OnFinish.
func (a *Analyzer) sweep(now int64) {
	live := a.live[:0]
	retired := false
	for _, c := range a.live {
		if !c.finished && a.hasFinished(c, now) {
			a.retire(c)
		}
		if c.finished {
			retired = true
			continue
		}
		live = append(live, c)
	}
	clear(a.live[len(live):])
	a.live = live
	if retired {
		a.recent = [2]recentTuple{}
	}
	a.emitFinished()
}

// hasFinished reports whether connection c is over at time now.
func (a *Analyzer) hasFinished(c *Connection, now int64) bool {
	quiet := time.Duration(now - c.lastT)
	if a.opts.IdleTimeout > 0 && quiet > a.opts.IdleTimeout {
		return true
	}
	if quiet > idleRetire && (len(a.live) > maxTracked || len(a.unfinished) > maxTracked) {
		// Memory, not a rule: with this many connections tracked, or
		// finished but waiting for OnFinish behind open ones, one silent
		// this long is retired (a later packet of its 4-tuple starts a
		// new one).
		return true
	}
	closed := c.rst || c.dirs[0].finSeen && c.dirs[1].finSeen
	return closed && quiet > closedLinger
}

// retire finishes connection c before the end of the capture and keeps
// only its summary and its reduced series.
func (a *Analyzer) retire(c *Connection) {
	if c.finished {
		return
	}
	a.retired.add(c)
	c.finish(a)
	c.compact(a, a.opts.FinishedPoints)
	if a.conns[c.key] == c {
		delete(a.conns, c.key)
	}
}

// emitFinished hands OnFinish the finished connections at the head of the
// order, diagnosed first (here, or on the finisher's goroutine).
func (a *Analyzer) emitFinished() {
	if a.opts.OnFinish == nil {
		return
	}
	n := 0
	for n < len(a.unfinished) && a.unfinished[n].finished {
		n++
	}
	if n == 0 {
		return
	}
	if a.opts.ConcurrentFinish {
		a.finisher().send(a.unfinished[:n])
	} else {
		for _, c := range a.unfinished[:n] {
			diagnoseWanted(c, a.opts.Wanted, a.opts.windowRatio())
			a.opts.OnFinish(c)
		}
	}
	rest := copy(a.unfinished, a.unfinished[n:])
	clear(a.unfinished[rest:])
	a.unfinished = a.unfinished[:rest]
}

// finisher starts the goroutine of ConcurrentFinish on first use.
func (a *Analyzer) finisher() *finisher {
	if a.fin == nil {
		a.fin = newFinisher(a.opts.OnFinish, a.opts.Wanted, a.opts.windowRatio())
	}
	return a.fin
}

// Finish completes the analysis and returns the result.
func (a *Analyzer) Finish() *Result {
	a.merge(true)
	if a.began {
		a.res.End = time.Unix(0, a.start+a.last)
	}
	for _, c := range a.live {
		if !c.finished {
			c.finish(a)
			c.release() // kept in the Result, not compacted
		}
	}
	a.live = nil
	a.emitFinished()
	if a.fin != nil {
		a.fin.wait()
		a.fin = nil
	}
	if a.res.TimeBackwards > 0 {
		a.res.Warnings = append(a.res.Warnings, fmt.Sprintf("%d frames were older than a frame already analyzed (their interface's clock went backwards, or they came more than %d frames late); analyzed at that frame's time", a.res.TimeBackwards, reorderWindow))
	}
	if a.res.DuplicateFrames > 0 {
		a.res.Warnings = append(a.res.Warnings, fmt.Sprintf("%d frames were second copies of a packet (captured twice, as on two interfaces of one router); analyzed once", a.res.DuplicateFrames))
	}
	if a.res.FinishedEarly > 0 {
		a.res.Warnings = append(a.res.Warnings, a.budgetWarning())
	}
	if n := a.res.Truncated + a.res.Corrupt; n > 0 {
		a.res.Warnings = append(a.res.Warnings, fmt.Sprintf("%d frames skipped: %d with headers cut by the capture, %d with corrupt headers", n, a.res.Truncated, a.res.Corrupt))
	}
	if a.res.MalformedLength > 0 {
		a.res.Warnings = append(a.res.Warnings, fmt.Sprintf("%d TCP packets stated an IP length beyond the frame on the wire (not a snap length cut); analyzed with the payload that was there", a.res.MalformedLength))
	}
	for _, s := range a.res.SkippedInterfaces {
		a.res.Warnings = append(a.res.Warnings, fmt.Sprintf("interface %d: %s is not one the analyzer decodes (the list is in docs/analyzer.md); its %d frames skipped", s.Interface, s.Name, s.Frames))
	}
	return a.res
}

// recentTuple caches the connection of a recently seen directed 4-tuple.
type recentTuple struct {
	src, dst     [16]byte
	sport, dport uint16
	c            *Connection
	fromLow      bool
}

// connKey is a 4-tuple in canonical order (lower endpoint first).
type connKey struct {
	loIP, hiIP     [16]byte
	loPort, hiPort uint16
}

func makeKey(p *decode.Packet) (connKey, bool) {
	if less(p.Src, p.SrcPort, p.Dst, p.DstPort) {
		return connKey{p.Src, p.Dst, p.SrcPort, p.DstPort}, true
	}
	return connKey{p.Dst, p.Src, p.DstPort, p.SrcPort}, false
}

func less(a [16]byte, ap uint16, b [16]byte, bp uint16) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return ap < bp
}

// startsNew reports whether p opens a new connection on c's 4-tuple, as
// Wireshark starts a new stream: a SYN (without ACK) whose sequence
// number is not the base of its sender's direction (a retransmitted SYN
// is), when that direction has one; or, with Options.IdleTimeout, any
// packet after that much silence.
func (a *Analyzer) startsNew(c *Connection, p *decode.Packet, t int64) bool {
	if a.opts.IdleTimeout > 0 && time.Duration(t-c.lastT) > a.opts.IdleTimeout {
		return true
	}
	if p.Flags&(decode.FlagSYN|decode.FlagACK) != decode.FlagSYN || c.dirs == nil {
		return false
	}
	_, fromLow := makeKey(p)
	dir := 0
	if fromLow != c.clientIsLow {
		dir = 1
	}
	st := &c.dirs[dir].st
	return st.baseSet && st.base != p.Seq
}

// retiredTuples remembers, for 4-tuples whose connection was retired,
// the sequence base of each endpoint, so that a later SYN is known to
// reuse their ports (Wireshark's tcp.analysis.reused_ports). A table of
// fixed size: an entry gives way to a later tuple of the same slot.
type retiredTuples struct {
	table *[retiredSlots]retiredTuple
}

const retiredSlots = 1 << 12

type retiredTuple struct {
	key  connKey
	base [2]uint32 // [0]: the lower endpoint's
	set  [2]bool
}

func (r *retiredTuples) slot(k *connKey) *retiredTuple {
	h := dupMix(0x9E3779B97F4A7C15, uint64(binary.BigEndian.Uint64(k.loIP[8:]))^uint64(binary.BigEndian.Uint32(k.loIP[:4]))<<32)
	h = dupMix(h, uint64(binary.BigEndian.Uint64(k.hiIP[8:]))^uint64(binary.BigEndian.Uint32(k.hiIP[:4]))<<32)
	h = dupMix(h, uint64(k.loPort)<<16|uint64(k.hiPort))
	return &r.table[h&(retiredSlots-1)]
}

// add records retired connection c's tuple.
func (r *retiredTuples) add(c *Connection) {
	if c.dirs == nil {
		return
	}
	if r.table == nil {
		r.table = new([retiredSlots]retiredTuple)
	}
	e := r.slot(&c.key)
	*e = retiredTuple{key: c.key}
	for i := range c.dirs {
		low := (i == 0) == c.clientIsLow
		j := 1
		if low {
			j = 0
		}
		if st := &c.dirs[i].st; st.baseSet {
			e.base[j], e.set[j] = st.base, true
		}
	}
}

// reused reports whether a SYN of sequence number seq, from the lower
// endpoint of k if fromLow, reuses the ports of a retired connection.
func (r *retiredTuples) reused(k connKey, fromLow bool, seq uint32) bool {
	if r.table == nil {
		return false
	}
	e := r.slot(&k)
	if e.key != k {
		return false
	}
	j := 1
	if fromLow {
		j = 0
	}
	return e.set[j] && e.base[j] != seq
}

func (a *Analyzer) newConn(k connKey, p *decode.Packet, t int64) *Connection {
	a.nconns++
	c := &Connection{Index: a.nconns, firstT: t, lastT: t, key: k, encap: p.Encaps, nencap: p.NEncap}
	if n := len(a.freeDirs); n > 0 {
		c.dirs = a.freeDirs[n-1]
		a.freeDirs[n-1] = nil
		a.freeDirs = a.freeDirs[:n-1]
	} else {
		c.dirs = new([2]dirAnalysis)
	}
	_, fromLow := makeKey(p)
	src, dst := p.SrcAddrPort(), p.DstAddrPort()
	// The client is whoever sent the SYN; without a handshake, the side
	// with the higher (ephemeral) port.
	srcIsClient := true
	switch {
	case p.Flags&decode.FlagSYN != 0:
		srcIsClient = p.Flags&decode.FlagACK == 0
	case p.SrcPort < p.DstPort:
		srcIsClient = false
	}
	if srcIsClient {
		c.Client, c.Server, c.clientIsLow = src, dst, fromLow
	} else {
		c.Client, c.Server, c.clientIsLow = dst, src, !fromLow
	}
	for i := range c.dirs {
		d := &c.dirs[i]
		d.st.init()
	}
	a.live = append(a.live, c)
	if a.opts.OnFinish != nil {
		a.unfinished = append(a.unfinished, c)
	} else {
		a.res.Connections = append(a.res.Connections, c)
	}
	return c
}

var flagNames = []string{"retransmission", "fast_retransmission", "spurious_retransmission", "out_of_order",
	"lost_segment", "ack_lost_segment", "duplicate_ack", "zero_window", "zero_window_probe",
	"zero_window_probe_ack", "window_full", "window_update", "keep_alive", "keep_alive_ack", "reused_ports"}

// String lists the flags by their Wireshark names.
func (f PacketFlags) String() string {
	var b []byte
	for i, n := range flagNames {
		if f&(1<<i) != 0 {
			if len(b) > 0 {
				b = append(b, ',')
			}
			b = append(b, n...)
		}
	}
	if len(b) == 0 {
		return "-"
	}
	return string(b)
}

// emptySeries is the (shared, never written) series of a direction that
// carried no data.
func (a *Analyzer) emptySeries() *DirectionSeries {
	if a.empty == nil {
		a.empty = newDirSeries(a.opts.MaxPoints)
	}
	return a.empty
}
