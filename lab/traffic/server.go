// Package traffic generates the lab's load in-process: an HTTP/1.1 server
// that serves generated files of any size (the seeds' nginx), a client that
// downloads one (the seeds' `curl -O`) with live progress and the TCP_INFO
// of both sockets at the end, and a request/response load (the seeds' wrk)
// whose server answers in two writes, so a client's delayed ACK shows up
// as latency. Each side runs in the network namespace it is given and
// takes its socket options from tuner/sockopt.
package traffic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netns"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/tuner/sockopt"
	"github.com/wanlab/wanlab/units"
)

// Paths the server answers. GenPath+"<n>" is a generated file of n bytes;
// RRPath+"<n>" a response of n bytes sent in two writes.
// InfoPath+"<addr:port>" returns, as JSON (PeerInfo), the server socket's
// TCP_INFO for the open connection from that client address: how a client
// in another host (a VM) learns the sender's view of its download.
const (
	GenPath  = "/gen/"
	RRPath   = "/rr/"
	InfoPath = "/info/"
)

// PeerInfo is the server socket's state as InfoPath returns it.
type PeerInfo struct {
	TCPInfo   sockopt.TCPInfo   `json:"tcp_info"`
	Effective sockopt.Effective `json:"sockopt"`
}

// patternSize is the length of the block the generated content repeats.
const patternSize = 64 << 10

// pattern is the generated content: pseudo-random (so nothing on the path
// could compress it) yet fixed, so a client can verify every byte. It is
// made on first use: every command of the binary would pay for it at
// start.
var pattern = sync.OnceValue(func() []byte {
	r := rand.New(rand.NewPCG(0x77616e6c6162, 1))
	b := make([]byte, patternSize)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
})

// ServerConfig sets up a Server.
type ServerConfig struct {
	// Listen is the address to listen on; port 0 picks a free one.
	Listen netip.AddrPort `json:"listen"`
	// Sockopt is applied to the listener, from which accepted sockets
	// inherit buffers and congestion control (e.g. SndBuf for seed 000's
	// pinned send buffer).
	Sockopt sockopt.Options `json:"sockopt"`
	// Nagle leaves Nagle's algorithm on for accepted connections (Go turns
	// it off). With it, the second write of an RR response waits for the
	// ACK of the first, which a client in delayed-ACK mode holds back for
	// 40 ms: seed 003.
	Nagle bool `json:"nagle,omitempty"`
	// ThinkTime is the pause between the header and the body of an RR
	// response, standing for the backend's work.
	ThinkTime time.Duration `json:"think_time_ns,omitempty"`
	// WriteRate > 0 paces a download's writes: WriteChunk bytes (default
	// DefaultWriteChunk) at a time, each when the rate allows it, as an
	// application producing its data at that rate does (a stream, a
	// relay); 0 writes as fast as TCP takes it.
	// An RR response's body is paced the same way.
	WriteRate  units.Rate `json:"write_rate_bps,omitempty"`
	WriteChunk units.Size `json:"write_chunk_bytes,omitempty"`
	// WritePauses > 0 splits a download into WritePauses+1 equal parts
	// with a pause of WritePause between them: an application that
	// stopped writing (for its own work, or for its peer) that many times.
	WritePauses int           `json:"write_pauses,omitempty"`
	WritePause  time.Duration `json:"write_pause_ns,omitempty"`
}

// DefaultWriteChunk is the size of a paced download's writes.
const DefaultWriteChunk = 32 * units.KiB

// Server is an HTTP/1.1 server inside a namespace.
type Server struct {
	cfg  ServerConfig
	ln   net.Listener
	http *http.Server
	done chan error

	closeOnce sync.Once
	closeErr  error

	mu    sync.Mutex
	conns map[netip.AddrPort]*net.TCPConn // by remote address
}

// StartServer listens inside ns and serves until Close or until ctx is
// cancelled.
func StartServer(ctx context.Context, ns netns.NsHandle, cfg ServerConfig) (*Server, error) {
	if !cfg.Listen.IsValid() {
		return nil, errors.New("traffic server: no listen address")
	}
	s := &Server{cfg: cfg, done: make(chan error, 1), conns: map[netip.AddrPort]*net.TCPConn{}}
	lc := net.ListenConfig{Control: cfg.Sockopt.Control}
	err := nsrun.Do(ns, func() error {
		var err error
		s.ln, err = lc.Listen(ctx, "tcp", cfg.Listen.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("traffic server: listen %s: %w", cfg.Listen, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(GenPath, s.serveGen)
	mux.HandleFunc(RRPath, s.serveRR)
	mux.HandleFunc(InfoPath, s.serveInfo)
	s.http = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 30 * time.Second,
		ConnState:         s.connState,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() { s.done <- s.http.Serve(s.ln) }()
	context.AfterFunc(ctx, func() { _ = s.http.Close() })
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() netip.AddrPort {
	return s.ln.Addr().(*net.TCPAddr).AddrPort()
}

// Close stops the server and closes its connections.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		err := s.http.Close()
		if serr := <-s.done; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		s.closeErr = err
	})
	return s.closeErr
}

func (s *Server) connState(c net.Conn, st http.ConnState) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	// A dual-stack listener (0.0.0.0 or ::) sees IPv4 clients as
	// ::ffff:a.b.c.d; the client knows its own address as a.b.c.d.
	ap := tc.RemoteAddr().(*net.TCPAddr).AddrPort()
	remote := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	switch st {
	case http.StateNew:
		if s.cfg.Nagle {
			_ = tc.SetNoDelay(false)
		}
		s.mu.Lock()
		s.conns[remote] = tc
		s.mu.Unlock()
	case http.StateClosed, http.StateHijacked:
		s.mu.Lock()
		delete(s.conns, remote)
		s.mu.Unlock()
	}
}

// Info returns the kernel's view of the server socket talking to remote
// (the client's local address) while that connection is still open.
func (s *Server) Info(remote netip.AddrPort) (sockopt.TCPInfo, sockopt.Effective, error) {
	s.mu.Lock()
	c := s.conns[netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())]
	s.mu.Unlock()
	if c == nil {
		return sockopt.TCPInfo{}, sockopt.Effective{}, fmt.Errorf("traffic server: no connection from %s", remote)
	}
	info, err := sockopt.Info(c)
	if err != nil {
		return info, sockopt.Effective{}, err
	}
	eff, err := sockopt.Read(c)
	return info, eff, err
}

