package kernel

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// The AQM qdiscs' TCA_OPTIONS are nested attributes (pkt_sched.h's
// TCA_CODEL_*, TCA_FQ_CODEL_*, TCA_PIE_*, TCA_RED_*). The encoders send
// what iproute2's q_codel.c, q_fq_codel.c, q_pie.c and q_red.c send: only
// the values given (a zero field, the kernel's default, is left out), in
// their order. The decoders read what codel_dump, fq_codel_dump, pie_dump
// and red_dump send back, a value equal to the kernel's default read as
// "not given".

const (
	tcaCodelTarget      = 1
	tcaCodelLimit       = 2
	tcaCodelInterval    = 3
	tcaCodelECN         = 4
	tcaCodelCEThreshold = 5

	tcaFQCodelTarget      = 1
	tcaFQCodelLimit       = 2
	tcaFQCodelInterval    = 3
	tcaFQCodelECN         = 4
	tcaFQCodelFlows       = 5
	tcaFQCodelQuantum     = 6
	tcaFQCodelCEThreshold = 7
	tcaFQCodelDropBatch   = 8
	tcaFQCodelMemoryLimit = 9

	tcaPIETarget          = 1
	tcaPIELimit           = 2
	tcaPIETUpdate         = 3
	tcaPIEAlpha           = 4
	tcaPIEBeta            = 5
	tcaPIEECN             = 6
	tcaPIEBytemode        = 7
	tcaPIEDQRateEstimator = 8

	tcaREDParms = 1
	tcaREDStab  = 2
	tcaREDMaxP  = 3
	tcaREDFlags = 4

	redSupportedFlags = spec.REDFlagECN | spec.REDFlagHardDrop | spec.REDFlagAdaptive | spec.REDFlagNoDrop
)

func usOf(d time.Duration) uint32 { return uint32(d / time.Microsecond) }

func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// codelUs is what codel_dump reports for a time set as us microseconds:
// the kernel keeps it in codel_time_t (ns >> 10) and converts back with
// codel_time_to_us, so 5000 us reads back as 4999.
func codelUs(us uint32) uint32 { return uint32(((uint64(us) * 1000 >> 10) << 10) / 1000) }

// pieUs is what pie_dump reports for a target of us microseconds (kept
// in 64 ns psched ticks).
func pieUs(us uint32) uint32 { return uint32(((uint64(us) * 1000 >> 6) << 6) / 1000) }

// unround returns the smallest whole-microsecond time the kernel reports
// as d after its rounding rt: the value tc was most likely given.
func unround(d uint32, rt func(uint32) uint32) time.Duration {
	for t := uint64(d); t <= uint64(d)+3 && t <= math.MaxUint32; t++ {
		if rt(uint32(t)) == d {
			return time.Duration(t) * time.Microsecond
		}
	}
	return time.Duration(d) * time.Microsecond
}

// EncodeCoDel is q_codel.c's codel_parse_opt.
func EncodeCoDel(q *spec.CoDel) []byte {
	var a attrs
	if q.Limit != 0 {
		a.u32(tcaCodelLimit, q.Limit)
	}
	if q.Interval != 0 {
		a.u32(tcaCodelInterval, usOf(q.Interval))
	}
	if q.Target != 0 {
		a.u32(tcaCodelTarget, usOf(q.Target))
	}
	if q.ECN {
		a.u32(tcaCodelECN, 1)
	}
	if q.CEThreshold != 0 {
		a.u32(tcaCodelCEThreshold, usOf(q.CEThreshold))
	}
	return nonNil(a.b)
}

