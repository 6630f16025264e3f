package bench

import "testing"

// TestProcessUsage: this process has a resident set, and reading it does
// not fail.
func TestProcessUsage(t *testing.T) {
	cpu, rss, err := processUsage("self")
	if err != nil || cpu < 0 || rss == 0 {
		t.Fatalf("cpu %s, rss %d, %v", cpu, rss, err)
	}
}
