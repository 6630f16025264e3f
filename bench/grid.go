package bench

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// AccuracyGrid is the full accuracy grid: delays with and without
// jitter in every distribution, random and Gilbert-Elliott loss, tbf
// rates with small and large buckets, and combinations (seed 002's tree
// among them). The empty spec first measures each path's own delay.
func AccuracyGrid() []string {
	g := []string{""}
	for _, d := range []string{"1ms", "10ms", "100ms"} {
		j := map[string]string{"1ms": "100us", "10ms": "1ms", "100ms": "10ms"}[d]
		g = append(g, "delay "+d, "delay "+d+" "+j)
		for _, dist := range []string{"normal", "pareto", "paretonormal"} {
			g = append(g, "delay "+d+" "+j+" distribution "+dist)
		}
	}
	g = append(g, "loss 0.1%", "loss 1%", "loss 10%", "loss gemodel 1% 30%")
	for _, r := range []units.Rate{units.Mbit, 10 * units.Mbit, 100 * units.Mbit, 1000 * units.Mbit} {
		g = append(g, tbfSpec(r, 4*units.KiB), tbfSpec(r, max(32*units.KiB, units.Size(r.BytesPerSecond()/100))))
	}
	return append(g,
		"delay 10ms loss 1%",
		"delay 100ms | tbf rate 50mbit burst 50kb limit 500kb",
		"delay 20ms 2ms distribution normal loss 0.5% | tbf rate 100mbit burst 64kb limit 1mb",
		"delay 10ms | tbf rate 10mbit burst 10kb limit 1mb | codel",
		"delay 10ms | tbf rate 10mbit burst 10kb limit 1mb | fq_codel")
}

// QuickAccuracyGrid is the CI grid: one case of each kind.
func QuickAccuracyGrid() []string {
	return []string{"", "delay 10ms", "delay 10ms 1ms distribution normal", "loss 1%",
		"loss gemodel 1% 30%", tbfSpec(10*units.Mbit, 4*units.KiB), tbfSpec(100*units.Mbit, 64*units.KiB)}
}

// tbfSpec is a tbf stage of rate with a bucket of burst and a queue of
// burst plus 20 ms at rate.
func tbfSpec(r units.Rate, burst units.Size) string {
	limit := max(16*units.KiB, burst+units.Size(r.BytesPerSecond()/50))
	return fmt.Sprintf("tbf rate %s burst %db limit %db", rateWord(r), burst, limit)
}

func rateWord(r units.Rate) string {
	if r%units.Mbit == 0 {
		return fmt.Sprintf("%dmbit", r/units.Mbit)
	}
	return fmt.Sprintf("%dkbit", r/units.Kbit)
}

// ReadSpecs reads one spec per line; blank lines and lines starting with
// '#' are skipped.
func ReadSpecs(r io.Reader, name string) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if t == "none" || t == `""` {
			t = ""
		}
		if _, err := spec.Parse(t); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no specs", name)
	}
	return out, nil
}

// accuracyCase is a spec with the traffic that measures it.
type accuracyCase struct {
	text string
	// proxyText is what the proxy paths apply: text with a fixed seed on
	// every netem stage that has none, so that its random decisions are
	// the ones spec (the same seeded stages) makes in the model's replay,
	// whatever the proxy's seed and however many specs it ran before (a
	// stage's default seed mixes in the pipeline's swap count).
	proxyText string
	spec      *spec.Spec
	netem     *spec.Netem
	tbf       *spec.TBF
	probe     probeConfig
	bulk      time.Duration // TCP bulk after the probes (rate cases)
	// aqm is the codel or fq_codel stage of an AQM case: its probes run
	// beside a TCP bulk transfer that keeps the queue standing, and
	// their delay is set against the AQM's target (aqmKind).
	aqm     spec.Stage
	aqmKind aqmKind
}

// aqmKind is what the accuracy grid asks of an AQM kind's probes. These
// are the bench's criteria, not the model's, so they stand here and not in
// tc's registry.
type aqmKind struct {
	target func(spec.Stage) time.Duration
	// bound is the p50 queueing delay's bound in targets (want names it);
	// note says why.
	bound      float64
	want, note string
}

var aqmKinds = map[string]aqmKind{
	// One FIFO: the probe waits behind the standing queue codel keeps
	// near target.
	"codel": {target: func(st spec.Stage) time.Duration { return st.(*spec.CoDel).TargetTime() },
		bound: 3, want: "≤ 3 × target", note: "codel holds the standing queue near target"},
	// Its own flow: new-flow priority puts each probe ahead of the bulk
	// flow's queue.
	"fq_codel": {target: func(st spec.Stage) time.Duration { return st.(*spec.FQCoDel).TargetTime() },
		bound: 1, want: "≤ target", note: "a sparse flow beside the bulk flow: new-flow priority"},
}

