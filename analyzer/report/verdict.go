package report

import (
	"fmt"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/units"
)

// The report opens with its answer: a card per direction of the main
// transfer saying what limited it, the measured rate beside the rate each
// limit allows, and the fix with its predicted gain; then one throughput
// graph with those ceilings drawn across it. The details follow, folded.

// verdictView is one card.
type verdictView struct {
	Title     string
	Limit     string
	Words     string
	Rate      string
	Ceilings  []ceilingView
	Fix       string
	Predicted string
	// Others: the same direction read from another capture.
	Others []string
}

type ceilingView struct {
	Limit, Rate, How string
}

// limitWords says a limit class in words, as the card's headline.
var limitWords = map[string]string{
	analyzer.LimitReceiveWindow: "the receiver's window",
	analyzer.LimitSendBuffer:    "the sender's send buffer",
	analyzer.LimitLoss:          "losses on the path",
	analyzer.LimitDelayedAck:    "the receiver's delayed ACKs",
	analyzer.LimitApplication:   "the application, not the network",
	analyzer.LimitBandwidth:     "a bottleneck the transfer filled",
	analyzer.LimitCongestion:    "the sender's congestion window",
	analyzer.LimitSlowStart:     "slow start: the transfer ended while its window was still opening",
	analyzer.LimitUnknown:       "not decided by this capture",
}

// predictedGainShown: a prediction under this multiple of the measured
// rate is no gain worth a line (a bottleneck's advice keeps the rate).
const predictedGainShown = 1.05

// rateSig writes a rate in bit/s with three significant digits.
func rateSig(bps float64) string {
	return units.Rate(bps).Human() + " (" + units.Sig(bps/8/1e6) + " MB/s)"
}

// mainConnection is the connection of a section that carried the most.
func mainConnection(conns []*analyzer.Connection) *analyzer.Connection {
	var best *analyzer.Connection
	for _, c := range conns {
		if best == nil || c.UniqueBytes() > best.UniqueBytes() {
			best = c
		}
	}
	return best
}

// sameTuple says whether two connections are one transfer seen from two
// captures.
func sameTuple(a, b *analyzer.Connection) bool { return a.Client == b.Client && a.Server == b.Server }

// verdicts builds the cards from the sections' connections: the first
// section's main transfer, each direction that carried data (the larger
// first), read from the capture taken nearest its sender; the other
// captures' readings are named beside it. It also returns the connection
// and direction of the first card, whose throughput the page draws.
func verdicts(secs []Section) ([]verdictView, *analyzer.Connection, int) {
	var views []sectionConns
	for _, s := range secs {
		conns := s.Connections
		if conns == nil && s.Result != nil {
			conns = s.Result.Connections
		}
		views = append(views, sectionConns{title: s.Title, conns: conns})
	}
	if len(views) == 0 {
		return nil, nil, 0
	}
	main := mainConnection(views[0].conns)
	if main == nil {
		return nil, nil, 0
	}
	order := []int{1, 0}
	if main.Directions[0].UniqueBytes > main.Directions[1].UniqueBytes {
		order = []int{0, 1}
	}
	var out []verdictView
	var graphConn *analyzer.Connection
	graphDir := 0
	for _, i := range order {
		type reading struct {
			c     *analyzer.Connection
			title string
		}
		var rs []reading
		for _, v := range views {
			for _, c := range v.conns {
				if (c == main || sameTuple(c, main)) && c.Directions[i] != nil && c.Directions[i].Diagnosis != nil && c.Directions[i].UniqueBytes > 0 {
					rs = append(rs, reading{c, v.title})
					break
				}
			}
		}
		if len(rs) == 0 {
			continue
		}
		best := 0
		for k, r := range rs {
			if r.c.Directions[i].CapturedNear == "sender" {
				best = k
				break
			}
		}
		c, d := rs[best].c, rs[best].c.Directions[i]
		dg := d.Diagnosis
		words := limitWords[dg.Limit]
		if words == "" {
			words = dg.Limit
		}
		v := verdictView{Title: fmt.Sprintf("%s → %s", d.From, d.To), Limit: dg.Limit, Words: words, Rate: rateSig(dg.RateBps)}
		if len(rs) > 1 && rs[best].title != "" {
			v.Title += ", from the " + rs[best].title
		}
		for _, cl := range dg.Ceilings {
			v.Ceilings = append(v.Ceilings, ceilingView{Limit: cl.Limit, Rate: rateSig(cl.Bps), How: cl.How})
		}
		for _, a := range dg.Advice {
			if len(a) < 10 || a[:10] != "predicted:" {
				v.Fix = a
				break
			}
		}
		if dg.PredictedBps > predictedGainShown*dg.RateBps {
			v.Predicted = rateSig(dg.PredictedBps)
			if dg.PredictedGain > 0 {
				v.Predicted += ", " + units.Sig(dg.PredictedGain) + "× the measured rate"
			}
		}
		for k, r := range rs {
			if k != best {
				v.Others = append(v.Others, fmt.Sprintf("%s: %s", r.title, r.c.Directions[i].Diagnosis.Limit))
			}
		}
		if graphConn == nil {
			graphConn, graphDir = c, i
		}
		out = append(out, v)
	}
	return out, graphConn, graphDir
}

type sectionConns struct {
	title string
	conns []*analyzer.Connection
}
