package sockopt

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/units"
)

// maxInt32 bounds what setsockopt takes as an int.
const maxInt32 = 1<<31 - 1

func (o Options) setFD(fd int) error {
	setInt := func(level, opt int, name string, v uint64) error {
		if v > maxInt32 {
			return fmt.Errorf("%s %d: larger than the kernel accepts (%d)", name, v, maxInt32)
		}
		if err := unix.SetsockoptInt(fd, level, opt, int(v)); err != nil {
			return fmt.Errorf("set %s %d: %w", name, v, err)
		}
		return nil
	}
	if o.RcvBuf > 0 {
		if err := setInt(unix.SOL_SOCKET, unix.SO_RCVBUF, "SO_RCVBUF", uint64(o.RcvBuf)); err != nil {
			return err
		}
	}
	if o.SndBuf > 0 {
		if err := setInt(unix.SOL_SOCKET, unix.SO_SNDBUF, "SO_SNDBUF", uint64(o.SndBuf)); err != nil {
			return err
		}
	}
	if o.CC != "" {
		if err := unix.SetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION, o.CC); err != nil {
			switch {
			case errors.Is(err, unix.ENOENT):
				return fmt.Errorf("set TCP_CONGESTION %q: not available in this kernel (see net.ipv4.tcp_available_congestion_control): %w", o.CC, err)
			case errors.Is(err, unix.EPERM):
				return fmt.Errorf("set TCP_CONGESTION %q: not in net.ipv4.tcp_allowed_congestion_control for unprivileged use: %w", o.CC, err)
			}
			return fmt.Errorf("set TCP_CONGESTION %q: %w", o.CC, err)
		}
	}
	if o.NotSentLowat > 0 {
		if err := setInt(unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, "TCP_NOTSENT_LOWAT", uint64(o.NotSentLowat)); err != nil {
			return err
		}
	}
	if o.NoDelay {
		if err := setInt(unix.IPPROTO_TCP, unix.TCP_NODELAY, "TCP_NODELAY", 1); err != nil {
			return err
		}
	}
	if o.QuickAck {
		if err := armQuickAckFD(fd); err != nil {
			return err
		}
	}
	return nil
}

// armQuickAckFD puts the socket in quick-ack mode. The kernel does not keep
// it there: TCP_QUICKACK only leaves "pingpong" (interactive, delayed-ACK)
// mode and grants a budget of immediate ACKs (icsk_ack.quick, see
// tcp_enter_quickack_mode in net/ipv4/tcp_input.c); the budget is spent
// as ACKs go out, and the kernel re-enters pingpong mode by itself when it
// sees request/response traffic (inet_csk_inc_pingpong_cnt from
// tcp_event_data_sent in net/ipv4/tcp_output.c). So a reader that wants
// every segment acknowledged at once must re-arm after each read, which is
// what QuickAckConn does.
func armQuickAckFD(fd int) error {
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1); err != nil {
		return fmt.Errorf("set TCP_QUICKACK: %w", err)
	}
	return nil
}

// ArmQuickAck (re-)enables quick-ack mode on conn once; see QuickAckConn
// for why once is not enough.
func ArmQuickAck(conn syscall.Conn) error { return withFD(conn, armQuickAckFD) }

// quickAckConn re-arms TCP_QUICKACK after every Read.
type quickAckConn struct {
	*net.TCPConn
	raw syscall.RawConn // cached: SyscallConn allocates
	arm func(fd uintptr)
	err error // last re-arm error, reported by the next Read
}

// QuickAckConn wraps c so that every Read re-arms TCP_QUICKACK after the
// data is consumed, keeping the receiver acknowledging at once for the
// whole transfer (the kernel clears quick-ack mode on its own; see
// armQuickAckFD). A failure to re-arm is returned by the Read.
func QuickAckConn(c *net.TCPConn) net.Conn {
	q := &quickAckConn{TCPConn: c}
	q.raw, q.err = c.SyscallConn()
	q.arm = func(fd uintptr) { q.err = armQuickAckFD(int(fd)) }
	return q
}

func (q *quickAckConn) Read(b []byte) (int, error) {
	n, err := q.TCPConn.Read(b)
	if err != nil || q.raw == nil {
		return n, err
	}
	if cerr := q.raw.Control(q.arm); cerr != nil {
		return n, fmt.Errorf("sockopt: re-arm TCP_QUICKACK: %w", cerr)
	}
	if q.err != nil {
		return n, fmt.Errorf("sockopt: %w", q.err)
	}
	return n, nil
}

