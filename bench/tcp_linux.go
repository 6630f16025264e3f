package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/tuner/sockopt"
)

// bulkResult is what a timed TCP bulk transfer achieved.
type bulkResult struct {
	Bytes int64
	// Average is the goodput over the whole run, Steady over its second
	// half (after slow start), both in bit/s of payload.
	Average, Steady float64
	// Wire is the rate over the same second half of the IP packets that
	// reached the receiver's link (bit/s of IP bytes: what a tbf on the
	// path shapes), counting the first stream's segments (one stream). Unlike Steady it does not depend on when the receiver
	// could read: after a loss, TCP holds everything behind the hole out
	// of order until the retransmission arrives, a whole window at a long
	// RTT, so bytes that crossed the shaper before the half can be read
	// after it.
	Wire float64
	// HeldHalf and HeldEnd estimate the payload bytes that had reached
	// the receiver's link but were not yet read at the half and at the
	// end (IP bytes × 1448/1500 less what was read): data held out of
	// order behind a loss, which moves Steady by
	// (HeldHalf-HeldEnd)/(dur/2). Retransmitted duplicates inflate them.
	HeldHalf, HeldEnd int64
	// Receiver and Sender are the first stream's sockets at the end.
	Receiver, Sender       sockopt.TCPInfo
	ReceiverEff, SenderEff sockopt.Effective
}

