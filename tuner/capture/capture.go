// Package capture turns the analyzer's reading of a capture into the
// tuner's planning evidence, so the planner never depends on the analyzer
// and the analyzer never on the tuner.
package capture

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/tuner"
	"github.com/wanlab/wanlab/units"
)

// ErrNoTransfer means the capture holds no TCP connection that carried data.
var ErrNoTransfer = errors.New("no TCP data transfer in the capture")

// Evidence analyzes the capture at path and describes its largest
// transfer (the direction that carried the most unique bytes).
func Evidence(path string) (*tuner.Evidence, error) {
	res, err := analyzer.AnalyzeFile(path, analyzer.Options{})
	if err != nil {
		return nil, err
	}
	return FromResult(res, path)
}

// FromResult picks the largest transfer of an analysis.
func FromResult(res *analyzer.Result, source string) (*tuner.Evidence, error) {
	var best *analyzer.Direction
	var bestPeer *analyzer.Direction
	for _, c := range res.Connections {
		for i, d := range c.Directions {
			if d != nil && d.UniqueBytes > 0 && (best == nil || d.UniqueBytes > best.UniqueBytes) {
				best, bestPeer = d, c.Directions[1-i]
			}
		}
	}
	if best == nil {
		return nil, fmt.Errorf("%s: %w", source, ErrNoTransfer)
	}
	return fromDirection(best, bestPeer, source), nil
}

func fromDirection(d, peer *analyzer.Direction, source string) *tuner.Evidence {
	ev := &tuner.Evidence{
		Source:      fmt.Sprintf("%s (%s -> %s)", source, d.From, d.To),
		RTT:         time.Duration(d.PathRTTMs * float64(time.Millisecond)),
		Throughput:  units.Rate(d.DataRateBps),
		MaxInFlight: units.Size(max(d.MaxInFlightBytes, 0)),
	}
	if ev.RTT == 0 && d.TSRTTSamples > 0 {
		ev.RTT = time.Duration(d.TSRTTMinMs * float64(time.Millisecond))
	}
	// Windows are bytes only when both SYNs were seen.
	if d.WindowScaleKnown {
		ev.MaxWindow = units.Size(max(d.PeerMaxWindowBytes, 0))
	}
	if peer != nil && peer.MSS > 0 {
		mss := peer.MSS
		if d.Timestamps && peer.Timestamps {
			mss -= 12 // the timestamp option rides in every segment
		}
		ev.MSS = units.Size(mss)
	}
	if d.DataPackets > 0 {
		ev.Loss = float64(d.RetransmittedPackets) / float64(d.DataPackets)
	}
	if dg := d.Diagnosis; dg != nil {
		switch dg.Limit {
		case analyzer.LimitReceiveWindow:
			ev.Limit = tuner.LimitReceiveWindow
		case analyzer.LimitSendBuffer:
			ev.Limit = tuner.LimitSendBuffer
		case analyzer.LimitLoss, analyzer.LimitCongestion:
			ev.Limit = tuner.LimitCongestion
		case analyzer.LimitApplication:
			ev.Limit = tuner.LimitApplication
		case analyzer.LimitBandwidth:
			ev.Limit = tuner.LimitBandwidth
		}
		ev.Detail = strings.Join(dg.Evidence, "; ")
		if dg.PredictedBps > 0 {
			ev.Predicted = units.Rate(dg.PredictedBps)
		}
		if ev.Limit == "" && dg.Limit != "" && dg.Limit != analyzer.LimitNone {
			ev.Detail = dg.Limit + ": " + ev.Detail
		}
	}
	return ev
}
