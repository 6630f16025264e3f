package engine

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/wanlab/wanlab/tc/schedule"
	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// SimConfig describes synthetic traffic for Simulate: Packets IPv4/UDP
// packets of Size bytes (IP length), evenly spaced at PPS packets per
// second, ECN-capable (ECT(0)) so an "ecn" spec marks instead of dropping;
// or Flows.
type SimConfig struct {
	// Impairment is what runs: a class tree, or a plain pipeline (the
	// tree of one leaf). TreeOptions (htb.EngineOptions) fills its engine
	// classes, classifier and scheduler into the Options; without it only
	// a plain pipeline runs. A tree that is not a plain pipeline needs
	// Flows.
	Impairment  spec.Impairment
	TreeOptions func(*spec.Classes, Options) (Options, error)
	// Schedule, if set, steps a plain pipeline at its times after the
	// first packet (Impairment holds until its first step), each step a
	// Swap at its time on the virtual clock.
	Schedule *schedule.Schedule
	Packets  int
	PPS      float64
	Size     int
	Seed     uint64
	// QueueMemory bounds the memory of the packets inside (MemoryBudget;
	// 0: DefaultQueueMemory).
	QueueMemory units.Size
	// Flows, if set, replace the evenly spaced packets above: each flow
	// sends its packets at its rate, and the run lasts Duration of
	// virtual time (0: 10 s; departures after it are not waited for),
	// each class's rates measured after Warmup (0: a tenth of Duration)
	// in SimResult.Tree.
	Flows            []Flow
	Duration, Warmup time.Duration
}

// classCounts is one engine class's share of a simulation with Flows:
// the bytes offered and sent in the measured window (after Warmup), the
// delays of all its packets that left, its deepest queue (sampled every
// virtual millisecond) and its drops.
type classCounts struct {
	OfferedBytes, RealizedBytes uint64
	DelaySumNs                  float64
	Departed                    uint64
	QueueMax                    uint64
	Drops                       Drops
}

// Simulation defaults.
const (
	DefaultSimPackets = 100000
	DefaultSimPPS     = 10000
	DefaultSimSize    = 1500
)

// DelayStats summarises per-packet delay (departure minus arrival) in ms.
type DelayStats struct {
	Mean   float64 `json:"mean"`
	Stddev float64 `json:"stddev"`
	P50    float64 `json:"p50"`
	P99    float64 `json:"p99"`
}

// SimDrops counts dropped packets by reason (AQM: what an active queue
// manager dropped by its control law).
type SimDrops = Drops

// Expected holds what the spec predicts for the synthetic traffic.
type Expected struct {
	// LossPercent is the loss models' stationary loss (before any queue
	// drops and before ECN marking): for a correlated random loss, the
	// share its correlation realizes (CorrelatedProbability), as are the
	// duplicate, corrupt and reorder percentages below.
	LossPercent float64 `json:"loss_percent"`
	// DelayMeanMs and DelayStddevMs are the netem delays' mean and
	// standard deviation (distribution tables included), without queueing.
	DelayMeanMs   float64 `json:"delay_mean_ms"`
	DelayStddevMs float64 `json:"delay_stddev_ms"`
	// RateBps is the expected output rate: the offered rate less the loss
	// models' share, capped by the bottleneck (bits/s of IP bytes).
	RateBps float64 `json:"rate_bps"`
	// BottleneckBps is the smallest tbf rate/peakrate or netem rate in
	// the spec (0: none).
	BottleneckBps float64 `json:"bottleneck_bps"`
	OfferedBps    float64 `json:"offered_bps"`
	// QueueDelayMaxMs is the longest a packet can wait in tbf queues
	// (limit / rate per tbf stage, the child qdisc's limit when tbf has
	// one, in packets of the simulated size), on top of the netem delay.
	QueueDelayMaxMs  float64 `json:"queue_delay_max_ms"`
	DuplicatePercent float64 `json:"duplicate_percent"`
	CorruptPercent   float64 `json:"corrupt_percent"`
	ReorderPercent   float64 `json:"reorder_percent"`
}

