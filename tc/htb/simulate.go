package htb

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// Flow is one synthetic flow: constant-rate packets to Dst.
type Flow struct {
	Src, Dst netip.Addr
	Protocol uint8 // 17 (udp) or 6 (tcp): only the header, no congestion control
	SPort    uint16
	DPort    uint16
	DSCP     uint8
	Rate     units.Rate
	Size     int           // IP length, 0: 1500
	Start    time.Duration // offset from the start of the run
	Stop     time.Duration // 0: the end of the run
}

// ParseFlow reads "dst=10.0.2.1,rate=50mbit[,src=A][,proto=udp|tcp]
// [,sport=N][,dport=N][,dscp=N][,size=BYTES][,start=1s][,stop=3s]".
func ParseFlow(s string) (Flow, error) {
	f := Flow{Protocol: 17, SPort: 40000, DPort: 9, Size: 1500}
	set := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return f, fmt.Errorf("flow %q: %q: want KEY=VALUE", s, kv)
		}
		set[k] = true
		var err error
		switch k {
		case "dst", "src":
			var a netip.Addr
			if a, err = netip.ParseAddr(v); err == nil && a.Zone() != "" {
				err = fmt.Errorf("zone not allowed")
			}
			if k == "dst" {
				f.Dst = a
			} else {
				f.Src = a
			}
		case "rate":
			f.Rate, err = units.ParseRate(v)
		case "proto":
			switch v {
			case "udp":
				f.Protocol = 17
			case "tcp":
				f.Protocol = 6
			default:
				err = fmt.Errorf("want udp or tcp")
			}
		case "sport", "dport":
			var n uint64
			if n, err = strconv.ParseUint(v, 10, 16); err == nil {
				if k == "sport" {
					f.SPort = uint16(n)
				} else {
					f.DPort = uint16(n)
				}
			}
		case "dscp":
			var n uint64
			if n, err = strconv.ParseUint(v, 10, 8); err == nil && n > 63 {
				err = fmt.Errorf("must be 0-63")
			}
			f.DSCP = uint8(n)
		case "size":
			f.Size, err = strconv.Atoi(v)
			if err == nil && (f.Size < 48 || f.Size > 65535) {
				err = fmt.Errorf("must be 48-65535 bytes")
			}
		case "start", "stop":
			var d time.Duration
			if d, err = units.ParseTime(v, time.Second); err == nil && d < 0 {
				err = fmt.Errorf("negative")
			}
			if k == "start" {
				f.Start = d
			} else {
				f.Stop = d
			}
		default:
			return f, fmt.Errorf("flow %q: unknown key %q (dst, src, rate, proto, sport, dport, dscp, size, start, stop)", s, k)
		}
		if err != nil {
			return f, fmt.Errorf("flow %q: %s %q: %w", s, k, v, err)
		}
	}
	if !set["dst"] || !set["rate"] || f.Rate == 0 {
		return f, fmt.Errorf("flow %q: needs dst=ADDRESS and rate=RATE", s)
	}
	if !f.Src.IsValid() {
		f.Src = netip.MustParseAddr("10.0.0.1")
		if f.Dst.Is6() {
			f.Src = netip.MustParseAddr("fd00::1")
		}
	}
	if f.Src.Is4() != f.Dst.Is4() {
		return f, fmt.Errorf("flow %q: src and dst of different families", s)
	}
	if f.Stop != 0 && f.Stop <= f.Start {
		return f, fmt.Errorf("flow %q: stop %s is not after start %s", s, f.Stop, f.Start)
	}
	return f, nil
}

// String prints the flow as ParseFlow reads it.
func (f Flow) String() string {
	proto := "udp"
	if f.Protocol == 6 {
		proto = "tcp"
	}
	s := fmt.Sprintf("dst=%s,rate=%s,proto=%s,dport=%d,size=%d", f.Dst, f.Rate, proto, f.DPort, f.Size)
	if f.Start != 0 {
		s += ",start=" + units.FormatDuration(f.Start)
	}
	if f.Stop != 0 {
		s += ",stop=" + units.FormatDuration(f.Stop)
	}
	return s
}

