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

// aqmField is one u32 option of an AQM qdisc, bound to its field in a
// stage: enc gives the value to send and whether it was given (tc sends
// only those), dec sets the field from the value the kernel dumps.
type aqmField struct {
	typ uint16
	enc func() (uint32, bool)
	dec func(v uint32)
}

// numField is a plain number, def the kernel's default.
func numField[T ~uint32 | ~uint64](typ uint16, p *T, def T) aqmField {
	return aqmField{typ,
		func() (uint32, bool) { return uint32(*p), *p != 0 },
		func(v uint32) { *p = spec.ZeroIfDefault(T(v), def) }}
}

// usField is a time sent in microseconds, which the kernel keeps rounded as
// rt does (def its default, 0 for none).
func usField(typ uint16, p *time.Duration, rt func(uint32) uint32, def time.Duration) aqmField {
	return aqmField{typ,
		func() (uint32, bool) { return usOf(*p), *p != 0 },
		func(v uint32) { *p = spec.ZeroIfDefault(unround(v, rt), def) }}
}

// flagField is a switch sent as 1 when on.
func flagField(typ uint16, p *bool) aqmField {
	return aqmField{typ,
		func() (uint32, bool) { return 1, *p },
		func(v uint32) { *p = v != 0 }}
}

// exactUs is a time the kernel keeps in whole microseconds.
func exactUs(us uint32) uint32 { return us }

// The fields of each kind, in the order iproute2 sends them.

// codelFields are what q_codel.c's codel_parse_opt sends and codel_dump
// returns.
func codelFields(q *spec.CoDel) []aqmField {
	return []aqmField{
		numField(tcaCodelLimit, &q.Limit, spec.DefaultCoDelLimit),
		usField(tcaCodelInterval, &q.Interval, codelUs, spec.DefaultCoDelInterval),
		usField(tcaCodelTarget, &q.Target, codelUs, spec.DefaultCoDelTarget),
		flagField(tcaCodelECN, &q.ECN),
		usField(tcaCodelCEThreshold, &q.CEThreshold, codelUs, 0),
	}
}

// fqCodelFields are q_fq_codel.c's fq_codel_parse_opt and fq_codel_dump.
func fqCodelFields(q *spec.FQCoDel) []aqmField {
	return []aqmField{
		numField(tcaFQCodelLimit, &q.Limit, spec.DefaultFQCoDelLimit),
		numField(tcaFQCodelFlows, &q.Flows, spec.DefaultFQCoDelFlows),
		numField(tcaFQCodelQuantum, &q.Quantum, spec.DefaultFQCoDelQuantum),
		usField(tcaFQCodelInterval, &q.Interval, codelUs, spec.DefaultCoDelInterval),
		usField(tcaFQCodelTarget, &q.Target, codelUs, spec.DefaultCoDelTarget),
		// fq_codel's ECN is on unless "noecn" sends it as 0.
		{tcaFQCodelECN, func() (uint32, bool) { return 0, q.NoECN }, func(v uint32) { q.NoECN = v == 0 }},
		usField(tcaFQCodelCEThreshold, &q.CEThreshold, codelUs, 0),
		numField(tcaFQCodelMemoryLimit, &q.MemoryLimit, spec.DefaultFQCoDelMemoryLimit),
		numField(tcaFQCodelDropBatch, &q.DropBatch, spec.DefaultFQCoDelDropBatch),
	}
}

// pieFields are q_pie.c's pie_parse_opt and pie_dump. The kernel keeps
// tupdate in jiffies: 15 ms reads back as 16 ms on a kernel with HZ=250.
func pieFields(q *spec.PIE) []aqmField {
	return []aqmField{
		numField(tcaPIELimit, &q.Limit, spec.DefaultPIELimit),
		usField(tcaPIETUpdate, &q.TUpdate, exactUs, spec.DefaultPIETUpdate),
		usField(tcaPIETarget, &q.Target, pieUs, spec.DefaultPIETarget),
		numField(tcaPIEAlpha, &q.Alpha, spec.DefaultPIEAlpha),
		numField(tcaPIEBeta, &q.Beta, spec.DefaultPIEBeta),
		flagField(tcaPIEECN, &q.ECN),
		flagField(tcaPIEBytemode, &q.ByteMode),
		flagField(tcaPIEDQRateEstimator, &q.DQRateEstimator),
	}
}

// encodeAQM sends the fields given.
func encodeAQM(fields []aqmField) []byte {
	var a attrs
	for _, f := range fields {
		if v, ok := f.enc(); ok {
			a.u32(f.typ, v)
		}
	}
	return nonNil(a.b)
}

// decodeAQM reads a stage's fields from the options the kernel dumps.
func decodeAQM[Q any, P interface{ *Q }](b []byte, fields func(P) []aqmField) (P, error) {
	m, err := parseAttrs(b)
	if err != nil {
		return nil, err
	}
	q := P(new(Q))
	for _, f := range fields(q) {
		if v, ok := u32Attr(m, f.typ); ok {
			f.dec(v)
		}
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

// aqmCodec is the codec of a kind its u32 fields describe.
func aqmCodec[Q any, P interface {
	*Q
	spec.Stage
}](fields func(P) []aqmField) stageCodec {
	return stageCodec{
		encode: func(_ Clock, st spec.Stage) ([]byte, error) { return encodeAQM(fields(st.(P))), nil },
		decode: func(_ Clock, b []byte) (spec.Stage, error) { return decodeAQM(b, fields) },
	}
}

func init() {
	registerCodec("codel", aqmCodec(codelFields))
	registerCodec("fq_codel", aqmCodec(fqCodelFields))
	registerCodec("pie", aqmCodec(pieFields))
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