// SimResult is what Simulate measured. The JSON field names are a
// contract with `wanlab simulate --json` users.
type SimResult struct {
	Spec       string  `json:"spec"`
	Packets    int     `json:"packets"`
	PPS        float64 `json:"pps"`
	Size       int     `json:"size"`
	Seed       uint64  `json:"seed"`
	PacketsIn  uint64  `json:"packets_in"`
	PacketsOut uint64  `json:"packets_out"`
	// LossPercent is the share of offered packets of which no copy left
	// the pipeline, for any reason (loss model or queue limits).
	LossPercent float64    `json:"loss_percent"`
	Delay       DelayStats `json:"delay_ms"`
	// RateBps is the output rate in bits/s of IP bytes, between the first
	// and the last departure.
	RateBps    float64  `json:"rate_bps"`
	Drops      SimDrops `json:"drops"`
	Duplicated uint64   `json:"duplicated"`
	Corrupted  uint64   `json:"corrupted"`
	// Reordered counts packets that left ahead of a packet which arrived
	// before them and left later (they overtook it: netem's reorder, or
	// jitter without a rate).
	Reordered uint64 `json:"reordered"`
	ECNMarked uint64 `json:"ecn_marked"`
	// DurationMs is the virtual time from the first arrival to the last
	// departure.
	DurationMs float64  `json:"duration_ms"`
	Configured Expected `json:"configured"`
	// Realized lists the correlated netem probabilities (and delay
	// correlations) with the value they realize in the long run
	// (RealizedOf), and Warnings the one-line warnings for those that
	// realize something else than they say.
	Realized []Realized `json:"realized,omitempty"`
	Warnings []string   `json:"warnings"`
	// DelayLag1 is the lag-1 autocorrelation of the delays of consecutive
	// arrivals that both left (0 when the delay does not vary).
	DelayLag1 float64 `json:"delay_lag1"`
	// Stages holds each stage's own counters, root first (where the drops
	// happened, how deep each queue got): the stages of the spec in
	// force at the end when a schedule stepped it.
	Stages []SimStage `json:"stages"`
	// Schedule lists the schedule's steps applied, in order.
	Schedule []SimStep `json:"schedule,omitempty"`
	// Tree is the report of a run of Flows, per class (a pipeline's one
	// class, or a tree's); with it, JSON is the tree's alone.
	Tree *SimTree `json:"-"`
}

// SimStep is a schedule step Simulate applied: its time after the first
// packet, its line in the schedule file and its spec.
type SimStep struct {
	AtMs float64 `json:"at_ms"`
	Line int     `json:"line"`
	Spec string  `json:"spec"`
}

// SimStage is one stage's share of a simulation.
type SimStage struct {
	Kind       string `json:"kind"`
	Spec       string `json:"spec"`
	PacketsIn  uint64 `json:"packets_in"`
	PacketsOut uint64 `json:"packets_out"`
	Drops      Drops  `json:"drops"`
	// SojournMeanMs is the mean time a packet that left spent in the stage.
	SojournMeanMs float64 `json:"sojourn_mean_ms"`
	// SojournP50Ms and SojournP99Ms, for queue disciplines (and the
	// shaper holding one), are the upper bounds of the sojourn
	// histogram's buckets (SojournBoundsNs) holding the median and the
	// 99th percentile.
	SojournP50Ms float64 `json:"sojourn_p50_ms,omitempty"`
	SojournP99Ms float64 `json:"sojourn_p99_ms,omitempty"`
	// XStats are a queue discipline's own statistics at the end (codel,
	// fq_codel, pie, red), as tc -s qdisc shows them.
	XStats *XStats `json:"xstats,omitempty"`
}

// MarshalJSON is the result's fields, or its Tree's alone.
func (r *SimResult) MarshalJSON() ([]byte, error) {
	if r.Tree != nil {
		return json.Marshal(r.Tree)
	}
	type fields SimResult // without this method
	return json.Marshal((*fields)(r))
}

