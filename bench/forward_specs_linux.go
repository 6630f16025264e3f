package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/wanlab/wanlab/proxy/control"
	"github.com/wanlab/wanlab/tc/spec"
)

// Forwarding with a spec set. Users forward to impair, so the bench sends
// its TCP bulk through every spec of Config.ForwardSpecs as well, on the
// proxy with its default queues, and sets each beside what the kernel
// does: kernel routing measured in the same run for a spec the kernel
// cannot shape, the kernel's own qdiscs on the router's egress for the
// shaping part of a spec (its tbf: this kernel has no netem, so "delay
// 1ms | tbf ..." is compared with the kernel's tbf alone).
//
// The spec impairs the data direction (client to server) only; the ACKs
// come back through the other direction's empty spec.

// specStreams are the TCP bulk workloads run through each spec.
var specStreams = []int{1, 4}

// specTarget is the target for a spec's ratio, by spec text and
// streams; "" when there is none. The reference is kernel routing unless
// the spec shapes (kernelForm), then the kernel's shaping alone.
func specTarget(text string, streams int) (ratio float64, target string) {
	switch text {
	case "", "delay 1ms", "loss 0.1%":
		if streams == 1 {
			return 0.6, "≥ 0.6 × kernel"
		}
		return 0.5, "≥ 0.5 × kernel"
	case "tbf rate 5gbit burst 1mb limit 10mb":
		return 0.97, "≥ 0.97 × kernel tbf"
	case "delay 1ms | tbf rate 5gbit burst 1mb limit 10mb":
		return 0.95, "≥ 0.95 × kernel tbf"
	}
	return 0, ""
}

// kernelForm is the part of s the kernel's qdiscs run here: its stages
// other than netem ("" for none: s is compared with kernel routing).
func kernelForm(s *spec.Spec) string {
	k := &spec.Spec{}
	for _, st := range s.Stages {
		if st.Kind() != "netem" {
			k.Stages = append(k.Stages, st)
		}
	}
	return k.String()
}

// specSet is the spec set of a forwarding bench: the specs' texts and
// each one's kernel form.
type specSet struct {
	texts, kernelOf []string
}

func newSpecSet(cfg Config) (specSet, error) {
	texts := cfg.ForwardSpecs
	if texts == nil {
		texts = DefaultForwardSpecs
	}
	set := specSet{texts: texts, kernelOf: make([]string, len(texts))}
	for i, t := range texts {
		s, err := spec.Parse(t)
		if err != nil {
			return specSet{}, fmt.Errorf("spec %q: %w", t, err)
		}
		set.kernelOf[i] = kernelForm(s)
	}
	return set, nil
}

// steps is the number of bulk transfers a round of the set runs.
func (set specSet) steps() int {
	n := len(set.texts)
	for _, k := range set.kernelOf {
		if k != "" {
			n++
		}
	}
	return n * len(specStreams)
}

