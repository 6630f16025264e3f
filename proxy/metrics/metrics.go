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
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wanlab/wanlab/internal/peerlimit"
	"github.com/wanlab/wanlab/proxy/control"
	"github.com/wanlab/wanlab/tc/engine"
)

const namespace = "wanlab_proxy"

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
}

// Label names: the egress interface (one direction of the proxy) and the
// engine's traffic class ("default" unless classes are configured).
const (
	ifaceLabel = "iface"
	classLabel = "class"
)

var (
	packetsIn  = desc("packets_in_total", "Packets that entered the impairment engine (duplicates included), by egress interface and class.", ifaceLabel, classLabel)
	bytesIn    = desc("bytes_in_total", "IP bytes that entered the impairment engine.", ifaceLabel, classLabel)
	packetsOut = desc("packets_out_total", "Packets that left the impairment engine.", ifaceLabel, classLabel)
	bytesOut   = desc("bytes_out_total", "IP bytes that left the impairment engine.", ifaceLabel, classLabel)
	drops      = desc("drops_total", "Packets dropped by the engine, by reason (loss: netem loss model; queue: a queue limit; oversize: larger than tbf's bucket).", ifaceLabel, classLabel, "reason")
	ecnMarked  = desc("ecn_marked_total", "Packets marked CE instead of dropped (netem ecn).", ifaceLabel, classLabel)
	duplicated = desc("duplicated_total", "Duplicates created (netem duplicate).", ifaceLabel, classLabel)
	corrupted  = desc("corrupted_total", "Packets with one bit flipped (netem corrupt).", ifaceLabel, classLabel)
	reordered  = desc("reordered_total", "Packets sent ahead of the queue (netem reorder).", ifaceLabel, classLabel)
	queuePkts  = desc("queue_packets", "Packets held by the engine now.", ifaceLabel, classLabel)
	queueBytes = desc("queue_bytes", "IP bytes held by the engine now.", ifaceLabel, classLabel)
	sojourn    = desc("sojourn_seconds", "Time packets spent in the engine, from arrival to departure.", ifaceLabel, classLabel)
	swaps      = desc("spec_swaps_total", "Spec replacements applied at runtime.", ifaceLabel)

	malformed   = desc("device_malformed_total", "Truncated or malformed IP packets read from the TUN and dropped.", ifaceLabel)
	readErrors  = desc("device_read_errors_total", "Failed reads from the direction's TUN device.", ifaceLabel)
	writeErrors = desc("device_write_errors_total", "Failed writes to the direction's TUN device.", ifaceLabel)
	written     = desc("device_written_total", "Packets written back to the direction's TUN device.", ifaceLabel)
	late1ms     = desc("device_late_1ms_total", "Packets written 1 ms or more after the departure time the engine gave them.", ifaceLabel)

	proxyLatency = desc("latency_seconds", "The proxy's own time per packet, by step: added (from the engine's departure to the TUN write returning: what the proxy adds beyond the spec, the sum of due_to_dequeue and dequeue_to_written), read_to_enqueue (TUN read to the engine holding the batch, inside the spec's delay), due_to_dequeue (the release's lateness), dequeue_to_written (the TUN write).", ifaceLabel, "step")

	tapRecords = desc("tap_records_total", "Packet records written to the pcapng tap.")
	tapBytes   = desc("tap_bytes", "Size of the pcapng tap file so far.")
	tapLost    = desc("tap_lost_total", "Tap records not written, by reason (ring_full: the writer fell behind; over_limit: the size limit was reached).", "reason")
)

// sojournBounds are the engine's fixed bucket bounds in seconds.
var sojournBounds = func() []float64 {
	b := make([]float64, len(engine.SojournBoundsNs))
	for i, ns := range engine.SojournBoundsNs {
		b[i] = float64(ns) / 1e9
	}
	return b
}()

// MaxClasses bounds the per-class series of one direction (engine classes
// and htb classes each): a tree with more exports its first MaxClasses-1
// classes by name and the rest summed as class "other", so that a scrape
// stays under about 2 MB whatever the tree (a 25,000-class tree gave 76 MB
// a scrape before).
const MaxClasses = 256

// otherClass names the sum of the classes beyond MaxClasses-1.
const otherClass = "other"

// collector turns a Stats snapshot into constant metrics at each scrape.
type collector struct {
	src func() control.Stats
	// warn, when set, is told once per direction that its classes were
	// summed beyond MaxClasses.
	warn func(iface string, classes int)
}

