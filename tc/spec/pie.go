package spec

import (
	"math"
	"time"
)

// PIE is tc-pie(8) (net/sched/sch_pie.c, include/net/pie.h). Zero fields
// are the kernel's defaults (pie_params_init).
type PIE struct {
	Limit   uint32        // packets; 0: 1000
	Target  time.Duration // target queue delay; 0: 15ms
	TUpdate time.Duration // interval between probability updates; 0: 15ms
	// Alpha and Beta weigh the delay's distance from target and its
	// change since the last update, in units of 1/16 (tc's 0-32); 0:
	// the defaults 2 and 20. (The kernel also takes 0, which wanlab
	// cannot express.)
	Alpha, Beta uint32
	ECN         bool // mark instead of dropping while the probability is at most 10%
	ByteMode    bool // scale the probability by packet size / MTU
	// DQRateEstimator estimates the queue delay from the departure rate
	// (RFC 8033) instead of the packets' time stamps (RFC 8034's default
	// since Linux 5.1).
	DQRateEstimator bool
}

// The kernel's defaults for pie.
const (
	DefaultPIELimit   = 1000
	DefaultPIETarget  = 15 * time.Millisecond
	DefaultPIETUpdate = 15 * time.Millisecond
	DefaultPIEAlpha   = 2
	DefaultPIEBeta    = 20
)

// Kind returns "pie".
func (*PIE) Kind() string { return "pie" }

// PacketLimit is the effective limit.
func (q *PIE) PacketLimit() uint32 { return or(q.Limit, DefaultPIELimit) }

// TargetTime is the effective target.
func (q *PIE) TargetTime() time.Duration { return or(q.Target, DefaultPIETarget) }

// TUpdateTime is the effective update interval.
func (q *PIE) TUpdateTime() time.Duration { return or(q.TUpdate, DefaultPIETUpdate) }

// AlphaValue is the effective alpha.
func (q *PIE) AlphaValue() uint32 { return or(q.Alpha, DefaultPIEAlpha) }

// BetaValue is the effective beta.
func (q *PIE) BetaValue() uint32 { return or(q.Beta, DefaultPIEBeta) }

// String prints the stage in the order tc's pie_print_opt does.
func (q *PIE) String() string {
	a := queueArgs{"pie"}
	a.count("limit", q.Limit)
	a.time("target", q.Target)
	a.time("tupdate", q.TUpdate)
	a.count("alpha", q.Alpha)
	a.count("beta", q.Beta)
	a.flag("ecn", q.ECN)
	a.flag("bytemode", q.ByteMode)
	a.flag("dq_rate_estimator", q.DQRateEstimator)
	return a.String()
}

func (q *PIE) validate() error {
	if q == nil {
		return &ParseError{Token: "pie", Msg: "pie stage is nil"}
	}
	if err := checkUsTimes("pie", namedTime{"target", q.Target}, namedTime{"tupdate", q.TUpdate}); err != nil {
		return err
	}
	if err := checkRange("pie", "alpha", uint64(q.Alpha), 1, 32); err != nil {
		return err
	}
	return checkRange("pie", "beta", uint64(q.Beta), 1, 32)
}

// parsePIE reads q_pie.c's keywords.
func parsePIE(kind token, toks []token) (Stage, error) {
	q := &PIE{}
	err := parseQueueArgs(kind, toks, keywords{
		"limit":                countKeyword(&q.Limit, DefaultPIELimit, 1, math.MaxUint32, "PACKETS"),
		"target":               timeKeyword(&q.Target, DefaultPIETarget),
		"tupdate":              timeKeyword(&q.TUpdate, DefaultPIETUpdate),
		"alpha":                countKeyword(&q.Alpha, DefaultPIEAlpha, 1, 32, "1-32"),
		"beta":                 countKeyword(&q.Beta, DefaultPIEBeta, 1, 32, "1-32"),
		"ecn":                  flagKeyword(&q.ECN, true),
		"noecn":                flagKeyword(&q.ECN, false),
		"bytemode":             flagKeyword(&q.ByteMode, true),
		"nobytemode":           flagKeyword(&q.ByteMode, false),
		"dq_rate_estimator":    flagKeyword(&q.DQRateEstimator, true),
		"no_dq_rate_estimator": flagKeyword(&q.DQRateEstimator, false),
	})
	if err != nil {
		return nil, err
	}
	return q, nil
}

func init() {
	registerKind("pie", stageParser{parse: parsePIE, queue: true})
}
