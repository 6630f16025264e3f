package analyzer

import (
	"fmt"
	"strconv"
	"strings"
)

// writeConnTextFmt is the text summary as it was written with fmt, kept as
// the reference the append-based one must match byte for byte.
func writeConnTextFmt(b *strings.Builder, c *Connection) {
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
			fmt.Fprintf(b, " at %s", mbFmt(dg.RateBps/8))
		}
		if dg.PredictedBps > 0 {
			fmt.Fprintf(b, ", predicted after the change %s", mbFmt(dg.PredictedBps/8))
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