// Read reports the options the kernel holds for conn.
func Read(conn syscall.Conn) (Effective, error) {
	var e Effective
	err := withFD(conn, func(fd int) error {
		getInt := func(level, opt int, name string) (int, error) {
			v, err := unix.GetsockoptInt(fd, level, opt)
			if err != nil {
				return 0, fmt.Errorf("sockopt: get %s: %w", name, err)
			}
			return v, nil
		}
		v, err := getInt(unix.SOL_SOCKET, unix.SO_RCVBUF, "SO_RCVBUF")
		if err != nil {
			return err
		}
		e.RcvBuf = units.Size(v)
		if v, err = getInt(unix.SOL_SOCKET, unix.SO_SNDBUF, "SO_SNDBUF"); err != nil {
			return err
		}
		e.SndBuf = units.Size(v)
		if v, err = getInt(unix.IPPROTO_TCP, unix.TCP_NODELAY, "TCP_NODELAY"); err != nil {
			return err
		}
		e.NoDelay = v != 0
		if v, err = getInt(unix.IPPROTO_TCP, unix.TCP_QUICKACK, "TCP_QUICKACK"); err != nil {
			return err
		}
		e.QuickAck = v != 0
		if v, err = getInt(unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, "TCP_NOTSENT_LOWAT"); err != nil {
			return err
		}
		e.NotSentLowat = units.Size(uint32(v)) // UINT_MAX (unset) reads back as -1
		cc, err := unix.GetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION)
		if err != nil {
			return fmt.Errorf("sockopt: get TCP_CONGESTION: %w", err)
		}
		e.CC = cc
		return nil
	})
	return e, err
}

// Info reads TCP_INFO for conn (any *net.TCPConn, or a listener's
// accepted connection). Call it after a transfer, before Close.
func Info(conn syscall.Conn) (TCPInfo, error) {
	var out TCPInfo
	err := withFD(conn, func(fd int) error {
		var raw unix.TCPInfo
		n := uint32(unsafe.Sizeof(raw))
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.IPPROTO_TCP, unix.TCP_INFO,
			uintptr(unsafe.Pointer(&raw)), uintptr(unsafe.Pointer(&n)), 0)
		if errno != 0 {
			return fmt.Errorf("sockopt: get TCP_INFO: %w", errno)
		}
		out = fromRaw(&raw, int(n))
		return nil
	})
	return out, err
}

var tcpStates = [...]string{1: "established", "syn_sent", "syn_recv", "fin_wait1", "fin_wait2",
	"time_wait", "close", "close_wait", "last_ack", "listen", "closing", "new_syn_recv", "bound_inactive"}

var caStates = [...]string{"open", "disorder", "cwr", "recovery", "loss"}

func name(names []string, v uint8) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("unknown(%d)", v)
}

func usec(v uint32) time.Duration   { return time.Duration(v) * time.Microsecond }
func usec64(v uint64) time.Duration { return time.Duration(v) * time.Microsecond }

// fromRaw converts the kernel's struct; n is the length the kernel wrote.
func fromRaw(r *unix.TCPInfo, n int) TCPInfo {
	return TCPInfo{
		State:         name(tcpStates[:], r.State),
		CAState:       name(caStates[:], r.Ca_state),
		RTT:           usec(r.Rtt),
		RTTVar:        usec(r.Rttvar),
		MinRTT:        usec(r.Min_rtt),
		RTO:           usec(r.Rto),
		SndCwnd:       r.Snd_cwnd,
		SndSsthresh:   r.Snd_ssthresh,
		SndMSS:        units.Size(r.Snd_mss),
		RcvMSS:        units.Size(r.Rcv_mss),
		SndWnd:        units.Size(r.Snd_wnd),
		RcvWnd:        units.Size(r.Rcv_wnd),
		RcvSpace:      units.Size(r.Rcv_space),
		RcvSsthresh:   units.Size(r.Rcv_ssthresh),
		DeliveryRate:  units.Rate(r.Delivery_rate * 8),
		PacingRate:    pacing(r.Pacing_rate),
		BytesSent:     units.Size(r.Bytes_sent),
		BytesAcked:    units.Size(r.Bytes_acked),
		BytesReceived: units.Size(r.Bytes_received),
		BytesRetrans:  units.Size(r.Bytes_retrans),
		NotSentBytes:  units.Size(r.Notsent_bytes),
		Unacked:       r.Unacked,
		Lost:          r.Lost,
		Retrans:       r.Retrans,
		TotalRetrans:  r.Total_retrans,
		BusyTime:      usec64(r.Busy_time),
		RwndLimited:   usec64(r.Rwnd_limited),
		SndbufLimited: usec64(r.Sndbuf_limited),
		Len:           n,
	}
}

// pacing converts tcpi_pacing_rate; ~0 means unlimited and maps to 0.
func pacing(v uint64) units.Rate {
	if v >= ^uint64(0)/8 {
		return 0
	}
	return units.Rate(v * 8)
}