// NewCollector returns a collector reading src at each scrape.
func NewCollector(src func() control.Stats) prometheus.Collector { return collector{src: src} }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{packetsIn, bytesIn, packetsOut, bytesOut, drops, ecnMarked,
		duplicated, corrupted, reordered, queuePkts, queueBytes, sojourn, swaps, malformed, readErrors, written, late1ms,
		writeErrors, proxyLatency, tapRecords, tapBytes, tapLost} {
		ch <- d
	}
	for _, d := range htbDescs {
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
		// Per class, so that sum() over classes gives the direction's total
		// without counting anything twice. A pipeline always has at least its
		// "default" class; a snapshot without classes reports its totals.
		classes := d.Engine.Classes
		if len(classes) == 0 {
			classes = []engine.ClassSnapshot{{Name: "default", Totals: d.Engine.Totals}}
		}
		if len(classes) > MaxClasses {
			if c.warn != nil {
				c.warn(d.Iface, len(classes))
			}
			classes = capClasses(classes)
		}
		for _, cl := range classes {
			e, l := cl.Totals, []string{d.Iface, cl.Name}
			counter(packetsIn, e.PacketsIn, l...)
			counter(bytesIn, e.BytesIn, l...)
			counter(packetsOut, e.PacketsOut, l...)
			counter(bytesOut, e.BytesOut, l...)
			counter(drops, e.Drops.Loss, d.Iface, cl.Name, engine.DropLoss.String())
			counter(drops, e.Drops.Queue, d.Iface, cl.Name, engine.DropQueue.String())
			counter(drops, e.Drops.Oversize, d.Iface, cl.Name, engine.DropOversize.String())
			if e.Drops.AQM > 0 { // a queue discipline's own drops (codel, fq_codel, pie, red)
				counter(drops, e.Drops.AQM, d.Iface, cl.Name, engine.DropAQM.String())
			}
			counter(ecnMarked, e.ECNMarked, l...)
			counter(duplicated, e.Duplicated, l...)
			counter(corrupted, e.Corrupted, l...)
			counter(reordered, e.Reordered, l...)
			gauge(queuePkts, e.QueuePackets, l...)
			gauge(queueBytes, e.QueueBytes, l...)
			ch <- histogram(e.Sojourn, l)
		}
		collectHTB(ch, d)
		counter(swaps, d.Engine.Swaps, d.Iface)
		counter(malformed, d.Device.Malformed, d.Iface)
		counter(readErrors, d.Device.ReadErrors, d.Iface)
		counter(writeErrors, d.Device.WriteErrors, d.Iface)
		counter(written, d.Device.Written, d.Iface)
		counter(late1ms, d.Device.Late1ms, d.Iface)
		if l := d.Latency; l != nil {
			for _, step := range []struct {
				name string
				h    control.LatencyHistogram
			}{{"added", l.Added}, {"read_to_enqueue", l.ReadToEnqueue}, {"due_to_dequeue", l.DueToDequeue}, {"dequeue_to_written", l.DequeueToWritten}} {
				ch <- latencyHistogram(step.h, d.Iface, step.name)
			}
		}
	}
	if t := st.Tap; t != nil {
		counter(tapRecords, t.Records)
		gauge(tapBytes, t.Bytes)
		counter(tapLost, t.RingFull, "ring_full")
		counter(tapLost, t.OverLimit, "over_limit")
	}
}

// capClasses keeps the first MaxClasses-1 classes and sums the rest into
// one class named otherClass.
func capClasses(classes []engine.ClassSnapshot) []engine.ClassSnapshot {
	out := make([]engine.ClassSnapshot, MaxClasses)
	copy(out, classes[:MaxClasses-1])
	rest := &out[MaxClasses-1]
	rest.Name = otherClass
	for _, cl := range classes[MaxClasses-1:] {
		addCounters(&rest.Totals, &cl.Totals)
	}
	return out
}

// addCounters adds the counters b exports to a.
func addCounters(a, b *engine.Counters) {
	a.PacketsIn += b.PacketsIn
	a.BytesIn += b.BytesIn
	a.PacketsOut += b.PacketsOut
	a.BytesOut += b.BytesOut
	a.Drops.Add(b.Drops)
	a.ECNMarked += b.ECNMarked
	a.Duplicated += b.Duplicated
	a.Corrupted += b.Corrupted
	a.Reordered += b.Reordered
	a.QueuePackets += b.QueuePackets
	a.QueueBytes += b.QueueBytes
	for i := range a.Sojourn.Counts {
		a.Sojourn.Counts[i] += b.Sojourn.Counts[i]
	}
	a.Sojourn.SumNs += b.Sojourn.SumNs
	a.Sojourn.Count += b.Sojourn.Count
}

// histogram converts the engine's fixed buckets to Prometheus' form.
func histogram(h engine.Histogram, labels []string) prometheus.Metric {
	return constHistogram(sojourn, sojournBounds, h.Counts[:], float64(h.SumNs)/1e9, labels...)
}

