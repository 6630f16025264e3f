package spec

import (
	"fmt"
	"math"
	"strconv"

	"github.com/wanlab/wanlab/units"
)

// RED is tc-red(8) (net/sched/sch_red.c, include/net/red.h). Limit and
// Avpkt are required, as q_red.c requires them; Min, Max and Burst are as
// typed (0: not given, computed by Params as q_red.c computes them),
// Probability and Bandwidth 0 mean q_red.c's defaults.
type RED struct {
	Limit units.Size // hard limit of the queue in bytes (red's bfifo child)
	Min   units.Size // average queue size at which marking starts; 0: Max/3
	Max   units.Size // average queue size at which marking is certain; 0: 3*Min, or Limit/4
	Avpkt units.Size // average packet size, for the EWMA's time constant
	Burst uint32     // packets of burst the average allows; 0: (2*Min+Max)/(3*Avpkt)
	// Probability is the marking probability at Max (max_P); 0: 0.02.
	Probability float64
	// Bandwidth is the link rate, for the average's decay while idle; 0:
	// 10mbit.
	Bandwidth units.Rate
	ECN       bool // mark ECN-capable packets instead of dropping them
	HardDrop  bool // with ECN: drop, not mark, above Max
	Adaptive  bool // Adaptive RED: tune max_P every 500ms towards a target band
	NoDrop    bool // with ECN: queue non-ECT packets instead of dropping them
}

// The defaults q_red.c fills in.
const (
	DefaultREDProbability = 0.02
	DefaultREDBandwidth   = units.Rate(10_000_000)
)

// Kind returns "red".
func (*RED) Kind() string { return "red" }

// REDParams are what tc sends the kernel for a red stage (struct
// tc_red_qopt, TCA_RED_STAB and TCA_RED_MAX_P) and what the kernel's
// red_set_parms works from, computed as q_red.c and tc_red.c do.
type REDParams struct {
	Limit, QthMin, QthMax uint32 // bytes
	Wlog, Plog, ScellLog  uint8
	Stab                  [256]uint8
	MaxP                  uint32 // probability * 2^32
	Burst                 uint32 // the burst used (computed when not given)
}

// Flags of struct tc_red_qopt (TC_RED_*) and the TCA_RED_FLAGS bit.
const (
	REDFlagECN      = 1
	REDFlagHardDrop = 2
	REDFlagAdaptive = 4
	REDFlagNoDrop   = 8
)

// FlagBits are the flags as TC_RED_* bits.
func (r *RED) FlagBits() uint8 {
	var f uint8
	if r.ECN {
		f |= REDFlagECN
	}
	if r.HardDrop {
		f |= REDFlagHardDrop
	}
	if r.Adaptive {
		f |= REDFlagAdaptive
	}
	if r.NoDrop {
		f |= REDFlagNoDrop
	}
	return f
}

// ProbabilityValue is the effective probability.
func (r *RED) ProbabilityValue() float64 { return or(r.Probability, DefaultREDProbability) }

// BandwidthRate is the effective bandwidth.
func (r *RED) BandwidthRate() units.Rate { return or(r.Bandwidth, DefaultREDBandwidth) }

