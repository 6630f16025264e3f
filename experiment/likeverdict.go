package experiment

import (
	"fmt"
	"math"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/fit"
)

// Pantheon's test of an emulator (Yan et al., "Pantheon: the training
// ground for Internet congestion-control research", USENIX ATC 2018): an
// emulated path reproduces a real one when the transfer's rate is within
// 15 % and its round trip within 5 %.
const (
	verdictRateTolerance = 0.15
	verdictRTTTolerance  = 0.05
)

// Verdict is Pantheon's judgement of a reproduction: the rate (for
// request/response, the client's median latency) and the median round
// trip, each original against reproduced with its relative error.
type Verdict struct {
	// Measure is "rate_bps" or "latency_p50_ms".
	Measure    string  `json:"measure"`
	Original   float64 `json:"original"`
	Reproduced float64 `json:"reproduced"`
	Error      float64 `json:"error"`
	// RTT is the analyzer's median round trip of the data direction
	// (path_rtt_p50_ms: data to ACK near the sender, the receiver's
	// timestamps echoed or the handshake near the receiver), in each
	// capture taken at the same end.
	RTTOriginalMs   float64 `json:"rtt_original_ms"`
	RTTReproducedMs float64 `json:"rtt_reproduced_ms"`
	RTTError        float64 `json:"rtt_error"`
	RateWithin      bool    `json:"rate_within"`
	RTTWithin       bool    `json:"rtt_within"`
	Within          bool    `json:"within"`
	Tolerance       string  `json:"tolerance"`
}

// relError is |b/a - 1|, or +1 where a is 0 and b is not (JSON has no
// infinity; either way far outside any tolerance).
func relError(a, b float64) float64 {
	if a == 0 {
		if b == 0 {
			return 0
		}
		return 1
	}
	return math.Abs(b/a - 1)
}

// verdict judges a reproduction: orig and rep are the fits, od and rd the
// analyzer's data directions of the two captures.
func verdict(orig, rep *fit.Result, od, rd *analyzer.Direction) Verdict {
	v := Verdict{Measure: "rate_bps", Original: orig.Transfer.RateBps, Reproduced: rep.Transfer.RateBps}
	if o := orig.RequestResponse; o != nil {
		v.Measure, v.Original, v.Reproduced = "latency_p50_ms", o.LatencyP50Ms, 0
		if r := rep.RequestResponse; r != nil {
			v.Reproduced = r.LatencyP50Ms
		}
	}
	v.Error = relError(v.Original, v.Reproduced)
	if od != nil {
		v.RTTOriginalMs = od.PathRTTP50Ms
	}
	if rd != nil {
		v.RTTReproducedMs = rd.PathRTTP50Ms
	}
	v.RTTError = relError(v.RTTOriginalMs, v.RTTReproducedMs)
	v.RateWithin = v.Original > 0 && v.Error <= verdictRateTolerance
	v.RTTWithin = v.RTTOriginalMs > 0 && v.RTTError <= verdictRTTTolerance
	v.Within = v.RateWithin && v.RTTWithin
	v.Tolerance = fmt.Sprintf("Pantheon's: the %s within %.0f %%, the median RTT within %.0f %%", v.Measure, verdictRateTolerance*100, verdictRTTTolerance*100)
	return v
}

// labDataDirection is the analyzer's data direction of the connection a
// reproduction's refit chose, in the capture taken at side.
func labDataDirection(run *Result, side string, rep *fit.Result) *analyzer.Direction {
	cr := run.Captures[side]
	if cr == nil || cr.Analysis == nil {
		return nil
	}
	for _, c := range cr.Analysis.Connections {
		if c.Index == rep.Connection.Index {
			// The lab's server sends the data, also of an upload.
			return c.Directions[1]
		}
	}
	return nil
}
