// Package metrics exports the proxy's counters to Prometheus. Values are
// computed from a Stats snapshot at scrape time, so the forwarding path
// never touches a Prometheus metric.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wanlab/wanlab/proxy/control"
)

const namespace = "wanlab_proxy"

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
}

var (
	dirLabel = "iface" // the egress interface: one direction of the proxy

	packetsIn  = desc("packets_in_total", "Packets that entered the impairment engine, by egress interface.", dirLabel)
	bytesIn    = desc("bytes_in_total", "IP bytes that entered the impairment engine.", dirLabel)
	packetsOut = desc("packets_out_total", "Packets that left the impairment engine (duplicates included).", dirLabel)
	bytesOut   = desc("bytes_out_total", "IP bytes that left the impairment engine.", dirLabel)
	drops      = desc("drops_total", "Packets dropped by the engine, by reason (loss: random or modelled loss; queue: a queue limit).", dirLabel, "reason")
	ecnMarked  = desc("ecn_marked_total", "Packets marked CE instead of dropped (netem ecn).", dirLabel)
	duplicated = desc("duplicated_total", "Duplicates created (netem duplicate).", dirLabel)
	corrupted  = desc("corrupted_total", "Packets with one bit flipped (netem corrupt).", dirLabel)
	reordered  = desc("reordered_total", "Packets sent ahead of the queue (netem reorder).", dirLabel)
	queuePkts  = desc("queue_packets", "Packets held by the engine now.", dirLabel)
	queueBytes = desc("queue_bytes", "IP bytes held by the engine now.", dirLabel)
	sojourn    = desc("sojourn_seconds", "Time packets spent in the engine, from arrival to departure.", dirLabel)

	malformed   = desc("device_malformed_total", "Truncated or malformed IP packets read from the TUN and dropped.", dirLabel)
	readErrors  = desc("device_read_errors_total", "Failed reads from the direction's TUN device.", dirLabel)
	writeErrors = desc("device_write_errors_total", "Failed writes to the direction's TUN device.", dirLabel)

	tapRecords = desc("tap_records_total", "Packet records written to the pcapng tap.")
	tapBytes   = desc("tap_bytes", "Size of the pcapng tap file so far.")
	tapLost    = desc("tap_lost_total", "Tap records not written, by reason (ring_full: the writer fell behind; over_limit: the size limit was reached).", "reason")
)

// collector turns a Stats snapshot into constant metrics at each scrape.
type collector struct {
	src func() control.Stats
}

// NewCollector returns a collector reading src at each scrape.
func NewCollector(src func() control.Stats) prometheus.Collector { return collector{src: src} }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{packetsIn, bytesIn, packetsOut, bytesOut, drops, ecnMarked,
		duplicated, corrupted, reordered, queuePkts, queueBytes, sojourn, malformed, readErrors,
		writeErrors, tapRecords, tapBytes, tapLost} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	st := c.src()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	for _, d := range st.Directions {
		e := d.Engine
		counter(packetsIn, e.PacketsIn, d.Iface)
		counter(bytesIn, e.BytesIn, d.Iface)
		counter(packetsOut, e.PacketsOut, d.Iface)
		counter(bytesOut, e.BytesOut, d.Iface)
		reasons := make([]string, 0, len(e.Drops))
		for r := range e.Drops {
			reasons = append(reasons, r)
		}
		sort.Strings(reasons)
		for _, r := range reasons {
			counter(drops, e.Drops[r], d.Iface, r)
		}
		counter(ecnMarked, e.ECNMarked, d.Iface)
		counter(duplicated, e.Duplicated, d.Iface)
		counter(corrupted, e.Corrupted, d.Iface)
		counter(reordered, e.Reordered, d.Iface)
		gauge(queuePkts, e.QueuePackets, d.Iface)
		gauge(queueBytes, e.QueueBytes, d.Iface)
		if h, ok := histogram(e.Sojourn, d.Iface); ok {
			ch <- h
		}
		counter(malformed, d.Device.Malformed, d.Iface)
		counter(readErrors, d.Device.ReadErrors, d.Iface)
		counter(writeErrors, d.Device.WriteErrors, d.Iface)
	}
	if t := st.Tap; t != nil {
		counter(tapRecords, t.Records)
		gauge(tapBytes, t.Bytes)
		counter(tapLost, t.RingFull, "ring_full")
		counter(tapLost, t.OverLimit, "over_limit")
	}
}

// histogram converts the engine's fixed buckets (a count per bucket, the
// last one unbounded) to Prometheus' cumulative form. A histogram whose
// bucket and count lengths disagree is skipped rather than misreported.
func histogram(h control.Histogram, iface string) (prometheus.Metric, bool) {
	if len(h.Counts) != len(h.Bounds)+1 {
		return nil, false
	}
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, b := range h.Bounds {
		cum += h.Counts[i]
		buckets[b.Seconds()] = cum
	}
	cum += h.Counts[len(h.Bounds)]
	m, err := prometheus.NewConstHistogram(sojourn, cum, h.Sum.Seconds(), buckets, iface)
	if err != nil {
		return nil, false
	}
	return m, true
}

// Server serves /metrics until closed.
type Server struct {
	srv  *http.Server
	l    net.Listener
	done chan error

	closeOnce sync.Once
	closeErr  error
}

// Serve listens on addr (host:port) and serves /metrics with the proxy's
// collector plus Go runtime and process metrics (RSS, CPU).
func Serve(addr string, src func() control.Stats) (*Server, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(NewCollector(src)); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: nil}))
	s := &Server{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		l:    l,
		done: make(chan error, 1),
	}
	go func() { s.done <- s.srv.Serve(l) }()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.l.Addr() }

// Close stops the server, letting a scrape in progress finish for up to a
// second.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := s.srv.Shutdown(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			err = s.srv.Close()
		}
		if serr := <-s.done; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
		s.closeErr = err
	})
	return s.closeErr
}