// packet builds f's packet (IPv4 or IPv6 with a UDP/TCP-sized header).
func (f Flow) packet() []byte {
	size := max(f.Size, 48)
	b := make([]byte, size)
	var off int
	if f.Dst.Is4() {
		b[0], b[1] = 0x45, f.DSCP<<2
		binary.BigEndian.PutUint16(b[2:], uint16(size))
		b[8], b[9] = 64, f.Protocol
		s, d := f.Src.As4(), f.Dst.As4()
		copy(b[12:], s[:])
		copy(b[16:], d[:])
		off = 20
	} else {
		b[0], b[1] = 0x60|f.DSCP>>2, f.DSCP<<6
		binary.BigEndian.PutUint16(b[4:], uint16(size-40))
		b[6], b[7] = f.Protocol, 64
		s, d := f.Src.As16(), f.Dst.As16()
		copy(b[8:], s[:])
		copy(b[24:], d[:])
		off = 40
	}
	binary.BigEndian.PutUint16(b[off:], f.SPort)
	binary.BigEndian.PutUint16(b[off+2:], f.DPort)
	return b
}

// SimConfig is a multi-flow simulation of classes on a virtual clock.
type SimConfig struct {
	Classes  *spec.Classes
	Flows    []Flow
	Duration time.Duration // 0: 10 s
	// Warmup is left out of the rates (0: a tenth of Duration).
	Warmup   time.Duration
	Seed     uint64
	Overhead int
	// QueueMemory bounds the memory of the packets inside
	// (engine.MemoryBudget; 0: engine.DefaultQueueMemory).
	QueueMemory units.Size
}

// SimClass is one class's share of a simulation. Rates are over the
// measured window (after Warmup), in bits/s of IP bytes.
type SimClass struct {
	ID          string  `json:"id"`
	Parent      string  `json:"parent,omitempty"`
	Leaf        bool    `json:"leaf"`
	Rate        float64 `json:"rate_bps"`
	Ceil        float64 `json:"ceil_bps"`
	OfferedBps  float64 `json:"offered_bps"`
	RealizedBps float64 `json:"realized_bps"`
	// BorrowedBytes were sent above the class's rate on a parent's
	// spare tokens (over the whole run).
	BorrowedBytes uint64 `json:"borrowed_bytes"`
	LentBytes     uint64 `json:"lent_bytes"`
	// Drops by reason over the whole run (leaf classes): loss (netem),
	// queue (a leaf or netem/tbf queue full), oversize (tbf).
	Drops engine.Drops `json:"drops"`
	// DelayMeanMs is the mean time from arrival to departure of the
	// class's packets.
	DelayMeanMs float64 `json:"delay_mean_ms"`
	QueueMax    uint64  `json:"queue_max_packets"`
}

// SimResult is what Simulate measured.
type SimResult struct {
	Classes    string     `json:"classes"`
	Flows      []string   `json:"flows"`
	DurationMs float64    `json:"duration_ms"`
	WarmupMs   float64    `json:"warmup_ms"`
	Seed       uint64     `json:"seed"`
	Result     []SimClass `json:"result"`
}

