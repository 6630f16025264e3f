package kernel

import (
	"fmt"
	"math"
	"math/bits"
	"os"
	"strings"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// TCA_TBF_* attribute types.
const (
	tcaTBFParms   = 1
	tcaTBFRTab    = 2
	tcaTBFPTab    = 3
	tcaTBFRate64  = 4
	tcaTBFPRate64 = 5
	tcaTBFBurst   = 6
	tcaTBFPBurst  = 7

	linkLayerEthernet = 1 // TC_LINKLAYER_ETHERNET
	linkLayerATM      = 2 // TC_LINKLAYER_ATM
)

// Clock is the packet scheduler's time base from /proc/net/psched, which
// tc reads in tc_core_init to convert times to the ticks the kernel's
// tc_tbf_qopt carries.
type Clock struct {
	TickInUsec float64 // ticks per microsecond
	// Hz is what tc's get_hz reads there: the clock resolution, which
	// q_htb.c divides rates by for its default bursts.
	Hz uint64
}

// DefaultClock is every Linux kernel since 2.6.31: 64 ns ticks (t2us 1000,
// us2t 64, clock_res 1e6 in /proc/net/psched)
// (and a 1 GHz clock resolution).
var DefaultClock = Clock{TickInUsec: 1000.0 / 64, Hz: 1e9}

// ReadClock reads /proc/net/psched as tc_core_init does.
func ReadClock(path string) (Clock, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return DefaultClock, err
	}
	var t2us, us2t, res, hz uint32
	if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%08x %08x %08x %08x", &t2us, &us2t, &res, &hz); err != nil {
		return DefaultClock, fmt.Errorf("%s: %w", path, err)
	}
	c := Clock{Hz: 1000} // iproute2's HZ fallback
	if res == 1000000 {
		c.Hz = uint64(hz)
	}
	if res == 1000000000 {
		t2us = us2t
	}
	if us2t == 0 {
		return DefaultClock, fmt.Errorf("%s: zero tick", path)
	}
	c.TickInUsec = float64(t2us) / float64(us2t) * float64(res) / 1e6
	return c, nil
}

// xmittime is tc_calc_xmittime: the ticks size bytes take at rate bytes/s.
func (c Clock) xmittime(rate, size uint64) uint32 {
	v := math.Ceil(1e6 * (float64(size) / float64(rate)) * c.TickInUsec)
	if v > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(v)
}

// ratespec is struct tc_ratespec.
type ratespec struct {
	cellLog   uint8
	linkLayer uint8
	overhead  uint16
	cellAlign int16
	mpu       uint16
	rate      uint32
}

// rate64Of is a rate in bytes per second: the 64-bit attribute typ the
// kernel adds for a rate of 2^32 or more, else r's 32-bit field.
func rate64Of(m map[uint16][]byte, typ uint16, r ratespec) uint64 {
	if v, ok := m[typ]; ok && len(v) == 8 {
		return native.Uint64(v)
	}
	return uint64(r.rate)
}

// parmsOf splits dumped options into attributes and opens the kind's
// parameters struct, attribute typ (named name), for reading; what names
// the options in errors.
func parmsOf(b []byte, what string, typ uint16, name string) (map[uint16][]byte, reader, error) {
	m, err := parseAttrs(b)
	if err != nil {
		return nil, reader{}, fmt.Errorf("%s: %w", what, err)
	}
	v, ok := m[typ]
	if !ok {
		return nil, reader{}, fmt.Errorf("%s: no %s", what, name)
	}
	return m, reader{b: v}, nil
}

func (r ratespec) put(w *wire) {
	w.u8(r.cellLog)
	w.u8(r.linkLayer)
	w.u16(r.overhead)
	w.u16(uint16(r.cellAlign))
	w.u16(r.mpu)
	w.u32(r.rate)
}

func getRatespec(r *reader) ratespec {
	return ratespec{cellLog: r.u8(), linkLayer: r.u8(), overhead: r.u16(), cellAlign: int16(r.u16()), mpu: r.u16(), rate: r.u32()}
}

