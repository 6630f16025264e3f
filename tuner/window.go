package tuner

import (
	"fmt"
	"time"

	"github.com/wanlab/wanlab/predict"
	"github.com/wanlab/wanlab/units"
)

// WindowModel converts socket buffer space into the TCP window it buys on
// one kernel version. The receive window is never the whole buffer: the
// buffer is charged with each skb's truesize (payload plus struct sk_buff,
// shared info and the unused part of the page), not its payload, and the
// payload/truesize ratio depends on the driver: a 1448-byte segment in a
// 2 KiB buffer gives about 0.6, in a 4 KiB page about 0.35, GRO-merged
// 64 KiB skbs on veth or loopback close to 0.9. PayloadRatio holds it;
// zero means unknown.
//
// Before Linux 6.6 the kernel assumed a fixed share, set by
// net.ipv4.tcp_adv_win_scale (tcp_win_from_space in include/net/tcp.h):
//
//	window = space >> -scale           if scale <= 0
//	window = space - (space >> scale)  if scale > 0 (default 1: half)
//
// and when the real ratio was below that share, tcp_grow_window
// (net/ipv4/tcp_input.c) stopped raising rcv_ssthresh early:
// __tcp_grow_window halves both tcp_win_from_space(skb->truesize) and the
// window bound tcp_win_from_space(tcp_rmem[2]) until the first fits in
// skb->len, so the window stalls at W(tcp_rmem[2]) / 2^k with
// k = ceil(log2(share / ratio)). Seed 001's receiver shows it: tcp_rmem max
// 6 MiB, share 1/2, frames in 4 KiB pages (ratio 0.35, k = 1): a window of
// 1.5 MiB, 43 MB/s at 35 ms, exactly what iperf3 reported.
//
// Since 6.6 (commit dfa2f0483360 "tcp: get rid of sysctl_tcp_adv_win_scale")
// the share is learned per socket: __tcp_win_from_space(scaling_ratio,
// space) = space * scaling_ratio >> TCP_RMEM_TO_WIN_SCALE (8), and
// tcp_measure_rcv_mss (net/ipv4/tcp_input.c) sets scaling_ratio to
// (skb->len << 8) / skb->truesize of received segments and recomputes
// window_clamp from sk_rcvbuf, so the window is ratio × buffer with no
// stall. Until data arrives the ratio is TCP_DEFAULT_SCALING_RATIO: about
// 25 % in 6.6-6.8 ((1200 << 8) / SKB_TRUESIZE(4096)), 50 % (1 << 7) since
// commit 697a6c8cec03 "tcp: increase the default TCP scaling ratio" (6.9,
// also in 6.6.y stable); the model uses 50 % when the ratio is unknown.
//
// Autotuning (tcp_rcv_space_adjust in net/ipv4/tcp_input.c) grows
// sk_rcvbuf up to tcp_rmem[2] and sets window_clamp =
// tcp_win_from_space(sk_rcvbuf), so the largest receive window of an
// autotuned socket is Window(tcp_rmem[2]).
type WindowModel struct {
	Kernel       KernelVersion
	AdvWinScale  int
	PayloadRatio float64
}

// DefaultScalingRatio is TCP_DEFAULT_SCALING_RATIO on Linux 6.9 and later.
const DefaultScalingRatio = 0.5

// ModelFor returns the model of the snapshot's kernel with an unknown
// payload ratio.
func ModelFor(s *Snapshot) WindowModel {
	return WindowModel{Kernel: s.Kernel, AdvWinScale: s.AdvWinScale}
}

func (m WindowModel) modern() bool { return m.Kernel.AtLeast(6, 6) }

// advShare is the pre-6.6 tcp_win_from_space share for tcp_adv_win_scale.
func (m WindowModel) advShare() float64 {
	s := m.AdvWinScale
	if s <= 0 {
		return 1 / float64(uint64(1)<<min(-s, 31))
	}
	return 1 - 1/float64(uint64(1)<<min(s, 31))
}

// stall is k of the pre-6.6 grow-window stall: the window bound is divided
// by 2^k.
func (m WindowModel) stall() uint {
	if m.PayloadRatio <= 0 {
		return 0
	}
	k := uint(0)
	for q := m.advShare() / m.PayloadRatio; q > 1 && k < 31; q /= 2 {
		k++
	}
	return k
}

// Ratio is the share of buffer space the largest window gets.
func (m WindowModel) Ratio() float64 {
	if !m.modern() {
		return m.advShare() / float64(uint64(1)<<m.stall())
	}
	if m.PayloadRatio > 0 {
		return m.PayloadRatio
	}
	return DefaultScalingRatio
}

