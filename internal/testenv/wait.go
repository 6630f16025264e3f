package testenv

import (
	"testing"
	"time"
)

// WaitFor polls cond until it holds, and fails the test naming what it
// waited for when 10 s pass first. For state the kernel or another
// goroutine changes without telling the test (netlink has no "settled"
// event, counters have no notification); poll, never sleep a guess.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	const within = 10 * time.Second
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(200 * time.Microsecond) // polling interval
	}
}