// rtable is tc_calc_rtable: the transmit time of each 2^cellLog-byte step
// of packet size. Kernels since 3.8 compute transmit times exactly and use
// the table only to detect a link layer tc did not announce; it is sent
// because tc sends it and old kernels need it.
func (c Clock) rtable(r *ratespec, cellLog int, mtu uint32, atm bool) []byte {
	if mtu == 0 {
		mtu = 2047
	}
	if cellLog < 0 {
		cellLog = 0
		for (mtu >> cellLog) > 255 {
			cellLog++
		}
	}
	b := make([]byte, 0, 1024)
	for i := range 256 {
		sz := uint32(i+1) << cellLog
		if sz < uint32(r.mpu) {
			sz = uint32(r.mpu)
		}
		if atm {
			sz = (sz + 47) / 48 * 53 // tc_align_to_atm: whole 53-byte cells of 48 payload bytes
		}
		b = native.AppendUint32(b, c.xmittime(uint64(r.rate), uint64(sz)))
	}
	r.cellAlign = -1
	r.cellLog = uint8(cellLog)
	r.linkLayer = linkLayerEthernet
	if atm {
		r.linkLayer = linkLayerATM
	}
	return b
}

func cellLogOf(cell units.Size) int {
	if cell == 0 {
		return -1
	}
	return bits.TrailingZeros64(uint64(cell))
}

// EncodeTBF returns the TCA_OPTIONS payload for a tbf qdisc exactly as
// q_tbf.c builds it: TCA_TBF_PARMS (struct tc_tbf_qopt with times in
// ticks), TCA_TBF_BURST, TCA_TBF_RATE64 for rates of 2^32 bytes/s and
// more, the rate table, and with a peakrate TCA_TBF_PRATE64,
// TCA_TBF_PBURST and the peak rate table.
func (c Clock) EncodeTBF(b *spec.TBF) ([]byte, error) {
	rate64, prate64 := uint64(b.Rate/8), uint64(b.PeakRate/8)
	if rate64 == 0 {
		return nil, fmt.Errorf("tbf rate %s: below one byte per second", b.Rate)
	}
	if b.MPU > math.MaxUint16 {
		return nil, fmt.Errorf("tbf mpu %s: at most 65535 bytes", b.MPU)
	}
	if b.MTU > math.MaxUint32 {
		return nil, fmt.Errorf("tbf mtu %s: too large", b.MTU)
	}
	mtu := uint32(b.MTU)
	atm := b.LinkLayer == spec.LinkATM
	rate := ratespec{rate: uint32(min(rate64, math.MaxUint32)), mpu: uint16(b.MPU), overhead: b.Overhead}
	if rate64 >= 1<<32 {
		rate.rate = math.MaxUint32
	}
	limit := b.QueueLimit()
	if limit > math.MaxUint32 {
		return nil, fmt.Errorf("tbf limit %s: too large", limit)
	}
	rtab := c.rtable(&rate, cellLogOf(b.BurstCell), mtu, atm)
	// tc computes the bucket time from the 32-bit rate field.
	buffer := c.xmittime(uint64(rate.rate), uint64(b.Burst))
	if buffer == math.MaxUint32 {
		return nil, fmt.Errorf("tbf burst %s: out of range at rate %s", b.Burst, b.Rate)
	}
	var peak ratespec
	var ptab []byte
	var mtuTicks uint32
	if prate64 != 0 {
		peak = ratespec{rate: uint32(min(prate64, math.MaxUint32)), mpu: uint16(b.MPU), overhead: b.Overhead}
		ptab = c.rtable(&peak, cellLogOf(b.MTUCell), mtu, atm)
		mtuTicks = c.xmittime(uint64(peak.rate), uint64(mtu))
	}
	var w wire
	rate.put(&w)
	peak.put(&w)
	w.u32(uint32(limit))
	w.u32(buffer)
	w.u32(mtuTicks)

	var a attrs
	a.add(tcaTBFParms, w.b)
	if b.Burst < 1<<32 {
		a.u32(tcaTBFBurst, uint32(b.Burst))
	}
	if rate64 >= 1<<32 {
		a.u64(tcaTBFRate64, rate64)
	}
	a.add(tcaTBFRTab, rtab)
	if prate64 != 0 {
		if prate64 >= 1<<32 {
			a.u64(tcaTBFPRate64, prate64)
		}
		a.u32(tcaTBFPBurst, mtu)
		a.add(tcaTBFPTab, ptab)
	}
	return a.b, nil
}

// tbfParams is what the kernel keeps of a tbf and dumps back.
type tbfParams struct {
	rate, peak         ratespec
	rate64, prate64    uint64
	limit, buffer, mtu uint32
}

