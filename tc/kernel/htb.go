package kernel

import (
	"fmt"
	"math"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// HTB is encoded here for the kernel side of traffic classes (seed 004:
// "tc qdisc add dev eth0 root handle 1: htb default 2" and "tc class add
// dev eth0 parent 1:1 classid 1:2 htb rate 20Mbps ceil 20Mbps"), byte for
// byte as iproute2's q_htb.c.

// TCA_HTB_* attribute types.
const (
	tcaHTBParms      = 1
	tcaHTBInit       = 2
	tcaHTBCTab       = 3
	tcaHTBRTab       = 4
	tcaHTBDirectQlen = 5
	tcaHTBRate64     = 6
	tcaHTBCeil64     = 7
	tcaHTBOffload    = 9

	htbVersion = 3 // HTB_VER >> 16, what htb_init checks
)

// HTBQdisc is an htb qdisc's options.
type HTBQdisc struct {
	Default    uint32  // minor number of the class unclassified traffic goes to (0 = sent unshaped)
	R2Q        uint32  // rate-to-quantum divisor; 0 means tc's 10
	DirectQlen *uint32 // length of the direct queue; nil = the device's txqueuelen
	Offload    bool
}

// EncodeHTBQdisc returns the TCA_OPTIONS payload of an htb qdisc.
func EncodeHTBQdisc(q HTBQdisc) []byte {
	r2q := q.R2Q
	if r2q == 0 {
		r2q = 10
	}
	var w wire // struct tc_htb_glob
	w.u32(htbVersion)
	w.u32(r2q)
	w.u32(q.Default)
	w.u32(0) // debug
	w.u32(0) // direct_pkts (out only)
	var a attrs
	a.add(tcaHTBInit, w.b)
	if q.DirectQlen != nil {
		a.u32(tcaHTBDirectQlen, *q.DirectQlen)
	}
	if q.Offload {
		a.add(tcaHTBOffload, nil)
	}
	return a.b
}

// HTBClass is an htb class's options, as "tc class ... htb" takes them:
// the spec's class parameters (one definition of rate, ceil, burst,
// cburst, prio and quantum; Limit is the leaf queue's, not the class's,
// and is not encoded here) and what only the wire form has.
type HTBClass struct {
	spec.HTBClass
	// BurstCell, CBurstCell are the "/CELL" of burst and cburst.
	BurstCell, CBurstCell units.Size
	MTU                   uint32 // size the rate tables cover; 0 means tc's 1600
	MPU, Overhead         uint16
	LinkLayer             spec.LinkLayer
}

// EncodeHTBClass returns the TCA_OPTIONS payload of an htb class exactly
// as q_htb.c builds it: TCA_HTB_RATE64/CEIL64 for rates of 2^32 bytes/s and
// more, TCA_HTB_PARMS (struct tc_htb_opt, bucket times in ticks), and the
// rate and ceil tables.
func (c Clock) EncodeHTBClass(h HTBClass) ([]byte, error) {
	rate64, ceil64 := uint64(h.Rate/8), uint64(h.Ceil/8)
	if rate64 == 0 {
		return nil, fmt.Errorf("htb rate %s: below one byte per second", h.Rate)
	}
	if ceil64 == 0 {
		ceil64 = rate64
	}
	mtu := h.MTU
	if mtu == 0 {
		mtu = 1600 // "eth packet len", q_htb.c
	}
	hz := c.Hz
	if hz == 0 {
		hz = DefaultClock.Hz
	}
	buffer64 := uint64(h.Burst)
	if buffer64 == 0 {
		buffer64 = rate64/hz + uint64(mtu)
	}
	cbuffer := uint64(h.CBurst)
	if cbuffer == 0 {
		cbuffer = uint64(uint32(ceil64/hz + uint64(mtu))) // an unsigned int in q_htb.c
	}
	atm := h.LinkLayer == spec.LinkATM
	rate := ratespec{rate: uint32(min(rate64, math.MaxUint32)), mpu: h.MPU, overhead: h.Overhead}
	ceil := ratespec{rate: uint32(min(ceil64, math.MaxUint32)), mpu: h.MPU, overhead: h.Overhead}
	rtab := c.rtable(&rate, cellLogOf(h.BurstCell), mtu, atm)
	buffer := c.xmittime(rate64, buffer64)
	if buffer == math.MaxUint32 {
		return nil, fmt.Errorf("htb burst %s: out of range at rate %s", units.Size(buffer64), h.Rate)
	}
	ctab := c.rtable(&ceil, cellLogOf(h.CBurstCell), mtu, atm)
	var w wire // struct tc_htb_opt
	rate.put(&w)
	ceil.put(&w)
	w.u32(buffer)
	w.u32(c.xmittime(ceil64, cbuffer))
	w.u32(uint32(h.Quantum))
	w.u32(0) // level (out only)
	w.u32(h.Prio)
	var a attrs
	if rate64 >= 1<<32 {
		a.u64(tcaHTBRate64, rate64)
	}
	if ceil64 >= 1<<32 {
		a.u64(tcaHTBCeil64, ceil64)
	}
	a.add(tcaHTBParms, w.b)
	a.add(tcaHTBRTab, rtab)
	a.add(tcaHTBCTab, ctab)
	return a.b, nil
}

// DecodeHTBClass reads an htb class's options as the kernel dumps them
// (htb_dump_class). The kernel keeps the bucket times in ticks as tc sent
// them, so burst and cburst come back as the shortest sizes tc would have
// turned into the same ticks; Quantum is the kernel's (computed from rate
// and r2q when none was given); cells and mtu are not kept.
func (c Clock) DecodeHTBClass(b []byte) (HTBClass, error) {
	var h HTBClass
	m, r, err := parmsOf(b, "htb class options", tcaHTBParms, "TCA_HTB_PARMS")
	if err != nil {
		return h, err
	}
	rate, ceil := getRatespec(&r), getRatespec(&r)
	buffer, cbuffer, quantum := r.u32(), r.u32(), r.u32()
	r.u32() // level
	prio := r.u32()
	if r.err != nil {
		return h, fmt.Errorf("htb class parameters: %w", r.err)
	}
	rate64, ceil64 := rate64Of(m, tcaHTBRate64, rate), rate64Of(m, tcaHTBCeil64, ceil)
	h = HTBClass{HTBClass: spec.HTBClass{Rate: units.Rate(rate64 * 8), Ceil: units.Rate(ceil64 * 8), Prio: prio,
		Quantum: units.Size(quantum)}, MPU: rate.mpu, Overhead: rate.overhead}
	if rate.linkLayer&0x0f == linkLayerATM {
		h.LinkLayer = spec.LinkATM
	}
	h.Burst = c.snapTC(rate64, buffer)
	h.CBurst = c.snapTC(ceil64, cbuffer)
	return h, nil
}

// snapTC returns the shortest size tc's xmittime turns into ticks at rate.
func (c Clock) snapTC(rate uint64, ticks uint32) units.Size {
	if rate == 0 {
		return 0
	}
	guess := int64(min(float64(ticks)/c.TickInUsec/1e6*float64(rate), math.MaxUint32))
	span := min(int64(float64(rate)/c.TickInUsec/1e6)+2, 4096)
	return nicestSize(guess, span, func(s int64) bool { return c.xmittime(rate, uint64(s)) == ticks })
}

// nicestSize returns the nicest size (see nicer) within span bytes of
// guess, or at guess rounded to KiB or MiB, for which same holds: the
// kernel keeps buckets as times, so many sizes dump alike. Without one it
// returns guess.
func nicestSize(guess, span int64, same func(int64) bool) units.Size {
	var best units.Size
	found := false
	consider := func(s int64) {
		if s <= 0 || s > math.MaxUint32 || !same(s) {
			return
		}
		if cand := units.Size(s); !found || nicer(cand, best) {
			best, found = cand, true
		}
	}
	for _, unit := range []int64{1 << 20, 1 << 10} {
		consider((guess + unit/2) / unit * unit)
	}
	for s := guess - span; s <= guess+span; s++ {
		consider(s)
	}
	if !found {
		return units.Size(max(guess, 0))
	}
	return best
}

// nicer orders the sizes that map to the same kernel value: the shorter
// canonical form first ("50kb" before "51200b"), then more trailing decimal
// zeros ("1600b" before "1597b"), then the larger.
func nicer(a, b units.Size) bool {
	la, lb := len(a.String()), len(b.String())
	if la != lb {
		return la < lb
	}
	za, zb := trailingZeros(uint64(a)), trailingZeros(uint64(b))
	if za != zb {
		return za > zb
	}
	return a > b
}

func trailingZeros(v uint64) int {
	n := 0
	for v != 0 && v%10 == 0 {
		v /= 10
		n++
	}
	return n
}
