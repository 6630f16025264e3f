package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/proxy"
)

// Probe payload: magic, run id, sequence number, send time (ns, realtime).
// Sender and receiver run on the same host, so the same clock stamps both
// ends and rx-sent is the one-way delay.
const (
	probeMagic  = 0x776c62656e636821 // "wlbench!"
	probeHeader = 32
	ipUDPHeader = 28 // IPv4 + UDP headers: IP length = payload + 28
)

// udpProbe sends cfg.Count timestamped probes from the lab's client to
// its server at cfg.PPS and returns what arrived (kernel receive stamps),
// every send stamp (by sequence number) and the rate the sender achieved.
func udpProbe(ctx context.Context, l *lab.Lab, cfg probeConfig) (probeRun, error) {
	var run probeRun
	if cfg.IPLen < probeHeader+ipUDPHeader {
		cfg.IPLen = probeHeader + ipUDPHeader
	}
	if cfg.RcvBytes == 0 {
		cfg.RcvBytes = 64 << 20
	}
	var rconn *net.UDPConn
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, cfg.RcvBytes); serr != nil {
				return
			}
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
		})
		return errors.Join(err, serr)
	}}
	err := l.Server.Do(func() error {
		pc, err := lc.ListenPacket(ctx, "udp4", netip.AddrPortFrom(l.Server.IPv4, 0).String())
		if err != nil {
			return err
		}
		rconn = pc.(*net.UDPConn)
		return nil
	})
	if err != nil {
		return run, fmt.Errorf("probe receiver: %w", err)
	}
	defer rconn.Close()
	dst := rconn.LocalAddr().(*net.UDPAddr)

	var sconn *net.UDPConn
	err = l.Client.Do(func() error {
		c, err := net.DialUDP("udp4", nil, dst)
		sconn = c
		return err
	})
	if err != nil {
		return run, fmt.Errorf("probe sender: %w", err)
	}
	defer sconn.Close()
	_ = sconn.SetWriteBuffer(4 << 20)

	arr := make([]arrival, 0, cfg.Count+cfg.Count/8)
	recvDone := make(chan error, 1)
	sendDone := make(chan time.Time, 1)
	go func() {
		buf := make([]byte, 65536)
		oob := make([]byte, 128)
		for {
			n, oobn, _, _, err := rconn.ReadMsgUDP(buf, oob)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					err = nil
				}
				recvDone <- err
				return
			}
			if n < probeHeader || binary.LittleEndian.Uint64(buf) != probeMagic || binary.LittleEndian.Uint64(buf[8:]) != cfg.RunID {
				continue
			}
			rx, ok := rxStamp(oob[:oobn])
			if !ok {
				rx = time.Now().UnixNano()
			}
			arr = append(arr, arrival{
				seq:   binary.LittleEndian.Uint64(buf[16:]),
				sent:  int64(binary.LittleEndian.Uint64(buf[24:])),
				rx:    rx,
				ipLen: n + ipUDPHeader,
			})
		}
	}()
	// The receiver stops Drain after the last send, or at cancellation.
	go func() {
		select {
		case end := <-sendDone:
			_ = rconn.SetReadDeadline(end.Add(cfg.Drain))
		case <-ctx.Done():
			_ = rconn.SetReadDeadline(time.Unix(1, 0))
		}
	}()

	payload := make([]byte, cfg.IPLen-ipUDPHeader)
	binary.LittleEndian.PutUint64(payload, probeMagic)
	binary.LittleEndian.PutUint64(payload[8:], cfg.RunID)
	sends := make([]int64, cfg.Count)
	start := time.Now()
	interval := float64(time.Second) / cfg.PPS
	sent := 0
	var sendErr error
	for sent < cfg.Count && ctx.Err() == nil {
		// Send every probe that is due, then sleep until the next: Go's
		// timers wake at about 1 ms, so fast runs go out in 1 ms trains.
		due := min(cfg.Count, int(float64(time.Since(start))/interval)+1)
		for ; sent < due; sent++ {
			binary.LittleEndian.PutUint64(payload[16:], uint64(sent))
			sends[sent] = time.Now().UnixNano()
			binary.LittleEndian.PutUint64(payload[24:], uint64(sends[sent]))
			if _, err := sconn.Write(payload); err != nil && !errors.Is(err, syscall.ENOBUFS) && !errors.Is(err, syscall.ECONNREFUSED) {
				sendErr = err
				break
			}
		}
		if sendErr != nil {
			break
		}
		if sent < cfg.Count {
			next := start.Add(time.Duration(float64(sent) * interval))
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
		}
	}
	sendEnd := time.Now()
	sendDone <- sendEnd
	rerr := <-recvDone
	if err := errors.Join(sendErr, rerr, ctx.Err()); err != nil {
		return run, fmt.Errorf("probe: %w", err)
	}
	if sent != cfg.Count {
		return run, fmt.Errorf("probe: sent %d of %d", sent, cfg.Count)
	}
	run.arrivals, run.sends = arr, sends
	if span := sendEnd.Sub(start); span > 0 {
		run.offered = float64(sent*cfg.IPLen*8) / span.Seconds()
	}
	return run, nil
}

// probeRun is one probe run's raw data.
type probeRun struct {
	arrivals []arrival
	sends    []int64 // send stamps by sequence number
	offered  float64 // IP bit/s the sender achieved
	// late is how far the in-process proxy's writes toward the server
	// ran behind the engine's departures during the run (nil: not an
	// in-process proxy).
	late *proxy.Lateness
}

// rxStamp finds the SCM_TIMESTAMPNS in a control message.
func rxStamp(oob []byte) (int64, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			sec := int64(binary.NativeEndian.Uint64(m.Data))
			nsec := int64(binary.NativeEndian.Uint64(m.Data[8:]))
			return sec*1e9 + nsec, true
		}
	}
	return 0, false
}
