package traffic

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netns"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/tuner/sockopt"
	"github.com/wanlab/wanlab/units"
)

// DownloadConfig describes one download.
type DownloadConfig struct {
	// Server is the server's address; Size the file size to ask for.
	Server netip.AddrPort
	Size   units.Size
	// Sockopt is set on the client socket before the SYN (RcvBuf for seed
	// 001's receive-window limit). With QuickAck the client re-arms
	// TCP_QUICKACK after every read.
	Sockopt sockopt.Options
	// Output receives the body; nil discards it (curl -o /dev/null).
	Output io.Writer
	// Verify checks every byte against the generated pattern.
	Verify bool
	// Progress, if set, is called from another goroutine every
	// ProgressEvery (default 250 ms) and once more at the end.
	Progress      func(Progress)
	ProgressEvery time.Duration
	// Peer, if set, is the in-process server, asked for its socket's
	// TCP_INFO once the last byte has arrived, before the client closes.
	Peer *Server
	// AskPeer, when Peer is nil, asks the server for that TCP_INFO over a
	// second connection (InfoPath): the server runs on another host.
	AskPeer bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Progress is a snapshot of a running download.
type Progress struct {
	Bytes   units.Size    `json:"bytes"`
	Total   units.Size    `json:"total"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// Rate is the speed over the last interval, Average over the whole
	// download so far; ETA is the time left at Average (0 when unknown).
	Rate    units.Rate    `json:"rate_bps"`
	Average units.Rate    `json:"average_bps"`
	ETA     time.Duration `json:"eta_ns"`
	Done    bool          `json:"done"`
}

// DownloadResult is what curl's summary shows, plus both sockets' kernel
// state at the end.
type DownloadResult struct {
	Bytes units.Size `json:"bytes"`
	// Connect is the TCP handshake time, FirstByte the time from the start
	// to the first byte of the response, Elapsed the whole download.
	Connect   time.Duration `json:"connect_ns"`
	FirstByte time.Duration `json:"first_byte_ns"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	// Average is Bytes over Elapsed (curl's "Average Dload"), Transfer
	// Bytes over the time from the first byte to the last.
	Average  units.Rate `json:"average_bps"`
	Transfer units.Rate `json:"transfer_bps"`

	Local  netip.AddrPort `json:"local"`
	Remote netip.AddrPort `json:"remote"`

	Client          sockopt.TCPInfo    `json:"client_tcp_info"`
	ClientEffective sockopt.Effective  `json:"client_sockopt"`
	Server          *sockopt.TCPInfo   `json:"server_tcp_info,omitempty"`
	ServerEffective *sockopt.Effective `json:"server_sockopt,omitempty"`
}

// readBufSize is the client's read size: large enough that one read
// drains what a fast path delivers between two wakeups.
const readBufSize = 256 << 10

// rateOf is n bytes over d as a Rate.
func rateOf(n units.Size, d time.Duration) units.Rate {
	if d <= 0 {
		return 0
	}
	return units.Rate(float64(n) * 8 / d.Seconds())
}

// maxDialing bounds the dials in progress at once, and dialSlots holds
// their slots. A dial runs on an OS thread locked into the client's
// namespace (nsrun.Do) until the handshake ends: a load of 12,000
// connections once dialled them all at once and Go aborted with "thread
// exhaustion". The connections themselves are goroutines on the poller.
const maxDialing = 16

var dialSlots = make(chan struct{}, maxDialing)

// dial connects from inside ns with the options set before the SYN.
func dial(ctx context.Context, ns netns.NsHandle, addr netip.AddrPort, o sockopt.Options) (*net.TCPConn, error) {
	select {
	case dialSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-dialSlots }()
	d := net.Dialer{Control: o.Control}
	var c net.Conn
	err := nsrun.Do(ns, func() error {
		var err error
		c, err = d.DialContext(ctx, "tcp", addr.String())
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// Download fetches a generated file from inside ns.
func Download(ctx context.Context, ns netns.NsHandle, cfg DownloadConfig) (DownloadResult, error) {
	var res DownloadResult
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	every := cfg.ProgressEvery
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	start := now()
	tc, err := dial(ctx, ns, cfg.Server, cfg.Sockopt)
	if err != nil {
		return res, fmt.Errorf("download: connect %s: %w", cfg.Server, err)
	}
	defer tc.Close()
	res.Connect = now().Sub(start)
	res.Local = tc.LocalAddr().(*net.TCPAddr).AddrPort()
	res.Remote = tc.RemoteAddr().(*net.TCPAddr).AddrPort()
	stop := context.AfterFunc(ctx, func() { _ = tc.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	var conn net.Conn = tc
	if cfg.Sockopt.QuickAck {
		conn = sockopt.QuickAckConn(tc)
	}
	path := GenPath + strconv.FormatUint(uint64(cfg.Size), 10)
	if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: "+cfg.Server.String()+
		"\r\nUser-Agent: wanlab\r\nAccept: */*\r\n\r\n"); err != nil {
		return res, fmt.Errorf("download: request: %w", ctxErr(ctx, err))
	}
	br := bufio.NewReaderSize(conn, readBufSize)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return res, fmt.Errorf("download: response header: %w", ctxErr(ctx, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return res, fmt.Errorf("download: %s: %s", path, resp.Status)
	}
	if resp.ContentLength != int64(cfg.Size) {
		return res, fmt.Errorf("download: %s: Content-Length %d, want %d", path, resp.ContentLength, cfg.Size)
	}
	firstByte := now()
	res.FirstByte = firstByte.Sub(start)

	var got atomic.Uint64
	var progDone chan struct{}
	// lastByte is when the body's end was read: the final report's time,
	// not when Download returns, which is after the TCP_INFO queries (a
	// connection of its own to the server: two more round trips).
	var lastByte time.Time
	report := func(last *units.Size, lastAt *time.Time, done bool) {
		t := now()
		if done && !lastByte.IsZero() {
			t = lastByte
		}
		n := units.Size(got.Load())
		p := Progress{Bytes: n, Total: cfg.Size, Elapsed: t.Sub(start), Done: done,
			Rate: rateOf(n-*last, t.Sub(*lastAt)), Average: rateOf(n, t.Sub(start))}
		if p.Average > 0 && n < cfg.Size {
			p.ETA = time.Duration(float64(cfg.Size-n) * 8 / float64(p.Average) * float64(time.Second))
		}
		*last, *lastAt = n, t
		cfg.Progress(p)
	}
	var last units.Size
	lastAt := start
	if cfg.Progress != nil {
		progDone = make(chan struct{})
		tick := time.NewTicker(every)
		stopTick := make(chan struct{})
		defer func() { close(stopTick); <-progDone; tick.Stop(); report(&last, &lastAt, true) }()
		go func() {
			defer close(progDone)
			for {
				select {
				case <-tick.C:
					report(&last, &lastAt, false)
				case <-stopTick:
					return
				}
			}
		}()
	}

	out := cfg.Output
	if out == nil {
		out = io.Discard
	}
	buf := make([]byte, readBufSize)
	var off uint64
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if cfg.Verify {
				if err := verify(buf[:n], off); err != nil {
					return res, fmt.Errorf("download: %w", err)
				}
			}
			if _, err := out.Write(buf[:n]); err != nil {
				return res, fmt.Errorf("download: write output: %w", err)
			}
			off += uint64(n)
			got.Store(off)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return res, fmt.Errorf("download: after %d of %d bytes: %w", off, cfg.Size, ctxErr(ctx, rerr))
		}
	}
	end := now()
	lastByte = end
	res.Bytes = units.Size(off)
	res.Elapsed = end.Sub(start)
	res.Average = rateOf(res.Bytes, res.Elapsed)
	res.Transfer = rateOf(res.Bytes, end.Sub(firstByte))
	if off != uint64(cfg.Size) {
		return res, fmt.Errorf("download: got %d of %d bytes", off, cfg.Size)
	}
	if res.Client, err = sockopt.Info(tc); err != nil {
		return res, err
	}
	if res.ClientEffective, err = sockopt.Read(tc); err != nil {
		return res, err
	}
	if cfg.Peer != nil {
		info, eff, err := cfg.Peer.Info(res.Local)
		if err != nil {
			return res, err
		}
		res.Server, res.ServerEffective = &info, &eff
	} else if cfg.AskPeer {
		pi, err := askPeer(ctx, ns, cfg.Server, res.Local)
		if err != nil {
			return res, fmt.Errorf("download: server's TCP_INFO: %w", err)
		}
		res.Server, res.ServerEffective = &pi.TCPInfo, &pi.Effective
	}
	return res, nil
}

// askPeer fetches the server's PeerInfo of the connection from local.
func askPeer(ctx context.Context, ns netns.NsHandle, server, local netip.AddrPort) (PeerInfo, error) {
	var pi PeerInfo
	tc, err := dial(ctx, ns, server, sockopt.Options{})
	if err != nil {
		return pi, err
	}
	defer tc.Close()
	stop := context.AfterFunc(ctx, func() { _ = tc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := io.WriteString(tc, "GET "+InfoPath+local.String()+" HTTP/1.1\r\nHost: "+server.String()+
		"\r\nConnection: close\r\n\r\n"); err != nil {
		return pi, ctxErr(ctx, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		return pi, ctxErr(ctx, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return pi, ctxErr(ctx, err)
	}
	if resp.StatusCode != http.StatusOK {
		return pi, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	if err := json.Unmarshal(b, &pi); err != nil {
		return pi, fmt.Errorf("info: %w", err)
	}
	return pi, nil
}

// verify checks b, found at offset off of the body, against the pattern.
func verify(b []byte, off uint64) error {
	for len(b) > 0 {
		p := off % patternSize
		n := min(len(b), int(patternSize-p))
		pat := pattern()
		if !bytes.Equal(b[:n], pat[p:int(p)+n]) {
			for i := range n {
				if b[i] != pat[int(p)+i] {
					return fmt.Errorf("byte %d is %#02x, want %#02x", off+uint64(i), b[i], pat[int(p)+i])
				}
			}
		}
		b, off = b[n:], off+uint64(n)
	}
	return nil
}

// ctxErr prefers the context's error over the deadline error its
// cancellation caused.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}