// Params computes what tc sends for the stage, with tickInUsec the
// packet scheduler's ticks per microsecond (/proc/net/psched; 15.625 on
// every kernel since 2.6.31). It mirrors q_red.c's red_parse_opt: the
// thresholds' defaults after Sally Floyd's recommendations, then
// tc_red_eval_ewma, tc_red_eval_P and tc_red_eval_idle_damping.
func (r *RED) Params(tickInUsec float64) (REDParams, error) {
	var p REDParams
	if r.Limit == 0 || r.Avpkt == 0 {
		return p, fmt.Errorf("red: limit and avpkt are required")
	}
	if r.Limit > math.MaxUint32 || r.Min > math.MaxUint32 || r.Max > math.MaxUint32 || r.Avpkt > math.MaxUint32 {
		return p, fmt.Errorf("red: sizes must be below 4gb")
	}
	p.Limit, p.QthMin, p.QthMax = uint32(r.Limit), uint32(r.Min), uint32(r.Max)
	avpkt := uint32(r.Avpkt)
	if p.QthMax == 0 {
		if p.QthMin != 0 {
			p.QthMax = p.QthMin * 3
		} else {
			p.QthMax = p.Limit / 4
		}
	}
	if p.QthMin == 0 {
		p.QthMin = p.QthMax / 3
	}
	p.Burst = r.Burst
	if p.Burst == 0 {
		p.Burst = (2*p.QthMin + p.QthMax) / (3 * avpkt)
	}
	wlog, err := redEvalEWMA(p.QthMin, p.Burst, avpkt)
	if err != nil {
		return p, err
	}
	prob := r.ProbabilityValue()
	plog, err := redEvalP(p.QthMin, p.QthMax, prob)
	if err != nil {
		return p, err
	}
	rate := uint64(r.BandwidthRate() / 8)
	slog, err := redEvalIdleDamping(wlog, avpkt, uint32(rate), tickInUsec, &p.Stab)
	if err != nil {
		return p, err
	}
	p.Wlog, p.Plog, p.ScellLog = uint8(wlog), uint8(plog), uint8(slog)
	p.MaxP = uint32(prob * math.Pow(2, 32))
	// The kernel's red_check_params.
	if bitsLen(p.QthMin)+wlog >= 32 || bitsLen(p.QthMax)+wlog >= 32 {
		return p, fmt.Errorf("red: min %d or max %d too large for the average's %d bits of weight", p.QthMin, p.QthMax, wlog)
	}
	if p.QthMax < p.QthMin {
		return p, fmt.Errorf("red: max %d below min %d", p.QthMax, p.QthMin)
	}
	return p, nil
}

func bitsLen(v uint32) int {
	n := 0
	for ; v != 0; v >>= 1 {
		n++
	}
	return n
}

// redEvalP is tc_red_eval_P: Plog = log2(prob/(qmax - qmin)).
func redEvalP(qmin, qmax uint32, prob float64) (int, error) {
	i := int64(qmax) - int64(qmin)
	if i == 0 {
		return 0, nil
	}
	if i < 0 {
		return 0, fmt.Errorf("red: max %d below min %d", qmax, qmin)
	}
	prob /= float64(i)
	n := 0
	for ; n < 32; n++ {
		if prob > 1.0 {
			break
		}
		prob *= 2
	}
	if n >= 32 {
		return 0, fmt.Errorf("red: failed to calculate probability (max - min too large for probability %g)", prob)
	}
	return n, nil
}

// redEvalEWMA is tc_red_eval_ewma: the smallest W = 2^-Wlog with
// burst + 1 - qmin/avpkt <= (1-(1-W)^burst)/W.
func redEvalEWMA(qmin, burst, avpkt uint32) (int, error) {
	a := float64(burst) + 1 - float64(qmin)/float64(avpkt)
	if a < 1.0 {
		return 0, fmt.Errorf("red: burst %d is too small, try burst %d", burst, 1+qmin/avpkt)
	}
	w := 0.5
	for wlog := 1; wlog < 32; wlog++ {
		if a <= (1-math.Pow(1-w, float64(burst)))/w {
			return wlog, nil
		}
		w /= 2
	}
	return 0, fmt.Errorf("red: failed to calculate EWMA constant (burst %d)", burst)
}

// redEvalIdleDamping is tc_red_eval_idle_damping: the table of shifts
// that decay the average over an idle time, Stab[t>>Scell_log] =
// -log(1-W) * t/xmit_time, capped at 31. (tc computes xmit_time in
// scheduler ticks while the kernel indexes the table with microseconds;
// both are mirrored as they are.)
func redEvalIdleDamping(wlog int, avpkt, bps uint32, tickInUsec float64, stab *[256]uint8) (int, error) {
	if bps == 0 {
		return 0, fmt.Errorf("red: bandwidth below one byte per second")
	}
	xmit := math.Ceil(1e6 * (float64(avpkt) / float64(bps)) * tickInUsec) // tc_calc_xmittime
	lw := -math.Log(1.0-1.0/float64(uint32(1)<<wlog)) / xmit
	maxtime := 31 / lw
	clog := 0
	for ; clog < 32; clog++ {
		if maxtime/float64(uint64(1)<<clog) < 512 {
			break
		}
	}
	if clog >= 32 {
		return 0, fmt.Errorf("red: failed to calculate idle damping table")
	}
	stab[0] = 0
	for i := 1; i < 255; i++ {
		v := float64(uint64(i)<<clog) * lw
		if v > 31 {
			v = 31
		}
		stab[i] = uint8(v)
	}
	stab[255] = 31
	return clog, nil
}