// Simulate runs cfg's traffic through a pipeline (or cfg's classes) on a
// virtual clock. It needs no privileges and takes about a second per
// million packets.
func Simulate(cfg SimConfig) (*SimResult, error) {
	const start = int64(1e9) // leave t=0 free: zero means "unstamped"
	end := int64(math.MaxInt64)
	var sources []simSource
	// The report of a plain pipeline without Flows is the pipeline's
	// (expected, realized, per stage); a tree's is per class (treeReport).
	pipeline, plain := cfg.Impairment.Pipeline()
	if len(cfg.Flows) == 0 {
		if !plain {
			return nil, fmt.Errorf("no flows")
		}
		if cfg.Packets <= 0 {
			cfg.Packets = DefaultSimPackets
		}
		if cfg.PPS <= 0 || math.IsNaN(cfg.PPS) || math.IsInf(cfg.PPS, 0) {
			cfg.PPS = DefaultSimPPS
		}
		if cfg.Size <= 0 {
			cfg.Size = DefaultSimSize
		}
		if cfg.Size < 28 || cfg.Size > 65535 {
			return nil, fmt.Errorf("size %d: must be 28-65535 bytes (an IPv4/UDP packet)", cfg.Size)
		}
		sources = []simSource{{template: UDPPacket(cfg.Size, 0x02 /* ECT(0) */), next: start, stop: end, count: cfg.Packets, interval: 1e9 / cfg.PPS}}
	} else {
		if cfg.Duration <= 0 {
			cfg.Duration = 10 * time.Second
		}
		if cfg.Warmup <= 0 {
			cfg.Warmup = cfg.Duration / 10
		}
		if cfg.Warmup >= cfg.Duration {
			return nil, fmt.Errorf("warmup %s: not shorter than the duration %s", cfg.Warmup, cfg.Duration)
		}
		end = start + int64(cfg.Duration)
		for _, f := range cfg.Flows {
			if f.Rate == 0 {
				return nil, fmt.Errorf("flow %s: needs a rate", f)
			}
			src := simSource{template: f.packet(), next: start + int64(f.Start), stop: end, rate: float64(f.Rate)}
			if f.Stop > 0 {
				src.stop = min(end, start+int64(f.Stop))
			}
			sources = append(sources, src)
		}
	}
	warm := start + int64(cfg.Warmup)
	if pipeline == nil {
		pipeline = spec.Empty()
	}
	if cfg.QueueMemory == 0 {
		cfg.QueueMemory = DefaultQueueMemory()
	}
	opt := Options{Direction: "simulate", Seed: cfg.Seed, Start: start, Memory: NewMemoryBudget(cfg.QueueMemory)}
	switch {
	case cfg.TreeOptions != nil:
		var err error
		if opt, err = cfg.TreeOptions(cfg.Impairment.Classes, opt); err != nil {
			return nil, err
		}
	case !plain:
		return nil, fmt.Errorf("a class tree needs TreeOptions")
	}
	pl, err := NewPipeline(pipeline, opt)
	if err != nil {
		return nil, err
	}
	res := &SimResult{Spec: pipeline.String(), Packets: cfg.Packets, PPS: cfg.PPS, Size: cfg.Size, Seed: cfg.Seed}
	counts := make([]classCounts, max(1, len(opt.Classes)))
	classOf := func(data []byte) int {
		if opt.Classifier == nil {
			return 0
		}
		if ci := opt.Classifier.Classify(data); ci >= 0 && ci < len(counts) {
			return ci
		}
		return 0
	}
	maxSize := 0
	var fed []int // the classes the sources feed: only they ever hold packets
	for i := range sources {
		sources[i].class = classOf(sources[i].template)
		if !slices.Contains(fed, sources[i].class) {
			fed = append(fed, sources[i].class)
		}
		maxSize = max(maxSize, len(sources[i].template))
	}
	pool := NewPool(Headroom + maxSize)

	delays := make([]float64, 0, cfg.Packets)
	bySeq := make([]float64, 0, cfg.Packets+2) // delay of each arrival's first copy; NaN: none left
	seen := make([]bool, 0, cfg.Packets+2)
	order := make([]uint64, 0, cfg.Packets)
	var firstDep, lastDep int64 = -1, 0
	var firstBytes, bytesOut uint64
	var unique, sent int
	batch := make([]*Packet, 0, 256)
	consume := func(ps []*Packet) {
		for _, p := range ps {
			if firstDep < 0 {
				firstDep, firstBytes = p.Depart, uint64(len(p.Data))
			}
			lastDep = p.Depart
			bytesOut += uint64(len(p.Data))
			delays = append(delays, float64(p.Depart-p.Arrival)/1e6)
			order = append(order, p.Seq)
			for uint64(len(seen)) <= p.Seq+1 {
				seen, bySeq = append(seen, false), append(bySeq, math.NaN())
			}
			if !seen[p.Seq] {
				seen[p.Seq] = true
				unique++
				bySeq[p.Seq] = float64(p.Depart-p.Arrival) / 1e6
			}
			c := &counts[classOf(p.Data)]
			if p.Depart >= warm && p.Depart < end {
				c.RealizedBytes += uint64(len(p.Data))
			}
			c.DelaySumNs += float64(p.Depart - p.Arrival)
			c.Departed++
			pool.Put(p)
		}
	}
	// The schedule's next step: its index (-1: none) and time.
	pos := schedule.Position{Step: -1, Next: -1}
	if cfg.Schedule != nil && len(cfg.Schedule.Steps) > 0 {
		pos.Next, pos.NextAt = 0, cfg.Schedule.Steps[0].At
	}
	stepAt := func(t int64) {
		for pos.Next >= 0 && start+int64(pos.NextAt) <= t {
			at := start + int64(pos.NextAt)
			batch = pl.Dequeue(at, batch[:0])
			consume(batch)
			st := cfg.Schedule.Steps[pos.Next]
			if err == nil {
				err = pl.Swap(st.Spec, at)
			}
			res.Schedule = append(res.Schedule, SimStep{AtMs: float64(pos.NextAt) / 1e6, Line: st.Line, Spec: st.Spec.String()})
			pos = cfg.Schedule.At(pos.NextAt)
		}
	}
	nextSample := start
	for {
		// The next arrival: the earliest source's.
		si, t := -1, int64(math.MaxInt64)
		for i := range sources {
			if s := &sources[i]; s.next < s.stop && s.next < t && (s.count == 0 || s.sent < s.count) {
				si, t = i, s.next
			}
		}
		if si < 0 {
			break
		}
		stepAt(t)
		batch = pl.Dequeue(t, batch[:0])
		consume(batch)
		s := &sources[si]
		p := pool.Get()
		p.SetLen(len(s.template))
		copy(p.Data, s.template)
		p.Arrival = t
		if t >= warm {
			counts[s.class].OfferedBytes += uint64(len(s.template))
		}
		pl.Enqueue(p, t) // p may be back in the pool already (dropped)
		sent++
		s.advance(start)
		if t >= nextSample { // queue depths once per virtual ms
			nextSample = t + int64(time.Millisecond)
			for _, ci := range fed {
				counts[ci].QueueMax = max(counts[ci].QueueMax, pl.ClassQueuePackets(ci))
			}
		}
	}
	if err != nil {
		return nil, err
	}
	for {
		next, ok := pl.NextDeparture()
		if !ok || next > end {
			break
		}
		batch = pl.Dequeue(next, batch[:0])
		consume(batch)
	}

	res.Reordered = Overtakers(order)
	snap := pl.Snapshot()
	tot := snap.Totals
	res.PacketsIn = uint64(sent)
	res.PacketsOut = tot.PacketsOut
	if sent > 0 {
		res.LossPercent = 100 * float64(sent-unique) / float64(sent)
	}
	res.Drops = tot.Drops
	for ci, cl := range snap.Classes {
		counts[ci].Drops = cl.Totals.Drops
		for _, s := range cl.Stages {
			res.Duplicated += s.Duplicated
			res.Corrupted += s.Corrupted
			res.ECNMarked += s.ECNMarked
			st := SimStage{Kind: s.Kind, Spec: s.Spec, PacketsIn: s.PacketsIn, PacketsOut: s.PacketsOut, Drops: s.Drops, XStats: s.XStats}
			if s.Sojourn.Count > 0 {
				st.SojournMeanMs = float64(s.Sojourn.SumNs) / float64(s.Sojourn.Count) / 1e6
				if s.Queue {
					st.SojournP50Ms = s.Sojourn.Quantile(0.5) / 1e6
					st.SojournP99Ms = s.Sojourn.Quantile(0.99) / 1e6
				}
			}
			res.Stages = append(res.Stages, st)
		}
	}
	if lastDep > firstDep && firstDep >= 0 {
		res.RateBps = float64(bytesOut-firstBytes) * 8 / (float64(lastDep-firstDep) / 1e9)
	}
	if lastDep > start {
		res.DurationMs = float64(lastDep-start) / 1e6
	}
	res.Delay = delayStats(delays)
	res.Configured = expected(pipeline, float64(cfg.Size)*8*cfg.PPS, cfg.Size)
	res.Realized = RealizedOf(pipeline)
	res.Warnings = Warnings(pipeline)
	if len(cfg.Flows) == 0 {
		res.Warnings = append(res.Warnings, DelayLimitWarnings(pipeline, SimLoad(cfg.PPS, int(cfg.Size)))...)
	}
	if w := BudgetWarning(QueueCapacity(pipeline), cfg.QueueMemory); w != "" {
		res.Warnings = append(res.Warnings, w)
	}
	if res.Warnings == nil {
		res.Warnings = []string{}
	}
	res.DelayLag1 = lagOneCorrelation(bySeq)
	if len(cfg.Flows) > 0 {
		res.Tree = treeReport(cfg, opt.Classes, counts, snap.Scheduler)
	}
	return res, nil
}

