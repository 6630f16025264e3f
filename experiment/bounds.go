package experiment

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/wanlab/wanlab/tc/spec"
	"github.com/wanlab/wanlab/units"
)

// The lab's range: what a lab is built for, typed (--impair, --delay,
// --concurrency) or fitted (--like). A value outside it is refused before
// anything is built (ErrOutOfRange): a fit of a crafted capture once built
// `delay 500000000ms` and `tbf rate 61200bit`, which ran until the
// kernel's SYN timeout. docs/security.md lists them.
const (
	// MaxOneWayDelay is the longest delay of a direction (netem's delay
	// plus its jitter, or a slot's longest wait): a geostationary hop is
	// 0.27 s, the longest paths on Earth with queues a few seconds.
	MaxOneWayDelay = 10 * time.Second
	// MinRate is the slowest rate a stage may pace at (netem's, tbf's,
	// a class's): below 8 kbit/s one 1500-byte packet takes 1.5 s, and
	// a transfer of the lab's smallest size minutes.
	MinRate units.Rate = 8_000
	// MaxBuffer is the most one stage may hold, in bytes of full-sized
	// packets (LabPacketSize each): the queue's memory on the host that
	// runs the lab, the kernel's or the proxy's.
	MaxBuffer units.Size = 1 << 30
	// LabPacketSize is the packet a packet limit is counted in.
	LabPacketSize units.Size = 1514
	// MaxConcurrency is the most connections a request/response load
	// opens at once: --concurrency above it is refused, a fit's
	// (the capture's other connections to the server) capped with a
	// warning.
	MaxConcurrency = 1000
)

// ErrOutOfRange is matched (errors.Is) by the error for a value outside
// the lab's range.
var ErrOutOfRange = errors.New("outside the lab's range")

// CheckRange refuses a configuration whose specs or load are outside the
// lab's range, naming the direction, the stage and the value.
func (c Config) CheckRange() error {
	specs, err := c.Specs()
	if err != nil {
		return err
	}
	dirs := make([]string, 0, len(specs))
	for dir := range specs {
		dirs = append(dirs, dir)
	}
	slices.Sort(dirs)
	for _, dir := range dirs {
		for _, st := range specs[dir].Stages {
			if err := stageInRange(st); err != nil {
				return fmt.Errorf("%s: %s: %w", dir, st.Kind(), err)
			}
		}
	}
	if c.Concurrency > MaxConcurrency {
		return fmt.Errorf("concurrency %d: more than %d connections at once: %w", c.Concurrency, MaxConcurrency, ErrOutOfRange)
	}
	return nil
}

// stageInRange checks one stage's delay, rate and buffer.
func stageInRange(st spec.Stage) error {
	switch s := st.(type) {
	case *spec.Netem:
		if d := s.Latency + s.Jitter; d > MaxOneWayDelay {
			return fmt.Errorf("delay %v: over %v one way: %w", d, MaxOneWayDelay, ErrOutOfRange)
		}
		if s.Slot != nil {
			if d := max(s.Slot.MaxDelay, s.Slot.Delay+s.Slot.Jitter); d > MaxOneWayDelay {
				return fmt.Errorf("slot %v: over %v one way: %w", d, MaxOneWayDelay, ErrOutOfRange)
			}
		}
		if s.Rate != 0 && s.Rate < MinRate {
			return fmt.Errorf("rate %s: under %s: %w", s.Rate.Human(), MinRate.Human(), ErrOutOfRange)
		}
	case *spec.TBF:
		if s.Rate < MinRate {
			return fmt.Errorf("rate %s: under %s: %w", s.Rate.Human(), MinRate.Human(), ErrOutOfRange)
		}
	}
	if l, ok := st.(spec.Limited); ok {
		if b := spec.LimitBytes(l, LabPacketSize); b > MaxBuffer {
			return fmt.Errorf("limit of %s: over the %s a stage may hold: %w", b.Human(), MaxBuffer.Human(), ErrOutOfRange)
		}
	}
	return nil
}

// capConcurrency caps a fitted load's connections (the capture's other
// connections to the server) at MaxConcurrency, and says so ("" when it
// was within).
func capConcurrency(cfg *Config) string {
	if cfg.Concurrency <= MaxConcurrency {
		return ""
	}
	w := fmt.Sprintf("the capture's %d connections to the server are reproduced by %d at once (the lab's most, MaxConcurrency)", cfg.Concurrency, MaxConcurrency)
	cfg.Concurrency = MaxConcurrency
	return w
}
