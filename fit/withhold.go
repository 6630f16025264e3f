package fit

import (
	"fmt"
	"slices"
	"time"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// withhold marks the named parameters unknown in every direction of out,
// with reason, drops from the specs what stood on them, and returns the
// names that were claimed (known) before.
func withhold(out *Result, names []string, reason string) []string {
	var did []string
	for di := range out.Directions {
		d := &out.Directions[di]
		changed := false
		for _, n := range names {
			if p, ok := d.Params[n]; ok && p.Known() {
				d.Params[n] = unknown(reason)
				changed = true
				if !slices.Contains(did, n) {
					did = append(did, n)
					out.Notes = append(out.Notes, n+": "+reason)
				}
			}
		}
		if changed {
			d.Spec = respec(d.Spec, d.Params)
		}
	}
	for _, n := range did {
		switch n {
		case "send_window_bytes":
			delete(out.Sysctls.Client, "net.ipv4.tcp_wmem")
			delete(out.Sysctls.Server, "net.ipv4.tcp_wmem")
		case "receive_buffer_bytes":
			delete(out.Sysctls.Client, "net.ipv4.tcp_rmem")
			delete(out.Sysctls.Server, "net.ipv4.tcp_rmem")
		}
	}
	return did
}

// respec is text's spec without what stands on a withheld parameter: the
// token bucket without a rate, the netem loss without a loss rate, the
// jitter without a jitter, the delay without a round trip; a netem left
// doing nothing goes.
func respec(text string, p map[string]Param) string {
	s, err := spec.Parse(text)
	if err != nil {
		return text
	}
	gone := func(name string) bool { q, ok := p[name]; return ok && !q.Known() }
	var kept []spec.Stage
	for _, st := range s.Stages {
		switch x := st.(type) {
		case *spec.TBF:
			if gone("rate_bps") {
				continue
			}
		case *spec.Netem:
			if gone("rtt_ms") {
				x.Latency, x.Jitter, x.Reorder, x.ReorderCorr, x.Gap = 0, 0, 0, 0, 0
			}
			if gone("jitter_ms") {
				x.Jitter, x.DelayCorr = 0, 0
			}
			if gone("loss_percent") && !(p["gemodel_p_percent"].Known()) {
				x.Loss = spec.Loss{}
			}
			if x.Latency == 0 && x.Loss.Kind == spec.LossNone && x.Reorder == 0 && x.Rate == 0 && x.Duplicate == 0 && x.Corrupt == 0 {
				continue
			}
		}
		kept = append(kept, st)
	}
	return (&spec.Spec{Stages: kept}).String()
}

// carried is what the capture shows of the path it took: the bytes, the
// re-sent segments (spurious ones left out), and the highest rate carried
// over any round trip, in IP bits per second.
type carried struct {
	bytes   int64
	resent  int
	peakBps float64
}

// peakWindowMin is the shortest window the peak rate carried is taken
// over: a round trip, but not under 10 ms, where a host's batching of
// ACKs (a tick, an interrupt's coalescing) makes a shorter one's rate
// that of the batch.
const peakWindowMin = 10 * time.Millisecond

// farAboveCarried is how far above the highest rate carried over a round
// trip a bottleneck may be claimed: twice. A transfer that met a
// bottleneck carried its rate for a round trip at least (the ACK clock
// runs at it); one at twice the rate or more was never reached.
const farAboveCarried = 2

// carriedBy measures what the capture carried from its in-order curve.
func carriedBy(f *flow, curve []curvePoint, rtt time.Duration, resent int) carried {
	c := carried{resent: resent}
	if len(curve) == 0 {
		return c
	}
	c.bytes = curve[len(curve)-1].bytes
	w := max(rtt, peakWindowMin)
	// Over each window of w or more ending at a point, from the latest
	// point at least w before it (the first point when none is).
	i := 0
	for j := range curve {
		for i+1 < j && curve[j].t-curve[i+1].t >= w {
			i++
		}
		span := max(curve[j].t-curve[i].t, w)
		c.peakBps = max(c.peakBps, float64(curve[j].bytes-curve[i].bytes)*f.ipFact*8/span.Seconds())
	}
	if len(curve) == 1 {
		c.peakBps = float64(c.bytes) * f.ipFact * 8 / w.Seconds()
	}
	return c
}

// contradiction is a claim the capture itself contradicts.
type contradiction struct {
	measure          string
	value, tolerance float64
	claims           []string
	reason           string
}

// contradictions lists the claims of the data's direction d that the
// capture contradicts: a window or buffer of 0 bytes beside data carried,
// no loss beside segments re-sent that no tail drop accounts for, and a
// bottleneck far above the highest rate carried.
func contradictions(d *Direction, c carried) []contradiction {
	var out []contradiction
	if c.bytes > 0 {
		for _, n := range []string{"receive_window_bytes", "receive_buffer_bytes", "send_window_bytes"} {
			if p, ok := d.Params[n]; ok && p.Known() && p.Value <= 0 {
				out = append(out, contradiction{measure: n, value: p.Value, tolerance: 0, claims: []string{n},
					reason: fmt.Sprintf("withheld: a window of %s carries nothing, and the capture carried %s", units.Size(max(p.Value, 0)).Human(), units.Size(c.bytes).Human())})
			}
		}
	}
	if p, ok := d.Params["loss_percent"]; ok && p.Known() && p.Value == 0 {
		tail := 0.0
		if q, ok := d.Params["congestion_losses"]; ok && q.Known() {
			tail = q.Value
		}
		if float64(c.resent) > tail {
			out = append(out, contradiction{measure: "losses_not_in_a_loss_claim", value: float64(c.resent) - tail, tolerance: 0,
				claims: []string{"loss_percent"},
				reason: fmt.Sprintf("withheld: no loss beside %d segments lost (re-sent, not spuriously) of which tail drops account for %.0f", c.resent, tail)})
		}
	}
	if p, ok := d.Params["rate_bps"]; ok && p.Known() && c.peakBps > 0 && p.Value > farAboveCarried*c.peakBps {
		out = append(out, contradiction{measure: "rate_over_carried", value: p.Value / c.peakBps, tolerance: farAboveCarried,
			claims: []string{"rate_bps", "burst_bytes", "buffer_bytes"},
			reason: fmt.Sprintf("withheld: a bottleneck of %s is more than %d times the most the transfer carried over a round trip (%s): the capture never reached it",
				units.Rate(p.Value).Human(), farAboveCarried, units.Rate(c.peakBps).Human())})
	}
	return out
}
