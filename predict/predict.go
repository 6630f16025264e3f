// Package predict is the one model of what a TCP transfer's rate becomes
// when one of its limits changes: a window's worth of data per round trip,
// the Mathis bound under loss, and the window a socket buffer offers. The
// analyzer's diagnosis, the tuner's plan and the experiment's advice all
// compute their predictions here, so one change gives one predicted rate.
package predict

import (
	"math"
	"time"

	"github.com/wanlab/wanlab/units"
)

// MathisC is sqrt(3/2), the constant of the Mathis et al. (1997) bound for
// periodic loss with delayed ACKs off.
const MathisC = 1.2247

// ScalingRatio is the share of a socket buffer the kernel offers as
// window when nothing better is known. Since Linux 6.6 the window is
// rcvbuf * scaling_ratio, the skb payload/truesize ratio measured on
// received packets (TCP_DEFAULT_SCALING_RATIO starts it at 50 %; a
// 1448-byte MSS in 2 KB+overhead buffers stays near 50 %); before 6.6,
// tcp_adv_win_scale=1 also gave 50 %.
const ScalingRatio = 0.5

// WindowRate is the rate a window of bytes in flight allows at rtt: one
// window per round trip.
func WindowRate(window units.Size, rtt time.Duration) units.Rate {
	if rtt <= 0 {
		return 0
	}
	return units.Rate(float64(window) * 8 / rtt.Seconds())
}

// WindowFor is the window (bytes in flight) that rate needs at rtt: the
// bandwidth-delay product.
func WindowFor(rate units.Rate, rtt time.Duration) units.Size {
	return units.Size(rate.BytesPerSecond()*rtt.Seconds() + 0.5)
}

// Mathis is the bound MSS * C / (RTT * sqrt(p)) a loss-based congestion
// control reaches at a loss rate p (0 without loss or RTT).
func Mathis(mss units.Size, rtt time.Duration, p float64) units.Rate {
	if p <= 0 || rtt <= 0 {
		return 0
	}
	return units.Rate(float64(mss) * 8 / rtt.Seconds() * MathisC / math.Sqrt(p))
}

// BufferFor is the socket buffer whose window, at the payload share
// ratio (ScalingRatio when 0), is window.
func BufferFor(window units.Size, ratio float64) units.Size {
	if ratio <= 0 {
		ratio = ScalingRatio
	}
	return units.Size(math.Ceil(float64(window) / ratio))
}
