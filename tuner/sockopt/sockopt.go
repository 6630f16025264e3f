// Package sockopt sets the per-socket options that bound one TCP
// connection's throughput (buffers, congestion control, quick-ack, Nagle,
// unsent low-water mark) and reads the kernel's own TCP_INFO accounting
// back, so a diagnosis made from a capture can be confirmed by the kernel.
//
// Options.Control plugs into net.ListenConfig.Control and net.Dialer.Control
// so the options are in place before the SYN: the window scale a socket
// announces is chosen from its receive buffer at that moment.
package sockopt

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/wanlab/wanlab/units"
)

// ErrUnsupported is returned on systems without the Linux socket options.
var ErrUnsupported = errors.New("sockopt: not supported on this GOOS")

// Options are the socket options to set. Zero values leave the kernel's
// default (and, for the buffers, its autotuning) alone.
type Options struct {
	// RcvBuf and SndBuf set SO_RCVBUF / SO_SNDBUF. The kernel stores twice
	// the value (the other half pays for struct sk_buff overhead), caps the
	// request at net.core.rmem_max / wmem_max, and from then on stops
	// autotuning that buffer for the socket (SOCK_RCVBUF_LOCK /
	// SOCK_SNDBUF_LOCK), so a value set here is the connection's ceiling
	// for good: read Effective to see what the kernel actually kept.
	RcvBuf, SndBuf units.Size
	// CC sets TCP_CONGESTION ("cubic", "bbr", "reno"...). Unprivileged
	// processes may only pick algorithms listed in
	// net.ipv4.tcp_allowed_congestion_control.
	CC string
	// QuickAck sets TCP_QUICKACK: acknowledge every segment at once instead
	// of delaying ACKs. It is not sticky; see QuickAckConn.
	QuickAck bool
	// NoDelay sets TCP_NODELAY (disables Nagle's algorithm). Go's net
	// package already turns TCP_NODELAY on for every *net.TCPConn it
	// returns, so false here does not enable Nagle: call
	// (*net.TCPConn).SetNoDelay(false) after the dial or accept for that.
	NoDelay bool
	// NotSentLowat sets TCP_NOTSENT_LOWAT: the socket reports writable only
	// while less than this many bytes are queued but not yet sent, which
	// keeps the send queue (and so latency) short without limiting the
	// amount in flight. Accepted sockets do not inherit it from the
	// listener (measured on Linux 6.18): Apply it to each accepted conn.
	NotSentLowat units.Size
}

// Effective is what the kernel holds for a socket, read back with
// getsockopt after setting Options.
type Effective struct {
	// RcvBuf and SndBuf are sk_rcvbuf / sk_sndbuf: twice the value set
	// (or the autotuned value when none was set).
	RcvBuf       units.Size `json:"rcvbuf_bytes"`
	SndBuf       units.Size `json:"sndbuf_bytes"`
	CC           string     `json:"congestion_control"`
	NoDelay      bool       `json:"nodelay"`
	QuickAck     bool       `json:"quickack"`
	NotSentLowat units.Size `json:"notsent_lowat_bytes"`
}

// TCPInfo is the part of the kernel's struct tcp_info that explains a
// transfer's speed, with units in the types. Durations come from the
// kernel in microseconds; rates in bytes per second (converted to bits).
type TCPInfo struct {
	State   string `json:"state"`    // "established", "close_wait", ...
	CAState string `json:"ca_state"` // "open", "disorder", "cwr", "recovery", "loss"

	RTT    time.Duration `json:"rtt_ns"`     // smoothed RTT (tcpi_rtt)
	RTTVar time.Duration `json:"rttvar_ns"`  // RTT variance (tcpi_rttvar)
	MinRTT time.Duration `json:"min_rtt_ns"` // lowest RTT seen (tcpi_min_rtt)
	RTO    time.Duration `json:"rto_ns"`

	SndCwnd     uint32     `json:"snd_cwnd_segments"`     // congestion window in segments
	SndSsthresh uint32     `json:"snd_ssthresh_segments"` // slow start threshold in segments
	SndMSS      units.Size `json:"snd_mss_bytes"`
	RcvMSS      units.Size `json:"rcv_mss_bytes"`
	// SndWnd is the peer's last advertised receive window as this socket
	// sees it; RcvWnd the window this socket advertises (Linux 6.2+; zero
	// on older kernels).
	SndWnd      units.Size `json:"snd_wnd_bytes"`
	RcvWnd      units.Size `json:"rcv_wnd_bytes"`
	RcvSpace    units.Size `json:"rcv_space_bytes"`    // receiver's autotuning estimate of the sender's window per RTT
	RcvSsthresh units.Size `json:"rcv_ssthresh_bytes"` // current window clamp of the receiver

	DeliveryRate units.Rate `json:"delivery_rate_bps"` // most recent delivery rate sample
	PacingRate   units.Rate `json:"pacing_rate_bps"`

	BytesSent     units.Size `json:"bytes_sent"`
	BytesAcked    units.Size `json:"bytes_acked"`
	BytesReceived units.Size `json:"bytes_received"`
	BytesRetrans  units.Size `json:"bytes_retrans"`
	NotSentBytes  units.Size `json:"notsent_bytes"`

	Unacked      uint32 `json:"unacked_segments"`
	Lost         uint32 `json:"lost_segments"`
	Retrans      uint32 `json:"retrans_segments"`       // segments currently retransmitted and unacked
	TotalRetrans uint32 `json:"total_retrans_segments"` // retransmissions over the connection's life

	// BusyTime is how long the socket had data to send; RwndLimited and
	// SndbufLimited the parts of it during which sending stalled on the
	// peer's receive window or on this socket's send buffer
	// (tcp_chrono_start in net/ipv4/tcp_output.c). The kernel counts them
	// in jiffies (1 to 10 ms), so stalls shorter than a tick, common over
	// loopback, add nothing.
	BusyTime      time.Duration `json:"busy_time_ns"`
	RwndLimited   time.Duration `json:"rwnd_limited_ns"`
	SndbufLimited time.Duration `json:"sndbuf_limited_ns"`

	// Len is how many bytes of struct tcp_info the kernel filled; fields
	// beyond it are zero because the kernel is older than they are.
	Len int `json:"tcp_info_len"`
}

