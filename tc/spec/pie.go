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

// options are pie's, in the order tc's pie_print_opt prints them;
// q_pie.c's keywords.
func (q *PIE) options() []queueOption {
	return []queueOption{
		countOption("limit", &q.Limit, DefaultPIELimit, 1, math.MaxUint32, "PACKETS"),
		timeOption("target", &q.Target, DefaultPIETarget),
		timeOption("tupdate", &q.TUpdate, DefaultPIETUpdate),
		countOption("alpha", &q.Alpha, DefaultPIEAlpha, 1, 32, "1-32"),
		countOption("beta", &q.Beta, DefaultPIEBeta, 1, 32, "1-32"),
		flagOption("ecn", &q.ECN, "noecn"),
		flagOption("bytemode", &q.ByteMode, "nobytemode"),
		flagOption("dq_rate_estimator", &q.DQRateEstimator, "no_dq_rate_estimator"),
	}
}

// String prints the stage as tc's pie_print_opt does.
func (q *PIE) String() string { return printQueueOptions("pie", q.options()) }

func (q *PIE) validate() error {
	return checkQueueOptions("pie", q.options())
}

func init() {
	registerKind("pie", stageParser{parse: parseOptions[PIE], queue: true})
}
