// Package cpulatency keeps idle CPUs quick to wake while a forwarder is
// busy, through the kernel's CPU latency QoS interface
// (/dev/cpu_dma_latency, Documentation/power/pm_qos_interface.rst).
//
// A userspace forwarder sleeps between packets, and each packet wakes a
// thread. On bare metal that costs a few µs; on a virtual machine whose
// idle vCPUs halt (cpuidle "haltpoll" with guest_halt_poll_ns 0, as on
// Firecracker) waking a halted vCPU costs 50-150 µs, several times per
// round trip. A latency request of 0 µs makes idle CPUs poll instead of
// halting, so wake-ups take µs again, at the price of idle CPUs spinning.
//
// Adaptive holds that request only while packets flow: the first packet
// after a quiet period arms it, and it is dropped once no packet has been
// seen for the hold time. The kernel drops the request when the file is
// closed, including when the process dies, so nothing outlives the
// forwarder and there is nothing to clean up after a crash.
package cpulatency

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DevicePath is the CPU latency QoS device.
const DevicePath = "/dev/cpu_dma_latency"

// noConstraint is PM_QOS_CPU_LATENCY_DEFAULT_VALUE (2000 s in µs): a
// request that constrains nothing.
const noConstraint = 2000 * 1000 * 1000

// Mode says when a forwarder holds the low-latency request.
type Mode string

// Modes.
const (
	Off  Mode = "off"  // never
	Auto Mode = "auto" // while packets flow (Adaptive)
	On   Mode = "on"   // for as long as the forwarder runs
)

// ParseMode parses off, auto or on.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Off, Auto, On:
		return m, nil
	}
	return "", fmt.Errorf("low-latency mode %q: want off, auto or on", s)
}

// Request is an open latency request. The zero value is not usable; Open
// makes one that constrains nothing until Set.
type Request struct {
	mu  sync.Mutex
	f   *os.File
	cur int32
}

// Open opens path (DevicePath outside tests) with no constraint.
func Open(path string) (*Request, error) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("cpu latency request: %w", err)
	}
	r := &Request{f: f, cur: -1}
	if err := r.Set(noConstraint); err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

// Set replaces the request with a wake-up latency of at most us µs
// (0: never enter a state slower to leave than polling).
func (r *Request) Set(us int32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if us == r.cur {
		return nil
	}
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], uint32(us))
	if _, err := r.f.Write(b[:]); err != nil {
		return fmt.Errorf("cpu latency request %d µs: %w", us, err)
	}
	r.cur = us
	return nil
}

// Low reports whether the request currently asks for 0 µs.
func (r *Request) Low() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur == 0
}

// Close withdraws the request.
func (r *Request) Close() error { return r.f.Close() }

// Adaptive holds a Request at 0 µs while Touch is called at least once
// per hold time, and releases it after hold of silence. Touch is cheap
// enough for every batch of packets: one atomic load when already armed.
type Adaptive struct {
	req  *Request
	hold int64
	now  func() int64

	mu    sync.Mutex   // serialises arming and releasing
	last  atomic.Int64 // monotonic ns of the last Touch
	armed atomic.Bool
	errs  atomic.Uint64
	// failed is set once arming fails: the hot path then stops trying
	// (a device that refuses one write refuses the next).
	failed atomic.Bool

	stop chan struct{}
	done chan struct{}
}

// NewAdaptive starts watching req: now is a monotonic clock in ns, hold
// the quiet time after which the request is released. Close stops it and
// closes req.
func NewAdaptive(req *Request, hold time.Duration, now func() int64) *Adaptive {
	a := &Adaptive{req: req, hold: int64(hold), now: now, stop: make(chan struct{}), done: make(chan struct{})}
	go a.watch(max(hold/4, time.Millisecond))
	return a
}

// Touch records traffic at time t (ns on the Adaptive's clock) and arms
// the request if it was released.
func (a *Adaptive) Touch(t int64) {
	a.last.Store(t)
	if a.armed.Load() || a.failed.Load() {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.armed.Load() {
		if err := a.req.Set(0); err != nil {
			a.errs.Add(1)
			a.failed.Store(true)
			return
		}
		a.armed.Store(true)
	}
}

// Armed reports whether the request is held at 0 µs.
func (a *Adaptive) Armed() bool { return a.armed.Load() }

// Errors counts failed writes to the request.
func (a *Adaptive) Errors() uint64 { return a.errs.Load() }

func (a *Adaptive) watch(every time.Duration) {
	defer close(a.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
			a.expire(a.now())
		}
	}
}

// expire releases the request if the last touch is older than hold. A
// Touch racing with it at worst re-arms on the next batch.
func (a *Adaptive) expire(now int64) {
	if !a.armed.Load() || now-a.last.Load() < a.hold {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.armed.Load() || now-a.last.Load() < a.hold {
		return
	}
	if err := a.req.Set(noConstraint); err != nil {
		a.errs.Add(1)
		return
	}
	a.armed.Store(false)
}

// Close stops watching and withdraws the request.
func (a *Adaptive) Close() error {
	close(a.stop)
	<-a.done
	return a.req.Close()
}