// Simulate runs cfg's flows through cfg's classes on a virtual clock:
// engine.Simulate with the classes' setup, its counts reported per class.
func Simulate(cfg SimConfig) (*SimResult, error) {
	if len(cfg.Flows) == 0 {
		return nil, fmt.Errorf("no flows")
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 10 * time.Second
	}
	if cfg.Warmup <= 0 {
		cfg.Warmup = cfg.Duration / 10
	}
	if cfg.Warmup >= cfg.Duration {
		return nil, fmt.Errorf("warmup %s: not shorter than the duration %s", cfg.Warmup, cfg.Duration)
	}
	ecfg := engine.SimConfig{Seed: cfg.Seed, QueueMemory: cfg.QueueMemory, Duration: cfg.Duration, Warmup: cfg.Warmup}
	for _, f := range cfg.Flows {
		ecfg.Flows = append(ecfg.Flows, engine.SimFlow{Packet: f.packet(), Rate: f.Rate, Start: f.Start, Stop: f.Stop})
	}
	var setup *Setup
	ecfg.Classes = func(opt engine.Options) (engine.Options, error) {
		var err error
		if setup, err = NewSetup(cfg.Classes, Options{Overhead: cfg.Overhead, Now: opt.Start}); err != nil {
			return opt, err
		}
		return setup.Options(opt), nil
	}
	er, err := engine.Simulate(ecfg)
	if err != nil {
		return nil, err
	}
	window := float64(cfg.Duration-cfg.Warmup) / 1e9
	res := &SimResult{Classes: cfg.Classes.String(), DurationMs: float64(cfg.Duration) / 1e6, WarmupMs: float64(cfg.Warmup) / 1e6, Seed: cfg.Seed}
	for _, f := range cfg.Flows {
		res.Flows = append(res.Flows, f.String())
	}
	byID := map[string]int{}
	for i, c := range setup.Classes {
		byID[c.Name] = i
	}
	add := func(sc SimClass, leafs []int) {
		var dsum float64
		var dn uint64
		for _, ci := range leafs {
			n := er.Classes[ci]
			sc.OfferedBps += float64(n.OfferedBytes) * 8 / window
			sc.RealizedBps += float64(n.RealizedBytes) * 8 / window
			sc.Drops.Add(n.Drops)
			dsum += n.DelaySumNs
			dn += n.Departed
			sc.QueueMax = max(sc.QueueMax, n.QueueMax)
		}
		if dn > 0 {
			sc.DelayMeanMs = dsum / float64(dn) / 1e6
		}
		res.Result = append(res.Result, sc)
	}
	if i, ok := byID[DirectClass]; ok {
		add(SimClass{ID: DirectClass, Leaf: true}, []int{i})
	}
	classes := make(map[string]*spec.Class, len(cfg.Classes.Classes))
	for i := range cfg.Classes.Classes {
		classes[cfg.Classes.Classes[i].ID] = &cfg.Classes.Classes[i]
	}
	under := leavesUnder(cfg.Classes, classes, byID)
	if stats := er.Scheduler; stats != nil {
		for _, st := range stats {
			c := classes[st.ID]
			sc := SimClass{ID: st.ID, Parent: st.Parent, Leaf: st.Leaf, BorrowedBytes: st.BorrowedBytes, LentBytes: st.LentBytes,
				Rate: float64(c.HTB.Rate), Ceil: float64(max(c.HTB.Ceil, c.HTB.Rate))}
			add(sc, under[st.ID])
		}
	} else {
		leaves := map[string]bool{}
		for _, l := range cfg.Classes.Leaves() {
			leaves[l] = true
		}
		for _, c := range cfg.Classes.Classes {
			add(SimClass{ID: c.ID, Parent: c.Parent, Leaf: leaves[c.ID]}, under[c.ID])
		}
	}
	return res, nil
}

// leavesUnder maps each class to the engine classes of its leaves (a leaf
// to itself), in the order the leaves are written: one walk up from each
// leaf, so a tree of n classes and depth d costs n*d, not n² per class.
func leavesUnder(cs *spec.Classes, classes map[string]*spec.Class, byID map[string]int) map[string][]int {
	out := map[string][]int{}
	for _, l := range cs.Leaves() {
		for x := l; x != ""; {
			out[x] = append(out[x], byID[l])
			c := classes[x]
			if c == nil {
				break
			}
			x = c.Parent
		}
	}
	return out
}

// WriteText prints the result as a table.
func (r *SimResult) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "classes: %s\n", r.Classes)
	for _, f := range r.Flows {
		fmt.Fprintf(w, "flow:    %s\n", f)
	}
	fmt.Fprintf(w, "virtual time %s, rates measured after %s\n\n", units.FormatDuration(time.Duration(r.DurationMs*1e6)), units.FormatDuration(time.Duration(r.WarmupMs*1e6)))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "class\tparent\trate\tceil\toffered\trealized\tborrowed\tlent\tdrops loss/queue/oversize\tdelay mean\tqueue max\t")
	human := func(bps float64) string {
		if bps == 0 {
			return "-"
		}
		return units.Rate(math.Round(bps)).Human()
	}
	for _, c := range r.Result {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d/%d\t%.2fms\t%d\t\n", c.ID, c.Parent, human(c.Rate), human(c.Ceil),
			human(c.OfferedBps), human(c.RealizedBps), units.Size(c.BorrowedBytes).Human(), units.Size(c.LentBytes).Human(),
			c.Drops.Loss, c.Drops.Queue, c.Drops.Oversize, c.DelayMeanMs, c.QueueMax)
	}
	return tw.Flush()
}