// DecodeCoDel reads codel_dump's options.
func DecodeCoDel(b []byte) (*spec.CoDel, error) {
	m, err := parseAttrs(b)
	if err != nil {
		return nil, err
	}
	q := &spec.CoDel{}
	if v, ok := u32Attr(m, tcaCodelLimit); ok {
		q.Limit = spec.ZeroIfDefault(v, spec.DefaultCoDelLimit)
	}
	if v, ok := u32Attr(m, tcaCodelTarget); ok {
		q.Target = spec.ZeroIfDefault(unround(v, codelUs), spec.DefaultCoDelTarget)
	}
	if v, ok := u32Attr(m, tcaCodelInterval); ok {
		q.Interval = spec.ZeroIfDefault(unround(v, codelUs), spec.DefaultCoDelInterval)
	}
	if v, ok := u32Attr(m, tcaCodelECN); ok {
		q.ECN = v != 0
	}
	if v, ok := u32Attr(m, tcaCodelCEThreshold); ok {
		q.CEThreshold = unround(v, codelUs)
	}
	return q, nil
}

// EncodeFQCoDel is q_fq_codel.c's fq_codel_parse_opt.
func EncodeFQCoDel(q *spec.FQCoDel) []byte {
	var a attrs
	if q.Limit != 0 {
		a.u32(tcaFQCodelLimit, q.Limit)
	}
	if q.Flows != 0 {
		a.u32(tcaFQCodelFlows, q.Flows)
	}
	if q.Quantum != 0 {
		a.u32(tcaFQCodelQuantum, q.Quantum)
	}
	if q.Interval != 0 {
		a.u32(tcaFQCodelInterval, usOf(q.Interval))
	}
	if q.Target != 0 {
		a.u32(tcaFQCodelTarget, usOf(q.Target))
	}
	if q.NoECN {
		a.u32(tcaFQCodelECN, 0)
	}
	if q.CEThreshold != 0 {
		a.u32(tcaFQCodelCEThreshold, usOf(q.CEThreshold))
	}
	if q.MemoryLimit != 0 {
		a.u32(tcaFQCodelMemoryLimit, uint32(q.MemoryLimit))
	}
	if q.DropBatch != 0 {
		a.u32(tcaFQCodelDropBatch, q.DropBatch)
	}
	return nonNil(a.b)
}

// DecodeFQCoDel reads fq_codel_dump's options.
func DecodeFQCoDel(b []byte) (*spec.FQCoDel, error) {
	m, err := parseAttrs(b)
	if err != nil {
		return nil, err
	}
	q := &spec.FQCoDel{}
	if v, ok := u32Attr(m, tcaFQCodelLimit); ok {
		q.Limit = spec.ZeroIfDefault(v, spec.DefaultFQCoDelLimit)
	}
	if v, ok := u32Attr(m, tcaFQCodelFlows); ok {
		q.Flows = spec.ZeroIfDefault(v, spec.DefaultFQCoDelFlows)
	}
	if v, ok := u32Attr(m, tcaFQCodelQuantum); ok {
		q.Quantum = spec.ZeroIfDefault(v, spec.DefaultFQCoDelQuantum)
	}
	if v, ok := u32Attr(m, tcaFQCodelTarget); ok {
		q.Target = spec.ZeroIfDefault(unround(v, codelUs), spec.DefaultCoDelTarget)
	}
	if v, ok := u32Attr(m, tcaFQCodelInterval); ok {
		q.Interval = spec.ZeroIfDefault(unround(v, codelUs), spec.DefaultCoDelInterval)
	}
	if v, ok := u32Attr(m, tcaFQCodelECN); ok {
		q.NoECN = v == 0
	}
	if v, ok := u32Attr(m, tcaFQCodelCEThreshold); ok {
		q.CEThreshold = unround(v, codelUs)
	}
	if v, ok := u32Attr(m, tcaFQCodelMemoryLimit); ok {
		q.MemoryLimit = spec.ZeroIfDefault(units.Size(v), spec.DefaultFQCoDelMemoryLimit)
	}
	if v, ok := u32Attr(m, tcaFQCodelDropBatch); ok {
		q.DropBatch = spec.ZeroIfDefault(v, spec.DefaultFQCoDelDropBatch)
	}
	return q, nil
}