// forwardSpecs runs the spec set: rounds of every spec on the proxy (path
// proxy-offload) and of every spec's kernel form on the kernel path,
// calling progress before each transfer. routing holds kernel routing's
// mean throughput by streams, measured in the same run. It returns the
// throughput table and the proxy's CPU per Gbit/s rows for the usage
// table.
func forwardSpecs(ctx context.Context, e *env, set specSet, quick bool, rounds int, routing map[int]float64, progress func(string)) (Table, []Measurement, error) {
	texts, kernelOf := set.texts, set.kernelOf
	dur := 5 * time.Second
	if quick {
		dur = time.Second
	}
	type key struct {
		spec    int
		streams int
		path    string
	}
	gbps := map[key][]float64{}
	cpuPerGbit := map[key][]float64{}
	queueDrops := map[key][]float64{}
	na := map[int]string{}
	for round := range rounds {
		for _, pname := range []string{PathProxyOffload, PathKernel} {
			p, err := e.openPath(ctx, pname)
			if err != nil {
				return Table{}, nil, err
			}
			for i, t := range texts {
				set := t
				if pname == PathKernel {
					if set = kernelOf[i]; set == "" {
						continue
					}
				}
				if err := p.Set(set, ""); err != nil {
					if r := naReason(err); r != "" {
						na[i] = r
						continue
					}
					p.Close()
					return Table{}, nil, fmt.Errorf("%s: spec %q: %w", pname, set, err)
				}
				for _, n := range specStreams {
					progress(fmt.Sprintf("round %d/%d %s: %q, tcp %d stream(s)", round+1, rounds, pname, set, n))
					st0, serr := proxyStats(p)
					c0, _, _, uerr := p.Usage()
					w0 := time.Now()
					r, err := tcpBulk(ctx, e.lab, false, n, dur, "")
					c1, _, _, uerr1 := p.Usage()
					st1, serr1 := proxyStats(p)
					if err == nil {
						err = errors.Join(uerr, uerr1, serr, serr1)
					}
					if err != nil {
						p.Close()
						return Table{}, nil, fmt.Errorf("%s: spec %q: tcp %d stream(s): %w", pname, set, n, err)
					}
					k := key{i, n, pname}
					g := r.Average / 1e9
					gbps[k] = append(gbps[k], g)
					if pname != PathKernel && g > 0 {
						share := 100 * float64(c1-c0) / float64(time.Since(w0))
						cpuPerGbit[k] = append(cpuPerGbit[k], share/g)
					}
					if st0 != nil && st1 != nil {
						queueDrops[k] = append(queueDrops[k], float64(queueDropped(*st1)-queueDropped(*st0)))
					}
				}
			}
			if err := p.Close(); err != nil {
				return Table{}, nil, err
			}
		}
	}
	tb := Table{Name: "forward_specs", Title: "TCP through a spec on the data direction (client → router → server)",
		Model: "kernel routing measured in the same run, or the kernel's own qdiscs for the spec's shaping part (ratio = proxy / kernel)"}
	var use []Measurement
	for i, t := range texts {
		name := t
		if name == "" {
			name = "empty spec"
		}
		for _, n := range specStreams {
			label := fmt.Sprintf("%s, tcp %d stream", name, n)
			if n > 1 {
				label += "s"
			}
			ref, refName := routing[n], "kernel routing"
			if kernelOf[i] != "" {
				k := gbps[key{i, n, PathKernel}]
				if len(k) == 0 {
					tb.Rows = append(tb.Rows, Measurement{Label: label, Path: PathKernel, Metric: "throughput", Unit: "Gbit/s", NA: na[i]})
				} else {
					km := realizedOnly(label, PathKernel, "throughput", "Gbit/s", mean(k))
					km.Note = "the kernel's " + kernelOf[i]
					tb.Rows = append(tb.Rows, withSpread(km, k))
					ref, refName = mean(k), "the kernel's "+kernelOf[i]
				}
			}
			vs := gbps[key{i, n, PathProxyOffload}]
			m := measured(label, PathProxyOffload, "throughput", "Gbit/s", ref, mean(vs))
			m.Note = "configured: " + refName
			if q := queueDrops[key{i, n, PathProxyOffload}]; len(q) > 0 {
				// A queue limit the bursts overflow throttles TCP as loss
				// does (netem's default of 1000 packets is 1 ms at 12
				// Gbit/s): the figure is the spec's, not the forwarding's.
				m.Note += fmt.Sprintf("; engine queue drops %.0f a transfer", mean(q))
			}
			if r, target := specTarget(t, n); target != "" && ref > 0 {
				m = m.withTarget(target, m.Realized >= r*ref)
			}
			tb.Rows = append(tb.Rows, withSpread(m, vs))
			if c := cpuPerGbit[key{i, n, PathProxyOffload}]; len(c) > 0 {
				u := realizedOnly(label, PathProxyOffload, "cpu per Gbit/s", "% of a core", mean(c))
				u.Note = "proxy process"
				use = append(use, withSpread(u, c))
			}
		}
	}
	return tb, use, nil
}

// queueDropped is the packets the proxy's engines dropped for a full
// queue, both directions.
func queueDropped(st control.Stats) uint64 {
	var n uint64
	for _, d := range st.Directions {
		n += d.Engine.Totals.Drops.Queue
	}
	return n
}

// withSpread adds the min..max interval of repeated rounds to m.
func withSpread(m Measurement, vs []float64) Measurement {
	if len(vs) > 1 {
		return m.withInterval(slices.Min(vs), slices.Max(vs))
	}
	return m
}