// latencyBounds are control.LatencyBoundsNs in seconds.
var latencyBounds = func() []float64 {
	b := make([]float64, len(control.LatencyBoundsNs))
	for i, ns := range control.LatencyBoundsNs {
		b[i] = float64(ns) / 1e9
	}
	return b
}()

// latencyHistogram converts one of the proxy's latency histograms.
func latencyHistogram(h control.LatencyHistogram, labels ...string) prometheus.Metric {
	return constHistogram(proxyLatency, latencyBounds, h.Counts, h.Sum.Seconds(), labels...)
}

// constHistogram turns fixed buckets (a count per bound, and one more
// above them all, which may be missing) into Prometheus' cumulative form.
func constHistogram(d *prometheus.Desc, bounds []float64, counts []uint64, sum float64, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(bounds))
	var cum uint64
	for i, b := range bounds {
		if i < len(counts) {
			cum += counts[i]
		}
		buckets[b] = cum
	}
	if len(counts) > len(bounds) {
		cum += counts[len(bounds)]
	}
	return prometheus.MustNewConstHistogram(d, cum, sum, buckets, labels...)
}

// Server serves /metrics until closed.
type Server struct {
	srv  *http.Server
	l    *peerlimit.Listener
	done chan error

	closeOnce sync.Once
	closeErr  error
}

// Limits of the metrics server, so that nobody who can reach it (any local
// user; with --metrics-public, any host) can hold its slots or its memory:
// 32 connections, 8 of them kept for root and the proxy's user, at most 4
// per other uid or host; 2 s for a request's headers, 5 s for the request,
// 10 s for the answer, 30 s idle; two scrapes at once (a third gets 503).
const (
	maxConns      = 32
	reservedConns = 8
	perPeerConns  = 4
	maxScrapes    = 2
)

var timeouts = peerlimit.Timeouts{ReadHeader: 2 * time.Second, Read: 5 * time.Second, Write: 10 * time.Second,
	Idle: 30 * time.Second, MaxHeaderBytes: 8 << 10}

// Options are Serve's optional settings.
type Options struct {
	// Labels (from ParseLabels; may be nil) are added to every metric, so
	// that one Prometheus can scrape many proxies, a link each.
	Labels prometheus.Labels
	// Warn, when set, gets one line the first time a direction's classes
	// are summed beyond MaxClasses.
	Warn func(line string)
}

// Serve listens on addr (host:port) and serves /metrics with the proxy's
// collector plus Go runtime and process metrics (RSS, CPU).
func Serve(addr string, src func() control.Stats, opt Options) (*Server, error) {
	reg := prometheus.NewRegistry()
	wrapped := prometheus.WrapRegistererWith(opt.Labels, reg)
	col := collector{src: src}
	if opt.Warn != nil {
		var mu sync.Mutex
		warned := map[string]bool{}
		col.warn = func(iface string, classes int) {
			mu.Lock()
			defer mu.Unlock()
			if !warned[iface] {
				warned[iface] = true
				opt.Warn(fmt.Sprintf("metrics: %s has %d classes: series for the first %d, the rest summed as class=%q",
					iface, classes, MaxClasses-1, otherClass))
			}
		}
	}
	if err := wrapped.Register(col); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if err := wrapped.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if err := wrapped.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	euid := os.Geteuid()
	pl := peerlimit.New(l, peerlimit.Limits{
		Total:    maxConns,
		Reserved: reservedConns,
		PerPeer:  perPeerConns,
		Trusted:  func(p peerlimit.Peer) bool { return p.HasUID && (p.UID == 0 || p.UID == euid) },
	})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		MaxRequestsInFlight: maxScrapes,
		Timeout:             timeouts.Write - time.Second,
	}))
	s := &Server{
		srv:  timeouts.Server(mux),
		l:    pl,
		done: make(chan error, 1),
	}
	go func() { s.done <- s.srv.Serve(pl) }()
	return s, nil
}

// Refused is the number of connections closed at accept by the limits.
func (s *Server) Refused() uint64 { return s.l.Refused() }

// CheckAddr refuses a metrics address that would listen on every interface
// (an empty host, 0.0.0.0, ::) unless public says that is meant; a name is
// resolved and its addresses checked the same way.
func CheckAddr(addr string, public bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: want host:port: %w", addr, err)
	}
	if public {
		return nil
	}
	const hint = "listens on every interface, where any host (or container) on the network can read the counters " +
		"and hold the server's connections: name one address, or pass --metrics-public"
	if host == "" {
		return fmt.Errorf("%q %s", addr, hint)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.IsUnspecified() {
			return fmt.Errorf("%q %s", addr, hint)
		}
		return nil
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return fmt.Errorf("%q: %w", addr, err)
	}
	for _, ip := range ips {
		if ip.IsUnspecified() {
			return fmt.Errorf("%q %s", addr, hint)
		}
	}
	return nil
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