// sizeFromPath parses the byte count after prefix.
func sizeFromPath(path, prefix string) (units.Size, error) {
	n, err := strconv.ParseUint(strings.TrimPrefix(path, prefix), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", strings.TrimPrefix(path, prefix), err)
	}
	return units.Size(n), nil
}

func (s *Server) serveGen(w http.ResponseWriter, r *http.Request) {
	n, err := sizeFromPath(r.URL.Path, GenPath)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatUint(uint64(n), 10))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	parts := uint64(max(0, s.cfg.WritePauses)) + 1
	pace := newPacer(s.cfg.WriteRate, s.cfg.WriteChunk)
	var off uint64
	for i := range parts {
		part := uint64(n) / parts
		if i == parts-1 {
			part = uint64(n) - part*(parts-1)
		}
		if i > 0 && !s.pause(r.Context(), w, pace) {
			return
		}
		if s.writePattern(r.Context(), w, pace, off, part) != nil {
			return
		}
		off += part
	}
}

// pause flushes what was written and waits WritePause; false when the
// request ended first.
func (s *Server) pause(ctx context.Context, w http.ResponseWriter, pace *pacer) bool {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	t := time.NewTimer(s.cfg.WritePause)
	defer t.Stop()
	select {
	case <-t.C:
		// The pause is time the application spent elsewhere: the writes
		// after it keep their pace, they do not make it up.
		pace.skip(s.cfg.WritePause)
		return true
	case <-ctx.Done():
		return false
	}
}

// writePattern writes the n bytes of the content from offset off (the
// pattern repeated), each write when pace allows it; the error is the
// client's going away or ctx's end.
func (s *Server) writePattern(ctx context.Context, w http.ResponseWriter, pace *pacer, off, n uint64) error {
	for left := n; left > 0; {
		chunk := pattern()[(off+n-left)%patternSize:]
		if limit := pace.chunk(); limit > 0 && uint64(len(chunk)) > limit {
			chunk = chunk[:limit]
		}
		if left < uint64(len(chunk)) {
			chunk = chunk[:left]
		}
		if err := pace.wait(ctx, len(chunk)); err != nil {
			return err
		}
		if _, err := w.Write(chunk); err != nil {
			return err
		}
		if f, ok := w.(http.Flusher); ok && pace.rate > 0 {
			f.Flush() // each paced write leaves as it is made
		}
		left -= uint64(len(chunk))
	}
	return nil
}

// serveRR sends the header, flushes it as its own segment, waits ThinkTime
// and then sends the body: two small writes, the pattern behind seed 003
// (a body larger than the pattern in as many writes as it takes, paced
// at WriteRate when set).
func (s *Server) serveRR(w http.ResponseWriter, r *http.Request) {
	n, err := sizeFromPath(r.URL.Path, RRPath)
	if err != nil || n > MaxRRBody {
		http.Error(w, fmt.Sprintf("rr size: want 0..%d bytes", uint64(MaxRRBody)), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatUint(uint64(n), 10))
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if s.cfg.ThinkTime > 0 {
		time.Sleep(s.cfg.ThinkTime)
	}
	if n <= patternSize && s.cfg.WriteRate == 0 {
		_, _ = w.Write(pattern()[:n])
		return
	}
	_ = s.writePattern(r.Context(), w, newPacer(s.cfg.WriteRate, s.cfg.WriteChunk), 0, uint64(n))
}

// serveInfo answers InfoPath with the TCP_INFO of another open connection.
func (s *Server) serveInfo(w http.ResponseWriter, r *http.Request) {
	remote, err := netip.ParseAddrPort(strings.TrimPrefix(r.URL.Path, InfoPath))
	if err != nil {
		http.Error(w, fmt.Sprintf("info: client address: %v", err), http.StatusBadRequest)
		return
	}
	info, eff, err := s.Info(remote)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	b, _ := json.Marshal(PeerInfo{TCPInfo: info, Effective: eff})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