// options are red's, in the order String prints them (limit, min, max,
// avpkt, burst, probability, bandwidth, then the flags); q_red.c's
// keywords ("adaptative" is its old spelling).
func (r *RED) options() []queueOption {
	size := func(kw string, dst *units.Size) queueOption { return sizeOption(kw, dst, 0, 1, math.MaxUint32) }
	adaptive := flagOption("adaptive", &r.Adaptive)
	adaptive.keys["adaptative"] = adaptive.keys["adaptive"]
	return []queueOption{
		size("limit", &r.Limit), size("min", &r.Min), size("max", &r.Max), size("avpkt", &r.Avpkt),
		countOption("burst", &r.Burst, 0, 1, math.MaxUint32, "PACKETS"),
		{
			keys: keywords{"probability": overwrite(func(kw token, c *cursor) error {
				t, err := c.need(kw, "PROBABILITY")
				if err != nil {
					return err
				}
				v, err := strconv.ParseFloat(t.text, 64)
				if err != nil || !(v > 0 && v < 1) {
					return &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("probability %s: must be a number between 0 and 1", t.text)}
				}
				r.Probability = ZeroIfDefault(v, DefaultREDProbability)
				return nil
			})},
			print: func(a *queueArgs) {
				if r.Probability != 0 {
					*a = append(*a, "probability", strconv.FormatFloat(r.Probability, 'g', -1, 64))
				}
			},
		},
		{
			keys: keywords{"bandwidth": overwrite(func(kw token, c *cursor) error {
				t, err := c.need(kw, "RATE")
				if err != nil {
					return err
				}
				v, err := rateArg("bandwidth", t)
				if err != nil {
					return err
				}
				if v < 8 {
					return &ParseError{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf("bandwidth %s: must be at least 8bit", t.text)}
				}
				r.Bandwidth = ZeroIfDefault(v, DefaultREDBandwidth)
				return nil
			})},
			print: func(a *queueArgs) {
				if r.Bandwidth != 0 {
					*a = append(*a, "bandwidth", r.Bandwidth.String())
				}
			},
		},
		flagOption("ecn", &r.ECN), flagOption("harddrop", &r.HardDrop), adaptive, flagOption("nodrop", &r.NoDrop),
	}
}

// String prints the stage, leaving out what was not given.
func (r *RED) String() string { return printQueueOptions("red", r.options()) }

func (r *RED) validate() error {
	if !(r.Probability >= 0 && r.Probability < 1) {
		return &ParseError{Token: "red", Msg: fmt.Sprintf("red: probability %g: must be between 0 and 1", r.Probability)}
	}
	if _, err := r.Params(defaultTickInUsec); err != nil {
		return &ParseError{Token: "red", Msg: err.Error()}
	}
	return nil
}

// defaultTickInUsec is every kernel's packet scheduler clock since
// 2.6.31 (64 ns ticks).
const defaultTickInUsec = 1000.0 / 64

func parseRED(kind token, toks []token) (Stage, error) {
	r := &RED{}
	if err := parseQueueOptions(kind, toks, r.options()); err != nil {
		return nil, err
	}
	if r.Limit == 0 || r.Avpkt == 0 {
		return nil, &ParseError{Pos: kind.pos, Token: kind.text, Msg: "red: limit and avpkt are required"}
	}
	if _, err := r.Params(defaultTickInUsec); err != nil {
		return nil, &ParseError{Pos: kind.pos, Token: kind.text, Msg: err.Error()}
	}
	return r, nil
}

func init() {
	registerKind("red", stageParser{parse: parseRED, queue: true})
}