// simSource is one source of a simulation's arrivals: count packets
// (0: no bound) evenly spaced at interval ns from the start, or packets at
// rate bits/s, from next until stop.
type simSource struct {
	template    []byte
	class       int
	next, stop  int64
	count, sent int
	interval    float64
	rate        float64
}

// advance moves s to its next arrival after one sent.
func (s *simSource) advance(start int64) {
	s.sent++
	if s.interval > 0 {
		s.next = start + int64(float64(s.sent)*s.interval)
		return
	}
	s.next += int64(float64(len(s.template)*8) / s.rate * 1e9)
}

// lagOneCorrelation is the lag-1 autocorrelation of v over the pairs of neighbours that
// are both present (not NaN); 0 without variance.
func lagOneCorrelation(v []float64) float64 {
	var n, sx, sy, sxx, syy, sxy float64
	for i := 1; i < len(v); i++ {
		x, y := v[i-1], v[i]
		if math.IsNaN(x) || math.IsNaN(y) {
			continue
		}
		n++
		sx += x
		sy += y
		sxx += x * x
		syy += y * y
		sxy += x * y
	}
	if n < 2 {
		return 0
	}
	cov := sxy/n - sx/n*sy/n
	vx, vy := sxx/n-sx/n*sx/n, syy/n-sy/n*sy/n
	if vx <= 1e-18 || vy <= 1e-18 {
		return 0
	}
	return math.Round(cov/math.Sqrt(vx*vy)*1e4) / 1e4
}

