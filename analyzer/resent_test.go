package analyzer

import (
	"strconv"
	"testing"
)

// TestResentIsSenderTruth checks resent_packets and gap_fills on both
// sides of each synthetic transfer. Next to the sender, where Wireshark
// calls some re-sends out-of-order, resent_packets is what the sender
// re-sent (each dropped segment once). On both sides they agree with
// tcptrace, whose "rexmt data pkts" are the segments below the highest
// sequence sent that fill no hole and whose "outoforder pkts" are those
// that fill one (gap fills, plus reorderings). (A lost last segment is
// invisible next to the receiver: its re-send looks like new data.)
func TestResentIsSenderTruth(t *testing.T) {
	for _, sc := range agreementScenarios {
		t.Run(sc.name, func(t *testing.T) {
			for _, atSender := range []bool{true, false} {
				cfg := sc.cfg
				cfg.AtSender = atSender
				path, _ := writeSynth(t, cfg)
				res, err := AnalyzeFile(path, Options{})
				if err != nil {
					t.Fatal(err)
				}
				d := res.Connections[0].Directions[1]
				tt := tcptraceStats(t, path)
				rexmt, _ := strconv.Atoi(tt["rexmt data pkts"][1])
				ooo, _ := strconv.Atoi(tt["outoforder pkts"][1])
				side := "receiver"
				if atSender {
					side = "sender"
					if d.ResentPackets != len(cfg.Drop) || d.GapFills != 0 {
						t.Errorf("at the sender: resent %d, gap fills %d; the sender re-sent %d (Wireshark: %d retransmissions, %d out-of-order)",
							d.ResentPackets, d.GapFills, len(cfg.Drop), d.RetransmittedPackets, d.OutOfOrderPackets)
					}
				}
				if d.ResentPackets != rexmt {
					t.Errorf("at the %s: resent %d, tcptrace rexmt data pkts %d", side, d.ResentPackets, rexmt)
				}
				if d.GapFills > ooo || len(cfg.Reorder) == 0 && d.GapFills != ooo {
					t.Errorf("at the %s: gap fills %d, tcptrace outoforder pkts %d", side, d.GapFills, ooo)
				}
				want := float64(d.ResentPackets+d.GapFills) / float64(d.DataPackets+d.GapFills)
				if d.LossRate != want || atSender && (len(cfg.Drop) > 0) != (want > 0) {
					t.Errorf("at the %s: loss rate %v, want %v", side, d.LossRate, want)
				}
			}
		})
	}
}
