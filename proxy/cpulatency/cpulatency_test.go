package cpulatency

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// requests opens a Request on a plain file, which records every value
// written in order.
func requests(t *testing.T) (*Request, func() []int32) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cpu_dma_latency")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, func() []int32 {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(b)%4 != 0 {
			t.Fatalf("%d bytes written, not whole 32-bit values", len(b))
		}
		var v []int32
		for i := 0; i < len(b); i += 4 {
			v = append(v, int32(binary.NativeEndian.Uint32(b[i:])))
		}
		return v
	}
}

func TestRequestWritesBinaryValuesOnlyOnChange(t *testing.T) {
	r, written := requests(t)
	if r.Low() {
		t.Error("a new request already asks for 0 µs")
	}
	for _, us := range []int32{0, 0, 20, noConstraint} {
		if err := r.Set(us); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := written(), []int32{noConstraint, 0, 20, noConstraint}; !slices.Equal(got, want) {
		t.Errorf("wrote %v, want %v", got, want)
	}
}

func TestOpenMissingDeviceNamesIt(t *testing.T) {
	_, err := Open("/nonexistent/cpu_dma_latency")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/cpu_dma_latency") {
		t.Fatalf("Open of a missing device: %v", err)
	}
}

func TestAdaptiveArmsOnTrafficAndReleasesAfterHold(t *testing.T) {
	r, written := requests(t)
	var clock int64
	hold := 100 * time.Millisecond
	// A long watch period: the test drives expire itself.
	a := &Adaptive{req: r, hold: int64(hold), now: func() int64 { return clock }, stop: make(chan struct{}), done: make(chan struct{})}
	go a.watch(time.Hour)
	defer a.Close()

	a.expire(clock)
	if a.Armed() || r.Low() {
		t.Fatal("armed before any traffic")
	}
	a.Touch(clock)
	if !a.Armed() || !r.Low() {
		t.Fatal("first packet did not arm the request")
	}
	for range 5 { // steady traffic: one write only
		clock += int64(hold / 2)
		a.Touch(clock)
		a.expire(clock)
	}
	if !r.Low() {
		t.Fatal("released while packets flowed")
	}
	clock += int64(hold) - 1
	a.expire(clock)
	if !r.Low() {
		t.Fatal("released before the hold time passed")
	}
	clock++
	a.expire(clock)
	if a.Armed() || r.Low() {
		t.Fatal("still armed after the hold time without traffic")
	}
	a.Touch(clock)
	if got, want := written(), []int32{noConstraint, 0, noConstraint, 0}; !slices.Equal(got, want) {
		t.Errorf("wrote %v, want %v", got, want)
	}
	if a.Errors() != 0 {
		t.Errorf("%d write errors", a.Errors())
	}
}

func TestAdaptiveWatcherReleases(t *testing.T) {
	r, _ := requests(t)
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	a := NewAdaptive(r, 5*time.Millisecond, now)
	defer a.Close()
	a.Touch(now())
	deadline := time.Now().Add(5 * time.Second)
	for a.Armed() {
		if time.Now().After(deadline) {
			t.Fatal("the watcher never released an idle request")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestParseMode(t *testing.T) {
	for _, s := range []string{"off", "auto", "on"} {
		if m, err := ParseMode(s); err != nil || string(m) != s {
			t.Errorf("ParseMode(%q) = %q, %v", s, m, err)
		}
	}
	if _, err := ParseMode("fast"); err == nil || !strings.Contains(err.Error(), `"fast"`) {
		t.Errorf("ParseMode(fast): %v, want an error naming it", err)
	}
}

// A request whose writes fail is given up after the first failure, so
// the per-packet Touch stays one atomic load.
func TestAdaptiveGivesUpAfterAFailedWrite(t *testing.T) {
	r, _ := requests(t)
	r.f.Close() // every write fails from now on
	a := &Adaptive{req: r, hold: int64(time.Second), now: func() int64 { return 0 }, stop: make(chan struct{}), done: make(chan struct{})}
	go a.watch(time.Hour)
	defer func() { close(a.stop); <-a.done }()
	for range 3 {
		a.Touch(0)
	}
	if a.Armed() || a.Errors() != 1 {
		t.Errorf("armed %v after %d errors; want unarmed after exactly one failed write", a.Armed(), a.Errors())
	}
}