// UDPPacket builds an IPv4/UDP packet of size bytes with the TOS byte tos
// (0x02: ECT(0)), from 10.0.0.1:9 to 10.0.0.2:9 (never sent anywhere: it
// only exists in memory), with a valid header checksum.
func UDPPacket(size int, tos uint8) []byte {
	b := make([]byte, size)
	b[0], b[1], b[8], b[9] = 0x45, tos, 64, 17
	binary.BigEndian.PutUint16(b[2:], uint16(size))
	copy(b[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(b[10:], ^uint16(sum))
	binary.BigEndian.PutUint16(b[20:], 9)
	binary.BigEndian.PutUint16(b[22:], 9)
	binary.BigEndian.PutUint16(b[24:], uint16(size-20))
	return b
}

// Overtakers counts the entries of seqs (sequence numbers in output order)
// followed later by a smaller one: packets that left before an earlier
// arrival (the reordering Simulate and the benchmarks report).
func Overtakers(seqs []uint64) uint64 {
	var n uint64
	minAfter := uint64(math.MaxUint64)
	for i := len(seqs) - 1; i >= 0; i-- {
		if minAfter < seqs[i] {
			n++
		}
		minAfter = min(minAfter, seqs[i])
	}
	return n
}

func delayStats(d []float64) DelayStats {
	if len(d) == 0 {
		return DelayStats{}
	}
	var s DelayStats
	var sum, sum2 float64
	for _, v := range d {
		sum += v
	}
	s.Mean = sum / float64(len(d))
	for _, v := range d {
		sum2 += (v - s.Mean) * (v - s.Mean)
	}
	s.Stddev = math.Sqrt(sum2 / float64(len(d)))
	slices.Sort(d)
	s.P50 = quantile(d, 0.50)
	s.P99 = quantile(d, 0.99)
	return s
}

// quantile is the nearest-rank quantile of sorted values.
func quantile(sorted []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

// expectation is what expected sums over a spec's stages: the prediction,
// the share of packets that pass, the delay variance in ms^2, and the
// simulated packet size (a child qdisc's limit in packets is in those).
type expectation struct {
	Expected
	pass, variance float64
	packetSize     int
}

// expected derives what a spec predicts for traffic offered at offeredBps.
func expected(s *spec.Spec, offeredBps float64, packetSize int) Expected {
	x := expectation{Expected: Expected{OfferedBps: offeredBps, RateBps: offeredBps}, pass: 1, packetSize: packetSize}
	for i, st := range s.Stages {
		var child spec.Stage
		if IsChild(s, i) {
			child = s.Stages[i+1]
		}
		if k, ok := stageKinds[st.Kind()]; ok && k.expect != nil {
			k.expect(st, child, &x)
		}
	}
	e := x.Expected
	e.RateBps = offeredBps * x.pass
	if e.BottleneckBps != 0 {
		e.RateBps = math.Min(e.RateBps, e.BottleneckBps)
	}
	e.LossPercent = 100 * (1 - x.pass)
	e.DelayStddevMs = math.Sqrt(x.variance)
	for _, f := range []*float64{&e.LossPercent, &e.DelayMeanMs, &e.DelayStddevMs, &e.QueueDelayMaxMs,
		&e.DuplicatePercent, &e.CorruptPercent, &e.ReorderPercent} {
		*f = math.Round(*f*1e9) / 1e9 // no float dust in the JSON
	}
	return e
}

// minRate is the smaller of two rates where 0 means "no limit".
func minRate(a, b float64) float64 {
	if a == 0 {
		return b
	}
	return math.Min(a, b)
}

// StationaryLoss returns the long-run loss probability of a loss model:
// P for random loss (what its correlation realizes, when it has one:
// CorrelatedProbability), the stationary probability of the loss states for the
// 4-state model, and pi_good*(1-k) + pi_bad*(1-h) for Gilbert-Elliott.
func StationaryLoss(l spec.Loss) float64 {
	switch l.Kind {
	case spec.LossRandom:
		return CorrelatedProbability(l.P.Prob(), l.Corr.Prob())
	case spec.LossGE:
		p, r := l.GP.Prob(), l.GR.Prob()
		if p+r == 0 {
			return l.GK.Prob() // never leaves the good state
		}
		bad := p / (p + r)
		return (1-bad)*l.GK.Prob() + bad*l.GH.Prob()
	case spec.LossState:
		pi := fourStateStationary(l)
		return pi[lostInBurst-1] + pi[lostInGap-1]
	}
	return 0
}

// fourStateStationary returns the stationary distribution of the 4-state
// chain of loss_4state (states 1..4 at indexes 0..3), by power iteration
// of the lazy chain (P+I)/2, which has the same stationary distribution
// and converges even when P is periodic.
func fourStateStationary(l spec.Loss) [4]float64 {
	p13, p31, p32, p23, p14 := l.P13.Prob(), l.P31.Prob(), l.P32.Prob(), l.P23.Prob(), l.P14.Prob()
	var P [4][4]float64
	P[0] = [4]float64{1 - p13 - p14, 0, p13, p14}
	P[1] = [4]float64{0, 1 - p23, p23, 0}
	P[2] = [4]float64{p31, p32, 1 - p31 - p32, 0}
	P[3] = [4]float64{1, 0, 0, 0}
	pi := [4]float64{1, 0, 0, 0}
	for k := 0; k < 1000000; k++ {
		var nx [4]float64
		for i := 0; i < 4; i++ {
			nx[i] += pi[i] / 2
			for j := 0; j < 4; j++ {
				nx[j] += pi[i] * P[i][j] / 2
			}
		}
		var diff float64
		for j := range nx {
			diff += math.Abs(nx[j] - pi[j])
		}
		pi = nx
		if diff < 1e-15 {
			break
		}
	}
	return pi
}

// WriteText prints r as a table of configured and realized values, or
// of its classes (Tree).
func (r *SimResult) WriteText(w io.Writer) error {
	if r.Tree != nil {
		return r.Tree.writeText(w)
	}
	var b strings.Builder
	c := r.Configured
	specText := spec.Abbrev(r.Spec)
	if specText == "" {
		specText = "(empty: no impairment)"
	}
	fmt.Fprintf(&b, "spec     %s\n", specText)
	fmt.Fprintf(&b, "traffic  %d packets of %d B at %g pkt/s (%s offered), seed %d, %s virtual\n\n",
		r.Packets, r.Size, r.PPS, bps(c.OfferedBps), r.Seed,
		time.Duration(r.DurationMs*1e6).Round(time.Millisecond))
	if n := len(r.Schedule); n > 0 {
		fmt.Fprintf(&b, "schedule %d steps applied\n", n)
		for i, st := range r.Schedule {
			if i == 8 && n > 10 {
				// The first eight and the last.
				fmt.Fprintf(&b, "  ... %d more\n", n-9)
				st = r.Schedule[n-1]
			}
			fmt.Fprintf(&b, "  at %s (line %d): %s\n", stepTime(st.AtMs), st.Line, spec.Abbrev(st.Spec))
			if i == 8 && n > 10 {
				break
			}
		}
		b.WriteString("\n")
	}
	// A correlated probability shows what it realizes beside what it says.
	noted := func(param string, conf string) string {
		var notes []string
		for _, z := range r.Realized {
			if z.Param == param {
				notes = append(notes, z.Note())
			}
		}
		switch {
		case len(notes) == 1 && len(r.Stages) <= 1:
			return notes[0]
		case len(notes) > 0:
			return conf + "; " + strings.Join(notes, "; ")
		}
		return conf
	}
	type line struct{ name, conf, real string }
	var lines []line
	row := func(name, conf, real string) { lines = append(lines, line{name, conf, real}) }
	row("packets", fmt.Sprint(r.PacketsIn), fmt.Sprintf("%d out", r.PacketsOut))
	aqm := ""
	if r.Drops.AQM > 0 {
		aqm = fmt.Sprintf(", aqm %d", r.Drops.AQM)
	}
	row("loss", noted("loss", pct(c.LossPercent)), fmt.Sprintf("%s (dropped: loss %d, queue %d, oversize %d%s)",
		pct(r.LossPercent), r.Drops.Loss, r.Drops.Queue, r.Drops.Oversize, aqm))
	row("delay mean", ms(c.DelayMeanMs), ms(r.Delay.Mean))
	row("delay stddev", ms(c.DelayStddevMs), ms(r.Delay.Stddev))
	row("delay p50/p99", "", ms(r.Delay.P50)+" / "+ms(r.Delay.P99))
	if conf := noted("delay correlation", ""); conf != "" {
		row("delay corr", conf, units.Sprintf("lag-1 %.3g", r.DelayLag1))
	}
	if c.QueueDelayMaxMs > 0 {
		row("tbf queueing", "<= "+ms(c.QueueDelayMaxMs), ms(math.Max(0, r.Delay.Mean-c.DelayMeanMs))+" mean")
	}
	rate := bps(c.RateBps)
	if c.BottleneckBps != 0 && c.BottleneckBps != c.RateBps {
		rate += " (limit " + bps(c.BottleneckBps) + ")"
	}
	row("rate", rate, bps(r.RateBps))
	row("duplicated", noted("duplicate", pct(c.DuplicatePercent)), count(r.Duplicated, r.PacketsIn))
	row("corrupted", noted("corrupt", pct(c.CorruptPercent)), count(r.Corrupted, r.PacketsIn))
	row("reordered", noted("reorder", pct(c.ReorderPercent)), count(r.Reordered, r.PacketsIn)+" overtook an earlier packet")
	row("ecn marked", "", count(r.ECNMarked, r.PacketsIn))
	width := 30
	for _, l := range lines {
		width = max(width, len(l.conf)+1)
	}
	fmt.Fprintf(&b, "%-14s %-*s %s\n", "", width, "configured", "realized")
	for _, l := range lines {
		fmt.Fprintf(&b, "%-14s %-*s %s\n", l.name, width, l.conf, l.real)
	}
	if len(r.Stages) > 1 || len(r.Stages) == 1 && r.Stages[0].Kind == "trace" {
		b.WriteString("\nper stage\n")
		for i, s := range r.Stages {
			extra := ""
			if s.Drops.AQM > 0 || s.SojournP99Ms > 0 {
				extra = fmt.Sprintf(" aqm %d", s.Drops.AQM)
			}
			soj := ms(s.SojournMeanMs)
			if s.SojournP99Ms > 0 {
				soj += fmt.Sprintf(" (p50 <= %s, p99 <= %s)", ms(s.SojournP50Ms), ms(s.SojournP99Ms))
			}
			fmt.Fprintf(&b, "  %d %-5s in %d, out %d, dropped loss %d queue %d oversize %d%s, mean sojourn %s\n",
				i+1, s.Kind, s.PacketsIn, s.PacketsOut, s.Drops.Loss, s.Drops.Queue, s.Drops.Oversize, extra, soj)
		}
	}
	for i, s := range r.Stages {
		if x := s.XStats.String(); x != "" {
			fmt.Fprintf(&b, "\nxstats of stage %d (%s): %s\n", i+1, s.Kind, x)
		}
	}
	if len(r.Warnings) > 0 {
		b.WriteString("\n")
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", warn)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func pct(v float64) string { return units.Sprintf("%.3g%%", v) }

// bps prints a rate with four significant digits ("49.99 Mbit/s").
func bps(v float64) string {
	for _, u := range []struct {
		div  float64
		name string
	}{{1e9, "Gbit/s"}, {1e6, "Mbit/s"}, {1e3, "kbit/s"}} {
		if v >= u.div {
			return units.Sprintf("%.4g %s", v/u.div, u.name)
		}
	}
	return units.Sprintf("%.4g bit/s", v)
}
func ms(v float64) string { return fmt.Sprintf("%.3fms", v) }
func count(n, of uint64) string {
	if of == 0 {
		return fmt.Sprint(n)
	}
	return units.Sprintf("%d (%.3g%%)", n, 100*float64(n)/float64(of))
}

// stepTime prints a schedule step's time ("10s", "0s").
func stepTime(atMs float64) string {
	if atMs == 0 {
		return "0s"
	}
	return units.FormatDuration(time.Duration(atMs * 1e6))
}