// EncodePIE is q_pie.c's pie_parse_opt.
func EncodePIE(q *spec.PIE) []byte {
	var a attrs
	if q.Limit != 0 {
		a.u32(tcaPIELimit, q.Limit)
	}
	if q.TUpdate != 0 {
		a.u32(tcaPIETUpdate, usOf(q.TUpdate))
	}
	if q.Target != 0 {
		a.u32(tcaPIETarget, usOf(q.Target))
	}
	if q.Alpha != 0 {
		a.u32(tcaPIEAlpha, q.Alpha)
	}
	if q.Beta != 0 {
		a.u32(tcaPIEBeta, q.Beta)
	}
	if q.ECN {
		a.u32(tcaPIEECN, 1)
	}
	if q.ByteMode {
		a.u32(tcaPIEBytemode, 1)
	}
	if q.DQRateEstimator {
		a.u32(tcaPIEDQRateEstimator, 1)
	}
	return nonNil(a.b)
}

// DecodePIE reads pie_dump's options. The kernel keeps tupdate in
// jiffies: 15 ms reads back as 16 ms on a kernel with HZ=250.
func DecodePIE(b []byte) (*spec.PIE, error) {
	m, err := parseAttrs(b)
	if err != nil {
		return nil, err
	}
	q := &spec.PIE{}
	if v, ok := u32Attr(m, tcaPIELimit); ok {
		q.Limit = spec.ZeroIfDefault(v, spec.DefaultPIELimit)
	}
	if v, ok := u32Attr(m, tcaPIETarget); ok {
		q.Target = spec.ZeroIfDefault(unround(v, pieUs), spec.DefaultPIETarget)
	}
	if v, ok := u32Attr(m, tcaPIETUpdate); ok {
		q.TUpdate = spec.ZeroIfDefault(time.Duration(v)*time.Microsecond, spec.DefaultPIETUpdate)
	}
	if v, ok := u32Attr(m, tcaPIEAlpha); ok {
		q.Alpha = spec.ZeroIfDefault(v, spec.DefaultPIEAlpha)
	}
	if v, ok := u32Attr(m, tcaPIEBeta); ok {
		q.Beta = spec.ZeroIfDefault(v, spec.DefaultPIEBeta)
	}
	if v, ok := u32Attr(m, tcaPIEECN); ok {
		q.ECN = v != 0
	}
	if v, ok := u32Attr(m, tcaPIEBytemode); ok {
		q.ByteMode = v != 0
	}
	if v, ok := u32Attr(m, tcaPIEDQRateEstimator); ok {
		q.DQRateEstimator = v != 0
	}
	return q, nil
}

// EncodeRED is q_red.c's red_parse_opt: struct tc_red_qopt with the
// thresholds and the logs tc_red_eval_* compute, the idle damping table,
// max_P, and the flags as a TCA_RED_FLAGS bitfield (selector: all four).
func (c Clock) EncodeRED(q *spec.RED) ([]byte, error) {
	p, err := q.Params(c.TickInUsec)
	if err != nil {
		return nil, err
	}
	flags := q.FlagBits()
	var w wire
	w.u32(p.Limit)
	w.u32(p.QthMin)
	w.u32(p.QthMax)
	w.u8(p.Wlog)
	w.u8(p.Plog)
	w.u8(p.ScellLog)
	w.u8(0) // the flags go in TCA_RED_FLAGS, as tc 6.1 and later send them
	var a attrs
	a.add(tcaREDParms, w.b)
	a.add(tcaREDStab, p.Stab[:])
	a.u32(tcaREDMaxP, p.MaxP)
	var bf wire
	bf.u32(uint32(flags)) // struct nla_bitfield32: value, selector
	bf.u32(redSupportedFlags)
	a.add(tcaREDFlags, bf.b)
	return a.b, nil
}

// REDDump is what red_dump reports: struct tc_red_qopt, max_P and the
// flags. The kernel keeps no avpkt, burst or bandwidth, only the logs tc
// derived from them.
type REDDump struct {
	Limit, QthMin, QthMax uint32
	Wlog, Plog, ScellLog  uint8
	Flags                 uint8
	MaxP                  uint32
}