// tcpBulk sends for dur over streams parallel connections from one end
// host to the other (from the server when fromServer, like a download)
// and measures the receiver's goodput. cc, if set, is the congestion
// control of every socket.
func tcpBulk(ctx context.Context, l *lab.Lab, fromServer bool, streams int, dur time.Duration, cc string) (bulkResult, error) {
	opts := sockopt.Options{CC: cc}
	var res bulkResult
	snd, rcv := &l.Client, &l.Server
	if fromServer {
		snd, rcv = rcv, snd
	}
	var ln net.Listener
	err := rcv.Do(func() error {
		var err error
		lc := net.ListenConfig{Control: opts.Control}
		ln, err = lc.Listen(ctx, "tcp4", netip.AddrPortFrom(rcv.IPv4, 0).String())
		return err
	})
	if err != nil {
		return res, fmt.Errorf("bulk receiver: %w", err)
	}
	defer ln.Close()

	var received atomic.Int64
	rconns := make(chan *net.TCPConn, streams)
	var rwg sync.WaitGroup
	go func() {
		for range streams {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := c.(*net.TCPConn)
			rconns <- tc
			rwg.Add(1)
			go func() {
				defer rwg.Done()
				buf := make([]byte, 256<<10)
				for {
					n, err := tc.Read(buf)
					received.Add(int64(n))
					if err != nil {
						return
					}
				}
			}()
		}
	}()

	sconns := make([]*net.TCPConn, 0, streams)
	defer func() {
		for _, c := range sconns {
			c.Close()
		}
	}()
	d := net.Dialer{Timeout: 10 * time.Second, Control: opts.Control}
	for range streams {
		err := snd.Do(func() error {
			c, err := d.DialContext(ctx, "tcp4", ln.Addr().String())
			if err == nil {
				sconns = append(sconns, c.(*net.TCPConn))
			}
			return err
		})
		if err != nil {
			return res, fmt.Errorf("bulk connect: %w", err)
		}
	}
	first := <-rconns
	link, err := openLinkCounter(rcv)
	if err != nil {
		return res, fmt.Errorf("bulk receiver link: %w", err)
	}
	defer link.Close()
	// A sample carries the times just before and just after its reads:
	// a rate over the second half divides by the span from the half
	// sample's start to the end sample's end, never by the planned dur/2,
	// so a timer that fires late or a reader descheduled between its
	// reads on a busy machine can only lower it, never raise it above
	// what the path let through.
	sample := func() (w wireSample, hdr uint64, err error) {
		w.before = time.Now()
		w.bytes, w.packets, err = link.IPBytes()
		if err == nil {
			w.segs, hdr, err = dataSegsIn(first)
		}
		w.after = time.Now()
		return w, hdr, err
	}
	wireStart, _, err := sample()
	if err != nil {
		return res, fmt.Errorf("bulk receiver link: %w", err)
	}
	start := time.Now()
	end := start.Add(dur)
	var swg sync.WaitGroup
	for _, c := range sconns {
		_ = c.SetWriteDeadline(end)
		swg.Add(1)
		go func() {
			defer swg.Done()
			buf := make([]byte, 64<<10)
			for {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
	}
	stopCtx := context.AfterFunc(ctx, func() {
		for _, c := range sconns {
			_ = c.SetWriteDeadline(time.Unix(1, 0))
		}
	})
	defer stopCtx()
	half := time.NewTimer(dur / 2)
	var atHalf int64
	var wireHalf, wireEnd wireSample
	var hdr uint64
	var werr error
	halfAt := start.Add(dur / 2)
	select {
	case <-half.C:
		halfAt = time.Now()
		atHalf = received.Load()
		wireHalf, _, werr = sample()
	case <-ctx.Done():
	}
	swg.Wait()
	total := received.Load()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	wireEnd, hdr, err = sample()
	if err = errors.Join(werr, err); err != nil {
		return res, fmt.Errorf("bulk receiver link: %w", err)
	}
	res.Wire = float64(wireBytes(wireHalf, wireEnd, hdr)) * 8 / wireEnd.after.Sub(wireHalf.before).Seconds()
	res.HeldHalf = payloadOf(wireBytes(wireStart, wireHalf, hdr)) - atHalf
	res.HeldEnd = payloadOf(wireBytes(wireStart, wireEnd, hdr)) - total
	res.Bytes = total
	res.Average = float64(total) * 8 / elapsed.Seconds()
	res.Steady = float64(total-atHalf) * 8 / (start.Add(elapsed).Sub(halfAt)).Seconds()
	res.Sender, _ = sockopt.Info(sconns[0])
	res.SenderEff, _ = sockopt.Read(sconns[0])
	res.Receiver, _ = sockopt.Info(first)
	res.ReceiverEff, _ = sockopt.Read(first)
	for _, c := range sconns {
		c.Close()
	}
	ln.Close()
	rwg.Wait()
	if total == 0 {
		return res, errors.New("bulk: nothing arrived")
	}
	return res, nil
}

// dialUDP connects a UDP socket of the client's namespace to srv.
func dialUDP(l *lab.Lab, srv *net.UDPConn) (*net.UDPConn, error) {
	var cl *net.UDPConn
	err := l.Client.Do(func() error {
		c, err := net.DialUDP("udp4", nil, srv.LocalAddr().(*net.UDPAddr))
		cl = c
		return err
	})
	return cl, err
}

// udpEcho answers every datagram the client sends to the server and
// returns the round-trip times of count request/response pairs, one
// outstanding at a time.
func udpRoundTrips(ctx context.Context, l *lab.Lab, count int) ([]float64, error) {
	var srv *net.UDPConn
	err := l.Server.Do(func() error {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(l.Server.IPv4, 0)))
		srv = c
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("rr server: %w", err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			_, _ = srv.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	cl, err := dialUDP(l, srv)
	if err != nil {
		return nil, fmt.Errorf("rr client: %w", err)
	}
	defer cl.Close()
	rtts := make([]float64, 0, count)
	req := make([]byte, 32)
	resp := make([]byte, 2048)
	// A warm-up exchange, not timed, resent until answered: the first
	// datagram of a fresh lab can be lost while the neighbours resolve.
	binary.LittleEndian.PutUint64(req, math.MaxUint64)
	for try := 0; ; try++ {
		if _, err := cl.Write(req); err != nil {
			return nil, fmt.Errorf("rr warm-up: %w", err)
		}
		_ = cl.SetReadDeadline(time.Now().Add(time.Second))
		n, err := cl.Read(resp)
		if err == nil && n == len(req) && binary.LittleEndian.Uint64(resp) == math.MaxUint64 {
			break
		}
		if try == 4 || ctx.Err() != nil {
			return nil, fmt.Errorf("rr warm-up: no answer to 5 requests: %v", err)
		}
	}
	for i := 0; i < count && ctx.Err() == nil; i++ {
		binary.LittleEndian.PutUint64(req, uint64(i))
		t0 := time.Now()
		if _, err := cl.Write(req); err != nil {
			return nil, fmt.Errorf("rr: %w", err)
		}
		_ = cl.SetReadDeadline(t0.Add(time.Second))
		for {
			n, err := cl.Read(resp)
			if err != nil {
				return nil, fmt.Errorf("rr: request %d: %w", i, err)
			}
			if n == len(req) && binary.LittleEndian.Uint64(resp) == uint64(i) {
				break
			}
		}
		rtts = append(rtts, float64(time.Since(t0)))
	}
	slices.Sort(rtts)
	return rtts, ctx.Err()
}

// udpFlood sends small datagrams from the client as fast as one sender
// goroutine can for dur and returns the packets per second that arrived.
func udpFlood(ctx context.Context, l *lab.Lab, payload int, dur time.Duration) (float64, error) {
	var srv *net.UDPConn
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20)
		})
		return errors.Join(err, serr)
	}}
	err := l.Server.Do(func() error {
		pc, err := lc.ListenPacket(ctx, "udp4", netip.AddrPortFrom(l.Server.IPv4, 0).String())
		if err == nil {
			srv = pc.(*net.UDPConn)
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("flood receiver: %w", err)
	}
	defer srv.Close()
	var got atomic.Int64
	rdone := make(chan struct{})
	go func() {
		defer close(rdone)
		buf := make([]byte, 2048)
		for {
			if _, _, err := srv.ReadFromUDPAddrPort(buf); err != nil {
				return
			}
			got.Add(1)
		}
	}()
	cl, err := dialUDP(l, srv)
	if err != nil {
		return 0, fmt.Errorf("flood sender: %w", err)
	}
	defer cl.Close()
	buf := make([]byte, payload)
	start := time.Now()
	for time.Since(start) < dur && ctx.Err() == nil {
		for range 64 {
			_, _ = cl.Write(buf) // ENOBUFS and refusals only lower the count
		}
	}
	sendTime := time.Since(start)
	// Stragglers still in queues arrive within a few ms of the last send;
	// count what arrived in the sending time plus that grace.
	_ = srv.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	<-rdone
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return float64(got.Load()) / sendTime.Seconds(), nil
}

// payloadOf estimates the TCP payload in ipBytes of full-sized segments
// (MSS 1448 in 1500-byte packets, the goodput model's ratio).
func payloadOf(ipBytes uint64) int64 { return int64(ipBytes * 1448 / 1500) }
