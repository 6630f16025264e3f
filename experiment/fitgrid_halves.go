package experiment

import (
	_ "embed"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/wanlab/wanlab/units"
)

// The grid's two halves. The points of the held-out half are listed in
// testdata/fitgrid-heldout.txt, chosen once (every second point in the
// grid's order, when the list was made) and committed: the fit is tuned
// on the other half only, and `bench fit` reports each half apart,
// with each parameter's precision (claims within tolerance), coverage
// (claims made where the point has the parameter) and calibration (the
// share of claimed intervals that hold the truth).

//go:embed testdata/fitgrid-heldout.txt
var heldOutList string

// Halves of the grid.
const (
	HalfTuning  = "tuning"
	HalfHeldOut = "held-out"
)

var heldOut = func() map[string]bool {
	m := map[string]bool{}
	for _, l := range strings.Split(heldOutList, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			m[l] = true
		}
	}
	return m
}()

// Half is the half of the grid the point belongs to.
func (p FitPoint) Half() string {
	if heldOut[p.Name] {
		return HalfHeldOut
	}
	return HalfTuning
}

// combinedPoints are paths of several factors at once, at 50 ms: a
// jitter in front of a token bucket, loss with a bucket, loss with a
// receive window, paths without TCP timestamps, and BBR and Reno
// senders behind a bucket.
func combinedPoints() []FitPoint {
	rtt := 50 * time.Millisecond
	bdp := func(rate units.Rate) units.Size {
		return (units.Size(rate.BytesPerSecond()*rtt.Seconds()) + 1023) / 1024 * 1024
	}
	bucket := func(name string, rate units.Rate) FitPoint {
		return FitPoint{Name: name, RTT: rtt, Rate: rate, Buffer: bdp(rate), CC: "cubic"}
	}
	var g []FitPoint
	for _, rate := range []units.Rate{30 * units.Mbit, 50 * units.Mbit} {
		p := bucket(fmt.Sprintf("tbf+jitter 5ms 50ms %s 1bdp", rate), rate)
		p.Jitter = 5 * time.Millisecond
		g = append(g, p)
	}
	p := bucket(fmt.Sprintf("tbf+loss 0.05%% 50ms %s 1bdp", 10*units.Mbit), 10*units.Mbit)
	p.Loss = "0.05%"
	g = append(g, p)
	g = append(g, FitPoint{Name: "rwnd+loss 0.02% 50ms", RTT: rtt, Rmem: 256 * units.KiB, Loss: "0.02%", CC: "cubic"})
	p = bucket(fmt.Sprintf("no-timestamps tbf 50ms %s 1bdp", 50*units.Mbit), 50*units.Mbit)
	p.NoTimestamps = true
	g = append(g, p)
	g = append(g, FitPoint{Name: "no-timestamps loss 0.5% 50ms", RTT: rtt, Loss: "0.5%", CC: "cubic", NoTimestamps: true})
	for _, cc := range []string{"bbr", "reno"} {
		p := bucket(fmt.Sprintf("%s tbf 50ms %s 1bdp", cc, 50*units.Mbit), 50*units.Mbit)
		p.CC = cc
		g = append(g, p)
	}
	return g
}

// sysctls are the point's sysctls for both ends (a new map).
func (p FitPoint) sysctls() map[string]string {
	m := map[string]string{}
	if p.NoTimestamps {
		m["net.ipv4.tcp_timestamps"] = "0"
	}
	return m
}

// halfTally is one parameter's figures over one half.
type halfTally struct {
	applicable, covered, claimed, ok, intervals, inside int
}

// writeHalves writes, for each half of the grid, each parameter's
// precision (over every claim: a loss claimed where there was none is
// right near 0), coverage (claims over the points that have the
// parameter) and calibration (over the claims with an interval).
func writeHalves(w io.Writer, rows []FitRow) {
	params := []string{"rtt", "rate", "buffer", "loss"}
	for _, half := range []string{HalfTuning, HalfHeldOut} {
		tallies := map[string]*halfTally{}
		for _, name := range params {
			tallies[name] = &halfTally{}
		}
		n := 0
		for _, r := range rows {
			if r.Err != "" || r.Point.Half() != half {
				continue
			}
			n++
			unk := strings.Join(r.Unknown, ",")
			for _, name := range params {
				t := tallies[name]
				var applicable, claimed, ok bool
				switch name {
				case "rtt":
					applicable, claimed, ok = true, !strings.Contains(unk, "rtt"), r.RTTOK
				case "rate":
					applicable, claimed, ok = r.Point.Rate > 0, !strings.Contains(unk, "rate") && r.Point.Rate > 0, r.RateOK
				case "buffer":
					applicable, claimed, ok = r.Point.Rate > 0, !strings.Contains(unk, "buffer"), r.BufferOK
				case "loss":
					applicable, claimed, ok = r.Point.Loss != "", r.LossClaimed, r.LossOK
				}
				if applicable {
					t.applicable++
					if claimed {
						t.covered++
					}
				}
				if claimed {
					t.claimed++
					if ok {
						t.ok++
					}
				}
				if in, has := r.InInterval[name]; has && claimed {
					t.intervals++
					if in {
						t.inside++
					}
				}
			}
		}
		if n == 0 {
			continue
		}
		fmt.Fprintf(w, "%s half, %d captures: precision (claims within tolerance), coverage (claims where the point has it), calibration (intervals holding the truth)\n", half, n)
		for _, name := range params {
			t := tallies[name]
			fmt.Fprintf(w, "  %-7s precision %s  coverage %s  calibration %s\n", name,
				share(t.ok, t.claimed), share(t.covered, t.applicable), share(t.inside, t.intervals))
		}
	}
}

// share is "k of n (pct)", or "-" when n is 0.
func share(k, n int) string {
	if n == 0 {
		return "-"
	}
	return units.Sprintf("%d of %d (%.3g%%)", k, n, 100*float64(k)/float64(n))
}
