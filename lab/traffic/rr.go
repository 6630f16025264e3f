package traffic

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/vishvananda/netns"

	"github.com/wanlab/wanlab/tuner/sockopt"
	"github.com/wanlab/wanlab/units"
)

// RRConfig describes a request/response load: Concurrency keep-alive
// connections sending Requests requests in total, one at a time per
// connection, like `wrk -c C`.
type RRConfig struct {
	Server      netip.AddrPort `json:"server"`
	Requests    int            `json:"requests"`
	Concurrency int            `json:"concurrency"`
	// BodySize is the response body size (at most MaxRRBody); 0 means
	// 612 bytes, nginx's welcome page.
	BodySize units.Size `json:"body_bytes"`
	// Sockopt is set on every client socket; QuickAck re-arms
	// TCP_QUICKACK after every read, the fix for seed 003.
	Sockopt sockopt.Options `json:"sockopt"`
	// Timeout bounds each request; 0 means 5 s.
	Timeout time.Duration `json:"timeout_ns,omitempty"`
	// Now is the clock; nil means time.Now.
	Now func() time.Time `json:"-"`
}

// MaxRRBody bounds a request/response load's answers: what one request
// may make the server send (a page's largest object, a software update's
// range; a transfer larger than that is a download).
const MaxRRBody = 256 * units.MiB

// Latency summarizes request latencies (nearest-rank percentiles).
type Latency struct {
	Min  time.Duration `json:"min_ns"`
	Mean time.Duration `json:"mean_ns"`
	P50  time.Duration `json:"p50_ns"`
	P90  time.Duration `json:"p90_ns"`
	P99  time.Duration `json:"p99_ns"`
	Max  time.Duration `json:"max_ns"`
}

// RRResult is what wrk --latency prints.
type RRResult struct {
	Requests int           `json:"requests"`
	Errors   int           `json:"errors"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	PerSec   float64       `json:"requests_per_sec"`
	Latency  Latency       `json:"latency"`
	// Samples are every request's latency in completion order.
	Samples []time.Duration `json:"-"`
	// FirstError is the first failure, if any.
	FirstError string `json:"first_error,omitempty"`
}

// Summarize computes the latency summary of samples.
func Summarize(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1 // ceil(p·n) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Latency{
		Min: s[0], Max: s[len(s)-1], Mean: sum / time.Duration(len(s)),
		P50: rank(0.50), P90: rank(0.90), P99: rank(0.99),
	}
}

// RequestResponse runs the load from inside ns.
func RequestResponse(ctx context.Context, ns netns.NsHandle, cfg RRConfig) (RRResult, error) {
	var res RRResult
	if cfg.Requests <= 0 {
		return res, errors.New("rr: requests must be positive")
	}
	conc := max(1, min(cfg.Concurrency, cfg.Requests))
	body := cfg.BodySize
	if body == 0 {
		body = 612
	}
	if body > MaxRRBody {
		return res, fmt.Errorf("rr: body size %d larger than %d", body, uint64(MaxRRBody))
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	req := []byte("GET " + RRPath + strconv.FormatUint(uint64(body), 10) + " HTTP/1.1\r\nHost: " +
		cfg.Server.String() + "\r\nUser-Agent: wanlab\r\n\r\n")

	var (
		mu       sync.Mutex
		samples  = make([]time.Duration, 0, cfg.Requests)
		errs     int
		firstErr error
		wg       sync.WaitGroup
	)
	start := now()
	for w := range conc {
		// Spread the requests: the first Requests%conc workers take one more.
		n := cfg.Requests / conc
		if w < cfg.Requests%conc {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat, err := rrWorker(ctx, ns, cfg, req, int64(body), n, timeout, now)
			mu.Lock()
			defer mu.Unlock()
			samples = append(samples, lat...)
			if err != nil {
				// The requests this worker did not complete count as errors.
				errs += n - len(lat)
				if firstErr == nil {
					firstErr = err
				}
			}
		}()
	}
	wg.Wait()
	res.Elapsed = now().Sub(start)
	res.Requests = len(samples)
	res.Errors = errs
	res.Samples = samples
	res.Latency = Summarize(samples)
	if res.Elapsed > 0 {
		res.PerSec = float64(res.Requests) / res.Elapsed.Seconds()
	}
	if firstErr != nil {
		res.FirstError = firstErr.Error()
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if res.Requests == 0 && firstErr != nil {
		return res, fmt.Errorf("rr: every request failed: %w", firstErr)
	}
	return res, nil
}

// rrWorker sends n requests over one connection, one after the other.
func rrWorker(ctx context.Context, ns netns.NsHandle, cfg RRConfig, req []byte, body int64, n int,
	timeout time.Duration, now func() time.Time) ([]time.Duration, error) {
	tc, err := dial(ctx, ns, cfg.Server, cfg.Sockopt)
	if err != nil {
		return nil, fmt.Errorf("rr: connect %s: %w", cfg.Server, err)
	}
	defer tc.Close()
	stop := context.AfterFunc(ctx, func() { _ = tc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var conn net.Conn = tc
	if cfg.Sockopt.QuickAck {
		conn = sockopt.QuickAckConn(tc)
	}
	br := bufio.NewReader(conn)
	lat := make([]time.Duration, 0, n)
	for range n {
		if err := ctx.Err(); err != nil {
			return lat, err
		}
		t0 := now()
		_ = tc.SetDeadline(t0.Add(timeout))
		if _, err := conn.Write(req); err != nil {
			return lat, fmt.Errorf("rr: request: %w", ctxErr(ctx, err))
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return lat, fmt.Errorf("rr: response: %w", ctxErr(ctx, err))
		}
		got, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return lat, fmt.Errorf("rr: body: %w", ctxErr(ctx, err))
		}
		if resp.StatusCode != http.StatusOK || got != body {
			return lat, fmt.Errorf("rr: %s with %d bytes, want 200 with %d", resp.Status, got, body)
		}
		lat = append(lat, now().Sub(t0))
	}
	return lat, nil
}
