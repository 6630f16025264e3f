package spec

import (
	"fmt"
	"math"
	"time"

	"github.com/wanlab/wanlab/units"
)

// pschedTick is the kernel's packet scheduler tick: PSCHED_SHIFT 6, 64 ns
// (/proc/net/psched), whatever HZ is. tbf counts its tokens in these
// ticks (tc_calc_xmittime in iproute2's tc/tc_core.c, psched_l2t_ns in
// the kernel), so a bucket smaller than rate x tick holds less than one
// tick's tokens.
const pschedTick = 64 * time.Nanosecond

// pschedMTU is the largest frame tbf must pass whole: 1500 bytes of IP and
// a 14-byte Ethernet header (tc's psched_mtu). sch_tbf drops a packet
// longer than the bucket holds (tbf_enqueue: qdisc_pkt_len(skb) >
// q->max_size, GSO aside) and warns when the burst is below the device's
// MTU.
const pschedMTU units.Size = 1514

// MinTBFBurst is the smallest bucket that works at rate: one full frame,
// and at least the tokens of one scheduler tick.
func MinTBFBurst(rate units.Rate) units.Size {
	perTick := units.Size(math.Ceil(rate.BytesPerSecond() * pschedTick.Seconds()))
	return max(perTick, pschedMTU)
}

// burstHint is the text of b's missing burst: the smallest one that
// works at its rate, why, and the stage with it when the rest is there.
func burstHint(b *TBF) string {
	smallest := MinTBFBurst(b.Rate)
	h := fmt.Sprintf("burst is required: at rate %s the smallest that works is %s, one %d-byte frame "+
		"(and at least rate x the kernel's %v scheduler tick)", b.Rate, smallest, uint64(pschedMTU), pschedTick)
	if b.Limit != 0 || b.Latency != 0 {
		fixed := *b
		fixed.Burst = smallest
		h += fmt.Sprintf(": '%s'", &fixed)
	}
	return h
}