// Window is the largest receive window a buffer of space bytes allows.
func (m WindowModel) Window(space units.Size) units.Size {
	if !m.modern() {
		var w units.Size
		if s := m.AdvWinScale; s <= 0 {
			w = space >> min(-s, 31)
		} else {
			w = space - space>>min(s, 31)
		}
		return w >> m.stall()
	}
	if m.PayloadRatio > 0 {
		return units.Size(float64(space) * m.PayloadRatio)
	}
	return space * 128 >> 8 // TCP_DEFAULT_SCALING_RATIO
}

// LockedWindow is the largest window of a socket whose buffer an
// application fixed with SO_RCVBUF (space = twice the request): the buffer
// rule without autotuning, still under the pre-6.6 grow-window bound,
// which __tcp_grow_window derives from tcp_rmem[2], not from the buffer.
func (m WindowModel) LockedWindow(space, rmemMax units.Size) units.Size {
	if m.modern() {
		return m.Window(space)
	}
	plain := m
	plain.PayloadRatio = 0
	return min(plain.Window(space), m.Window(rmemMax))
}

// Space is the buffer needed for a window (the inverse of Window).
func (m WindowModel) Space(window units.Size) units.Size {
	return units.Size(float64(window)/m.Ratio() + 0.5)
}

// Describe says which rule the model applies, for humans.
func (m WindowModel) Describe() string {
	pct := 100 * m.Ratio()
	if !m.modern() {
		d := fmt.Sprintf("Linux %s: window = %.0f%% of the buffer (tcp_adv_win_scale %d", m.Kernel, pct, m.AdvWinScale)
		if k := m.stall(); k > 0 {
			d += fmt.Sprintf("; payload/truesize %.2f stalls window growth at 1/%d of it", m.PayloadRatio, 1<<k)
		} else if m.PayloadRatio == 0 && m.AdvWinScale > 0 {
			d += "; a driver whose payload/truesize ratio is below that share stalls window growth at half of it or less, as in seed 001"
		}
		return d + ")"
	}
	if m.PayloadRatio > 0 {
		return fmt.Sprintf("Linux %s: window = %.0f%% of the buffer (payload/truesize ratio %.2f)", m.Kernel, pct, m.PayloadRatio)
	}
	return fmt.Sprintf("Linux %s: window = about %.0f%% of the buffer (kernel default payload/truesize ratio; the kernel learns the real one per socket)", m.Kernel, pct)
}

// RateFor is the throughput a window allows at rtt: at most one window of
// data per round trip (predict.WindowRate, the model the analyzer uses).
func RateFor(window units.Size, rtt time.Duration) units.Rate { return predict.WindowRate(window, rtt) }

// WindowFor is the window (bytes in flight) that rate needs at rtt: the
// bandwidth-delay product.
func WindowFor(rate units.Rate, rtt time.Duration) units.Size { return predict.WindowFor(rate, rtt) }

// Send side. A sender keeps in flight at most what its send buffer holds:
// sk_wmem_queued (truesize of sent-unacked plus unsent skbs) may not exceed
// sk_sndbuf (sk_stream_memory_free, include/net/sock.h), and autotuning
// (tcp_sndbuf_expand, net/ipv4/tcp_input.c) grows sk_sndbuf up to
// tcp_wmem[2]. Send skbs are built from page fragments up to the size goal,
// so their payload is nearly all of their truesize; the model counts the
// whole buffer as window. A tiny buffer still lets one skb through:
// tcp_sendmsg_locked only checks the buffer when it starts a new skb and
// fills the current one up to the size goal (tcp_xmit_size_goal: the
// device's GSO limit minus headers, at most half the peer's largest
// window, in whole MSS), so in-flight data never drops below one size goal.
// Measured through the lab (tuner/e2e) with tcp_wmem "4096 4096 4096" and
// 64 KiB writes: one write per round trip in the steady state (6.5, 0.66
// and 0.34 MB/s at 10, 100 and 200 ms); until the receiver advertises
// more than twice the size goal, the half-window bound halves it, so short
// transfers average 10-25 % less.
const (
	gsoMaxSize   = 65536 // GSO_LEGACY_MAX_SIZE, the usual sk_gso_max_size
	maxTCPHeader = 320   // MAX_TCP_HEADER on x86_64 (128 + MAX_HEADER)
	// DefaultMSS is the MSS of a 1500-byte MTU path with TCP timestamps.
	DefaultMSS units.Size = 1448
)

// SizeGoal is the payload of the largest skb tcp_sendmsg builds for mss.
func SizeGoal(mss units.Size) units.Size {
	if mss == 0 {
		mss = DefaultMSS
	}
	g := units.Size(gsoMaxSize-1-maxTCPHeader) / mss * mss
	return max(g, mss)
}

// SendWindow is the data a sender with a send buffer of space bytes can
// keep in flight.
func SendWindow(space, mss units.Size) units.Size {
	return max(space, SizeGoal(mss))
}
