package heapbound

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestLimit(t *testing.T) {
	for _, c := range []struct{ floor, live, want int64 }{
		{64 << 20, 0, 64 << 20},
		{64 << 20, 32 << 20, 64 << 20},
		{64 << 20, 48 << 20, 72 << 20},
		{64 << 20, 1 << 30, 1<<30 + 512<<20},
	} {
		if got := Limit(c.floor, c.live); got != c.want {
			t.Errorf("Limit(%d, %d) = %d, want %d", c.floor, c.live, got, c.want)
		}
	}
}

// TestStartRestores checks that Start sets the floor and stop puts the
// previous limit back, and that a limit the user set is left alone.
func TestStartRestores(t *testing.T) {
	gc := debug.SetGCPercent(-1)
	debug.SetGCPercent(gc)
	stop := Start(96 << 20)
	if got := debug.SetMemoryLimit(-1); got != 96<<20 {
		t.Errorf("limit %d while bounded, want %d", got, 96<<20)
	}
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("GOGC %d while bounded, want off (the limit paces the collector)", got)
	}
	stop()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("limit %d after stop, want none", got)
	}
	if got := debug.SetGCPercent(gc); got != gc {
		t.Errorf("GOGC %d after stop, want %d back", got, gc)
	}
	debug.SetMemoryLimit(1 << 40)
	defer debug.SetMemoryLimit(math.MaxInt64)
	stop = Start(96 << 20)
	if got := debug.SetMemoryLimit(-1); got != 1<<40 {
		t.Errorf("limit %d, want the user's %d left alone", got, int64(1<<40))
	}
	stop()
}