// CwndBytes is the congestion window in bytes (segments × MSS).
func (i TCPInfo) CwndBytes() units.Size { return units.Size(i.SndCwnd) * i.SndMSS }

// RwndLimitedFraction is the share of busy time spent waiting on the
// receiver's window; 0 when the kernel reports no busy time.
func (i TCPInfo) RwndLimitedFraction() float64 {
	if i.BusyTime <= 0 {
		return 0
	}
	return float64(i.RwndLimited) / float64(i.BusyTime)
}

// SndbufLimitedFraction is the share of busy time spent waiting on the
// send buffer.
func (i TCPInfo) SndbufLimitedFraction() float64 {
	if i.BusyTime <= 0 {
		return 0
	}
	return float64(i.SndbufLimited) / float64(i.BusyTime)
}

// WindowRatio is the share of the receive buffer this receiving socket
// offers as window: rcv_ssthresh over sk_rcvbuf (pass Effective.RcvBuf).
// Once a bulk transfer's window has stopped growing, rcv_ssthresh sits at
// window_clamp = tcp_win_from_space(sk_rcvbuf), so this is the kernel's
// learned payload/truesize ratio (Linux 6.6+) or the tcp_adv_win_scale
// share (before), which tuner.WindowModel.PayloadRatio takes.
func (i TCPInfo) WindowRatio(rcvbuf units.Size) float64 {
	if rcvbuf == 0 {
		return 0
	}
	return float64(i.RcvSsthresh) / float64(rcvbuf)
}

// Control sets the options on the raw socket; its signature is that of
// net.ListenConfig.Control and net.Dialer.Control. Sockets accepted from a
// listener inherit its buffers and congestion control (not
// TCP_NOTSENT_LOWAT; see Options.NotSentLowat).
func (o Options) Control(network, address string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) { serr = o.setFD(int(fd)) })
	if err != nil {
		return fmt.Errorf("sockopt: %s %s: %w", network, address, err)
	}
	if serr != nil {
		return fmt.Errorf("sockopt: %s %s: %w", network, address, serr)
	}
	return nil
}

// Apply sets the options on an existing connection or listener (anything
// with SyscallConn, such as *net.TCPConn or *net.TCPListener). Buffers set
// after the handshake no longer change the window scale agreed in the SYN;
// prefer Control.
func (o Options) Apply(conn syscall.Conn) error {
	return withFD(conn, o.setFD)
}

// withFD runs fn with the socket's descriptor.
func withFD(conn syscall.Conn, fn func(fd int) error) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return fmt.Errorf("sockopt: %w", err)
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return fmt.Errorf("sockopt: %w", err)
	}
	return ferr
}

// Check compares what the kernel kept (read with Read) against what o
// asked for and returns an error naming each option the kernel capped or
// ignored. A buffer request r is met when the kernel holds at least 2r
// (it doubles it); less means net.core.rmem_max/wmem_max capped it.
func (o Options) Check(e Effective) error {
	var errs []error
	if o.RcvBuf > 0 && e.RcvBuf < 2*o.RcvBuf {
		errs = append(errs, fmt.Errorf("SO_RCVBUF %s: kernel kept %d bytes, not 2×%d (capped by net.core.rmem_max)", o.RcvBuf, e.RcvBuf, o.RcvBuf))
	}
	if o.SndBuf > 0 && e.SndBuf < 2*o.SndBuf {
		errs = append(errs, fmt.Errorf("SO_SNDBUF %s: kernel kept %d bytes, not 2×%d (capped by net.core.wmem_max)", o.SndBuf, e.SndBuf, o.SndBuf))
	}
	if o.CC != "" && e.CC != o.CC {
		errs = append(errs, fmt.Errorf("TCP_CONGESTION %q: kernel uses %q", o.CC, e.CC))
	}
	if o.NotSentLowat > 0 && e.NotSentLowat != o.NotSentLowat {
		errs = append(errs, fmt.Errorf("TCP_NOTSENT_LOWAT %d: kernel holds %d", o.NotSentLowat, e.NotSentLowat))
	}
	if o.NoDelay && !e.NoDelay {
		errs = append(errs, errors.New("TCP_NODELAY: kernel reports it off"))
	}
	return errors.Join(errs...)
}
