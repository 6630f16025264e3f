package fit

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/analyzer/decode"
	"github.com/wanlab/wanlab/analyzer/pcapfile"
	"github.com/wanlab/wanlab/internal/hostfile"
)

// record is one TCP packet of the connection being fitted, as captured,
// with the analyzer's verdict on it.
type record struct {
	t        time.Duration // since the capture's first frame
	dir      int           // 0: client to server, 1: server to client
	seq, ack uint32
	payload  int // TCP payload bytes on the wire
	ipLen    int // IP packet bytes (header and payload)
	win      int64
	flags    uint8
	hasTS    bool
	tsval    uint32
	tsecr    uint32
	nsack    int
	sack     [4]decode.SACKBlock

	aflags   analyzer.PacketFlags
	karn     time.Duration // Karn RTT sample this ACK gives (-1: none)
	inflight int64         // data of this packet's direction in flight after it (-1: unknown)
}

// DefaultMaxPackets is the fit's budget of one connection's packets
// unless Options.MaxPackets says otherwise: a connection beyond it is
// fitted on its first packets, and the fit says so (`--max-packets`
// raises it). A fit holds about PacketBytes a packet (the records, the
// analyzer's verdicts, the flow's samples): 1 Mi packets about 540 MB.
// (4 Mi packets, the bound before, peaked at 2.5-3.3 GB.)
const DefaultMaxPackets = 1 << 20

// PacketBytes is the measured memory a fit takes per packet of the
// connection it fits: the slope of `wanlab fit`'s peak RSS from 750,000 to
// 1,500,000 packets of one download (docs/security.md).
const PacketBytes = 520

// readConnection reads the packets of connection c (found by a first
// analysis) with the analyzer's per-packet verdicts. It returns them in
// capture order, and whether the connection was cut at maxPackets.
func readConnection(path string, c *analyzer.Connection, maxOpen, maxPackets int) ([]record, bool, error) {
	r, closer, err := pcapfile.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer closer.Close()
	type verdict struct {
		flags    analyzer.PacketFlags
		karn     time.Duration
		inflight int64
	}
	verdicts := make(map[int]verdict)
	cut := false
	// The same budget as the first analysis, so that connections are
	// numbered the same; finished ones are dropped and none diagnosed:
	// only the verdicts on c's packets are wanted.
	a := analyzer.New(analyzer.Options{NoSeries: true, FinishedPoints: -1, MaxOpen: maxOpen,
		OnFinish: func(*analyzer.Connection) {}, Wanted: func(*analyzer.Connection) bool { return false },
		OnPacket: func(p *analyzer.PacketInfo) {
			if p.Conn == nil || p.Conn.Index != c.Index || len(verdicts) >= maxPackets {
				return
			}
			verdicts[p.Frame] = verdict{p.Flags, p.KarnRTT, p.InFlight}
		}})
	ws := [2]int{-1, -1} // window scale each endpoint offered (0: client)
	if d := c.Directions[0]; d != nil && d.WindowScaleKnown {
		ws = [2]int{max(d.WindowScale, 0), max(c.Directions[1].WindowScale, 0)}
	}
	var pkts []record
	frames := make([]int, 0, 1024)
	var pkt decode.Packet
	var first time.Time
	frame := 0
	for {
		f, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, pcapfile.ErrTruncated) {
				break
			}
			if frame == 0 {
				return nil, false, err
			}
			break // what was read is analyzed; the first analysis warned
		}
		frame++
		if frame == 1 {
			first = f.Timestamp
		}
		a.ExpectInterfaces(r.Interfaces())
		a.AddFrom(f.Interface, f.Link, f.Data, f.WireLen, f.Timestamp)
		if decode.Decode(f.Link, f.Data, f.WireLen, &pkt) != nil {
			continue
		}
		dir, ok := direction(&pkt, c)
		if !ok {
			continue
		}
		if len(pkts) >= maxPackets {
			cut = true
			continue
		}
		rec := record{
			t: f.Timestamp.Sub(first), dir: dir, seq: pkt.Seq, ack: pkt.Ack, payload: pkt.PayloadLen,
			flags: pkt.Flags, hasTS: pkt.HasTimestamp, tsval: pkt.TSVal, tsecr: pkt.TSEcr, nsack: pkt.NSACK, sack: pkt.SACK,
			karn: -1, inflight: -1,
		}
		rec.ipLen = pkt.PayloadLen + headerLen(&pkt)
		rec.win = int64(pkt.Window)
		if ws[dir] >= 0 && pkt.Flags&decode.FlagSYN == 0 {
			rec.win <<= ws[dir]
		}
		pkts = append(pkts, rec)
		frames = append(frames, frame)
	}
	a.Finish()
	// Keep the packets the analyzer gave to this connection (a reused
	// tuple's other connections are left out).
	out := pkts[:0]
	for i, p := range pkts {
		v, ok := verdicts[frames[i]]
		if !ok {
			continue
		}
		p.aflags, p.karn, p.inflight = v.flags, v.karn, v.inflight
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, false, fmt.Errorf("%s: connection %d: no packet read back", hostfile.Name(path), c.Index)
	}
	return out, cut, nil
}

// direction says which way p goes in connection c.
func direction(p *decode.Packet, c *analyzer.Connection) (int, bool) {
	src, dst := p.SrcAddrPort(), p.DstAddrPort()
	switch {
	case src == c.Client && dst == c.Server:
		return 0, true
	case src == c.Server && dst == c.Client:
		return 1, true
	}
	return 0, false
}

// headerLen is the IP and TCP header bytes of a packet: 20 + 20 for IPv4
// and 40 + 20 for IPv6, plus the TCP options a timestamp adds (the
// capture's snap length may have cut the real header; this is what a
// bottleneck counts for a common segment).
func headerLen(p *decode.Packet) int {
	n := 40
	if p.IPVersion == 6 {
		n = 60
	}
	if p.HasTimestamp {
		n += 12
	}
	return n
}
