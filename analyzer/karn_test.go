package analyzer

import (
	"path/filepath"
	"strconv"
	"testing"
)

// TestKarnAgreesWithTcptrace checks RTT samples and post-loss ACKs, per
// direction, against tcptrace's on every synthetic capture (both sides of
// each transfer) and every committed test capture: re-sends that
// Wireshark calls out-of-order are re-sends to Karn's rule too.
func TestKarnAgreesWithTcptrace(t *testing.T) {
	var paths []string
	for _, sc := range agreementScenarios {
		for _, atSender := range []bool{true, false} {
			cfg := sc.cfg
			cfg.AtSender = atSender
			p, _ := writeSynth(t, cfg)
			paths = append(paths, p)
		}
	}
	golden, _ := filepath.Glob(filepath.Join("testdata", "*.pcap"))
	paths = append(paths, golden...)
	for _, p := range paths {
		tt := tcptraceStats(t, p)
		res, err := AnalyzeFile(p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range res.Connections[0].Directions {
			samples, _ := strconv.Atoi(tt["RTT samples"][i])
			postLoss, _ := strconv.Atoi(tt["post-loss acks"][i])
			if d.RTTSamples != samples || d.PostLossAcks != postLoss {
				t.Errorf("%s dir %d: %d samples + %d post-loss ACKs, tcptrace %d + %d", p, i, d.RTTSamples, d.PostLossAcks, samples, postLoss)
			}
		}
	}
}