func parseTBF(b []byte) (tbfParams, error) {
	var p tbfParams
	m, r, err := parmsOf(b, "tbf options", tcaTBFParms, "TCA_TBF_PARMS")
	if err != nil {
		return p, err
	}
	p.rate, p.peak = getRatespec(&r), getRatespec(&r)
	p.limit, p.buffer, p.mtu = r.u32(), r.u32(), r.u32()
	if r.err != nil {
		return p, fmt.Errorf("tbf parameters: %w", r.err)
	}
	p.rate64, p.prate64 = rate64Of(m, tcaTBFRate64, p.rate), rate64Of(m, tcaTBFPRate64, p.peak)
	return p, nil
}

// DecodeTBF reads a tbf TCA_OPTIONS payload as the kernel dumps it
// (tbf_dump). The kernel keeps the bucket sizes as times in ticks, so
// burst and mtu come back as the byte counts tc_calc_xmitsize gives, each
// rounded to the shortest size (in tc's units) that encodes to the same
// ticks. The limit is read as a byte limit (the kernel keeps no latency),
// and the "/cell" of burst and mtu is not kept by the kernel at all.
func (c Clock) DecodeTBF(b []byte) (*spec.TBF, error) {
	p, err := parseTBF(b)
	if err != nil {
		return nil, err
	}
	t := &spec.TBF{Rate: units.Rate(p.rate64 * 8), Limit: units.Size(p.limit), MPU: units.Size(p.rate.mpu),
		Overhead: p.rate.overhead}
	if p.rate.linkLayer&0x0f == linkLayerATM {
		t.LinkLayer = spec.LinkATM
	}
	t.Burst = c.snapSize(p.rate, p.rate64, p.buffer)
	if p.prate64 != 0 {
		t.PeakRate = units.Rate(p.prate64 * 8)
		t.MTU = c.snapSize(p.peak, p.prate64, p.mtu)
	}
	return t, nil
}

// kernelRate mirrors the kernel's struct psched_ratecfg
// (net/sched/sch_generic.c): transmit times are len*mult>>shift ns.
type kernelRate struct {
	mult     uint32
	shift    uint8
	overhead uint32
	mpu      uint32
	atm      bool
}

// newKernelRate is psched_ratecfg_precompute.
func newKernelRate(rs ratespec, rate64 uint64) kernelRate {
	k := kernelRate{mult: 1, overhead: uint32(rs.overhead), mpu: uint32(rs.mpu), atm: rs.linkLayer&0x0f == linkLayerATM}
	rate := max(uint64(rs.rate), rate64)
	if rate == 0 {
		return k
	}
	factor := uint64(1e9)
	for {
		k.mult = uint32(factor / rate)
		if k.mult&(1<<31) != 0 || factor&(1<<63) != 0 {
			break
		}
		factor <<= 1
		k.shift++
	}
	return k
}

// ns is psched_l2t_ns: the time length bytes take.
func (k kernelRate) ns(length uint32) uint64 {
	length += k.overhead
	length = max(length, k.mpu)
	if k.atm {
		return uint64((length+47)/48*53) * uint64(k.mult) >> k.shift
	}
	return uint64(length) * uint64(k.mult) >> k.shift
}

// psTicks is what tbf_dump reports for a bucket of length bytes:
// PSCHED_NS2TICKS of its time, in 64 ns ticks.
func (k kernelRate) psTicks(length uint32) uint32 { return uint32(k.ns(length) >> 6) }

// snapSize returns the bucket size, in bytes, that the kernel dumps as
// ticks, preferring the shortest canonical form among all sizes that give
// the same ticks (the kernel cannot tell them apart).
func (c Clock) snapSize(rs ratespec, rate64 uint64, ticks uint32) units.Size {
	k := newKernelRate(rs, rate64)
	rate := max(uint64(rs.rate), rate64)
	if rate == 0 {
		return 0
	}
	guess := int64(min(float64(ticks)*64*float64(rate)/1e9, math.MaxUint32))
	if k.atm {
		guess = guess * 48 / 53
	}
	guess -= int64(k.overhead)
	// Bytes per tick plus ATM cell slack; beyond 4096 (rates above 60
	// Gbyte/s) only the round candidates and the guess are tried.
	span := min(int64(float64(rate)*64/1e9)+64, 4096)
	return nicestSize(guess, span, func(s int64) bool { return k.psTicks(uint32(s)) == ticks })
}

func init() {
	registerCodec("tbf", stageCodec{
		encode: func(c Clock, st spec.Stage) ([]byte, error) { return c.EncodeTBF(st.(*spec.TBF)) },
		decode: func(c Clock, b []byte) (spec.Stage, error) { return c.DecodeTBF(b) },
	})
}
