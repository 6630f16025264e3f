package spec

import (
	"strings"
	"testing"

	"github.com/wanlab/wanlab/units"
)

// TestMinTBFBurst: one full frame below about 189 Gbit/s, where a 64 ns
// tick's tokens pass 1514 bytes; the suggestion parses and validates.
func TestMinTBFBurst(t *testing.T) {
	for _, c := range []struct {
		rate units.Rate
		want units.Size
	}{
		{10_000_000, 1514},
		{1_000_000_000, 1514},
		{400_000_000_000, 3200}, // 50 GB/s x 64 ns
	} {
		if got := MinTBFBurst(c.rate); got != c.want {
			t.Errorf("MinTBFBurst(%s) = %d, want %d", c.rate, got, c.want)
		}
	}
	_, err := Parse("tbf rate 10mbit limit 100kb")
	if err == nil || !strings.Contains(err.Error(), "the smallest that works is 1514b, one 1514-byte frame (and at least rate x the kernel's 64ns scheduler tick): 'tbf rate 10mbit burst 1514b limit 100kb'") {
		t.Fatalf("missing burst: %v", err)
	}
	if _, err := Parse("tbf rate 10mbit burst 1514b limit 100kb"); err != nil {
		t.Fatalf("the suggested burst: %v", err)
	}
}