// modelSeed seeds the netem stages of accuracy cases (proxyText).
const modelSeed = 1

func newCase(text string, quick bool) (accuracyCase, error) {
	s, err := spec.Parse(text)
	if err != nil {
		return accuracyCase{}, err
	}
	var c accuracyCase
	for i, st := range s.Stages {
		if n, ok := st.(*spec.Netem); ok {
			if !n.HasSeed {
				n.Seed, n.HasSeed = modelSeed+uint64(i), true
			}
			if c.netem == nil {
				c.netem = n
			}
		}
		if b, ok := st.(*spec.TBF); ok && (c.tbf == nil || b.Rate < c.tbf.Rate) {
			c.tbf = b
		}
		if k, ok := aqmKinds[st.Kind()]; ok {
			c.aqm, c.aqmKind = st, k
		}
	}
	c.text, c.proxyText, c.spec = text, s.String(), s
	secs := 5.0
	if quick {
		secs = 1
	}
	var maxDelay time.Duration
	if c.netem != nil {
		maxDelay = c.netem.Latency + 10*c.netem.Jitter
	}
	switch {
	case c.aqm != nil:
		// A probe every 10 ms for the length of a TCP bulk transfer
		// that fills the bottleneck (it starts 1 s before them).
		if quick {
			secs = 2
		}
		pps := 100.0
		c.probe = probeConfig{PPS: pps, Count: int(pps * secs), IPLen: 200, Drain: 300*time.Millisecond + maxDelay}
		c.bulk = time.Duration(secs*float64(time.Second)) + 1500*time.Millisecond
	case c.tbf != nil:
		// Offer 50 % more than the rate in 1400-byte packets; the
		// bucket empties after burst / (0.5 × rate), and the long-run
		// rate is measured from then on.
		size := 1400
		bps := c.tbf.Rate.BytesPerSecond()
		pps := 1.5 * bps / float64(size)
		empty := time.Duration(float64(c.tbf.Burst) / (0.5 * bps) * float64(time.Second))
		if quick {
			secs = 1.5
		} else {
			secs = 4
		}
		queue := time.Duration(float64(c.tbf.QueueLimit()) / c.tbf.Rate.BytesPerSecond() * float64(time.Second))
		c.probe = probeConfig{PPS: pps, Count: int(pps * (secs + empty.Seconds())), IPLen: size,
			Steady: empty + empty/5 + 20*time.Millisecond + maxDelay,
			Drain:  200*time.Millisecond + queue + maxDelay}
		// TCP refills the bucket whenever it backs off; give it 20
		// bucketfuls of time so the bursts weigh little in the figure.
		c.bulk = min(10*time.Second, max(3*time.Second, 20*time.Duration(float64(c.tbf.Burst)/bps*float64(time.Second))))
		if quick {
			c.bulk = time.Second
		}
	case c.netem != nil && c.netem.Loss.Kind != spec.LossNone:
		pps := 5000.0
		c.probe = probeConfig{PPS: pps, Count: int(pps * secs * 2), IPLen: 100, Drain: 200*time.Millisecond + maxDelay}
	default:
		pps := 1000.0
		if quick {
			secs = 0.8
		}
		c.probe = probeConfig{PPS: pps, Count: int(pps * secs), IPLen: 200, Drain: 200*time.Millisecond + maxDelay}
	}
	return c, nil
}

func label(text string) string {
	if text == "" {
		return "(none)"
	}
	return text
}

func (c accuracyCase) table() string {
	switch {
	case c.aqm != nil:
		return "aqm"
	case c.tbf != nil:
		return "rate"
	case c.netem != nil && c.netem.Loss.Kind != spec.LossNone:
		return "loss"
	}
	return "delay"
}

func metricTable(metric string) string {
	switch {
	case strings.HasPrefix(metric, "delay"):
		return "delay"
	case strings.HasPrefix(metric, "loss"):
		return "loss"
	case strings.HasPrefix(metric, "rate"), strings.HasPrefix(metric, "burst"), strings.HasPrefix(metric, "tcp"):
		return "rate"
	}
	return "other"
}

// probeConfig describes one probe run from client to server.
type probeConfig struct {
	PPS      float64
	Count    int
	IPLen    int           // IP packet length of each probe (>= 60)
	Drain    time.Duration // how long to wait for stragglers after the last send
	RunID    uint64
	Steady   time.Duration // receive time skipped by the rate figure (until the bucket is empty)
	RcvBytes int           // receive buffer (SO_RCVBUFFORCE)
}
