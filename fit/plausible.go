package fit

import (
	"errors"
	"fmt"
	"time"

	"github.com/wanlab/wanlab/units"
)

// ErrImplausiblePath: the capture's fit would need a path TCP does not
// run over (a clock that jumped, a capture spliced from two, timestamps
// rewritten); the fit refuses it rather than print that path.
var ErrImplausiblePath = errors.New("the path this capture's fit needs is not one TCP runs over")

const (
	// maxPathRTT is Linux's longest retransmission timeout
	// (TCP_RTO_MAX): over a longer round trip every segment times out
	// before its ACK can come back, so no transfer crossed such a path.
	maxPathRTT = 120 * time.Second
	// minPathRate is one segment of TCP's default MSS per maxPathRTT,
	// about 36 bit/s: the slowest a path can carry TCP's data at all.
	minPathRate = units.Rate(tcpDefaultMSS * 8 * time.Second / maxPathRTT)
)

// plausible returns ErrImplausiblePath, naming the value, where the data
// direction's fitted round trip or bottleneck lies outside what TCP runs
// over.
func plausible(out *Result) error {
	for _, d := range out.Directions {
		if !d.Data {
			continue
		}
		if p := d.Params["rtt_ms"]; p.Known() && p.Value > float64(maxPathRTT/time.Millisecond) {
			return fmt.Errorf("%w: a round trip of %s (over TCP's longest retransmission timeout, %s)",
				ErrImplausiblePath, time.Duration(p.Value*float64(time.Millisecond)).Round(time.Second), maxPathRTT)
		}
		if p := d.Params["rate_bps"]; p.Known() && p.Value < float64(minPathRate) {
			return fmt.Errorf("%w: a bottleneck of %s (under one %d-byte segment per %s)",
				ErrImplausiblePath, units.Rate(p.Value).Human(), tcpDefaultMSS, maxPathRTT)
		}
	}
	return nil
}
