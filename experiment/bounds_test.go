package experiment

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/fit"
)

// TestCheckRange: values outside the lab's range are refused with the
// direction, the stage and the value named; values at its edges are
// taken.
func TestCheckRange(t *testing.T) {
	for _, c := range []struct {
		impair      string
		concurrency int
		want        string // "" : in range
	}{
		{"delay 10s", 0, ""},
		{"delay 9s 1s", 0, ""},
		{"delay 500000000ms", 0, "to-client: netem: delay 138h53m20s: over 10s one way"},
		{"delay 9s 2s", 0, "delay 11s: over 10s"},
		{"tbf rate 8kbit burst 3kb limit 10kb", 0, ""},
		{"tbf rate 7kbit burst 3kb limit 10kb", 0, "to-client: tbf: rate 7Kbit/s: under 8Kbit/s"},
		{"delay 10ms rate 1kbit", 0, "netem: rate 1Kbit/s: under 8Kbit/s"},
		{"tbf rate 10mbit burst 32kb limit 1gb", 0, ""},
		{"tbf rate 10mbit burst 32kb limit 2gb", 0, "tbf: limit of 2 GiB: over the 1 GiB"},
		{"delay 10ms limit 2000000", 0, "netem: limit of 2.82 GiB: over the 1 GiB"},
		{"", MaxConcurrency, ""},
		{"", MaxConcurrency + 1, "concurrency 1001: more than 1000 connections at once"},
	} {
		cfg := Config{Impair: map[string]string{ToClient: c.impair}, Concurrency: c.concurrency}
		err := cfg.CheckRange()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q, concurrency %d: %v", c.impair, c.concurrency, err)
		case c.want != "" && (!errors.Is(err, ErrOutOfRange) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q, concurrency %d: %v, want ErrOutOfRange naming %q", c.impair, c.concurrency, err, c.want)
		}
	}
}

// TestLikeDeadline: the deadline grows with the original's duration and
// the runs, and its error says where it came from and the flag.
func TestLikeDeadline(t *testing.T) {
	f := &fit.Result{Connection: fit.ConnInfo{DurationMs: 3000}}
	if got, want := LikeDeadline(f, 1), 2*(time.Minute+30*time.Second); got != want {
		t.Errorf("one run of a 3 s original: %v, want %v", got, want)
	}
	if LikeDeadline(f, 3) <= LikeDeadline(f, 1) {
		t.Error("more runs, no more time")
	}
	e := likeDeadlineError{deadline: time.Minute, original: 3 * time.Second}
	if !errors.Is(e, ErrLikeDeadline) || !strings.Contains(e.Error(), "--deadline raises it") || !strings.Contains(e.Error(), "3s") {
		t.Errorf("deadline error %q", e.Error())
	}
}

// TestFittedConcurrencyCapped: a fitted load of 12,001 connections (a
// capture's other connections to the server) runs at MaxConcurrency with
// a warning naming both, and then passes the range check; one within is
// left alone.
func TestFittedConcurrencyCapped(t *testing.T) {
	cfg := Config{Requests: 12001, Concurrency: 12001}
	w := capConcurrency(&cfg)
	if cfg.Concurrency != MaxConcurrency || !strings.Contains(w, "12001") || !strings.Contains(w, "1000") {
		t.Errorf("capped to %d: %q", cfg.Concurrency, w)
	}
	if err := cfg.CheckRange(); err != nil {
		t.Errorf("after the cap: %v", err)
	}
	small := Config{Requests: 10, Concurrency: 10}
	if w := capConcurrency(&small); w != "" || small.Concurrency != 10 {
		t.Errorf("10 connections: %d, %q", small.Concurrency, w)
	}
}