// ParseREDDump reads red_dump's options.
func ParseREDDump(b []byte) (REDDump, error) {
	var d REDDump
	m, err := parseAttrs(b)
	if err != nil {
		return d, err
	}
	pb, ok := m[tcaREDParms]
	if !ok {
		return d, fmt.Errorf("red options without TCA_RED_PARMS")
	}
	r := reader{b: pb}
	d.Limit, d.QthMin, d.QthMax = r.u32(), r.u32(), r.u32()
	d.Wlog, d.Plog, d.ScellLog, d.Flags = r.u8(), r.u8(), r.u8(), r.u8()
	if r.err != nil {
		return d, fmt.Errorf("red options: %w", r.err)
	}
	if v, ok := u32Attr(m, tcaREDMaxP); ok {
		d.MaxP = v
	}
	if v, ok := m[tcaREDFlags]; ok && len(v) >= 4 {
		d.Flags |= uint8(native.Uint32(v))
	}
	return d, nil
}

// DecodeRED reads red_dump's options into a stage with what the kernel
// keeps: limit, min, max, probability and the flags (without avpkt it
// does not parse back; ParseREDDump has the logs).
func DecodeRED(b []byte) (*spec.RED, error) {
	d, err := ParseREDDump(b)
	if err != nil {
		return nil, err
	}
	q := &spec.RED{Limit: units.Size(d.Limit), Min: units.Size(d.QthMin), Max: units.Size(d.QthMax),
		ECN: d.Flags&spec.REDFlagECN != 0, HardDrop: d.Flags&spec.REDFlagHardDrop != 0,
		Adaptive: d.Flags&spec.REDFlagAdaptive != 0, NoDrop: d.Flags&spec.REDFlagNoDrop != 0}
	q.Probability = spec.ZeroIfDefault(maxPProbability(d.MaxP), spec.DefaultREDProbability)
	return q, nil
}

// maxPProbability is the shortest decimal probability tc turns into
// max_P (max_P = probability * 2^32, truncated).
func maxPProbability(maxP uint32) float64 {
	exact := float64(maxP) / (1 << 32)
	for prec := 1; prec <= 17; prec++ {
		v, _ := strconv.ParseFloat(strconv.FormatFloat(exact, 'g', prec, 64), 64)
		if uint32(v*(1<<32)) == maxP {
			return v
		}
	}
	return exact
}

func u32Attr(m map[uint16][]byte, typ uint16) (uint32, bool) {
	v, ok := m[typ]
	if !ok || len(v) < 4 {
		return 0, false
	}
	return native.Uint32(v), true
}

func init() {
	registerCodec("codel", stageCodec{
		encode: func(_ Clock, st spec.Stage) ([]byte, error) { return EncodeCoDel(st.(*spec.CoDel)), nil },
		decode: func(_ Clock, b []byte) (spec.Stage, error) { return DecodeCoDel(b) },
	})
	registerCodec("fq_codel", stageCodec{
		encode: func(_ Clock, st spec.Stage) ([]byte, error) { return EncodeFQCoDel(st.(*spec.FQCoDel)), nil },
		decode: func(_ Clock, b []byte) (spec.Stage, error) { return DecodeFQCoDel(b) },
	})
	registerCodec("pie", stageCodec{
		encode: func(_ Clock, st spec.Stage) ([]byte, error) { return EncodePIE(st.(*spec.PIE)), nil },
		decode: func(_ Clock, b []byte) (spec.Stage, error) { return DecodePIE(b) },
	})
	registerCodec("red", stageCodec{
		encode: func(c Clock, st spec.Stage) ([]byte, error) { return c.EncodeRED(st.(*spec.RED)) },
		decode: func(_ Clock, b []byte) (spec.Stage, error) { return DecodeRED(b) },
	})
}

// nonNil makes "no options given" an empty TCA_OPTIONS nest, as tc sends
// it, rather than none.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
