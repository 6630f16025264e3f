package predict

import (
	"math"
	"testing"
	"time"

	"github.com/wanlab/wanlab/units"
)

func TestModel(t *testing.T) {
	rtt := 35 * time.Millisecond
	// Seed 001: a 1.5 MiB window at 35 ms.
	if got := WindowRate(3<<19, rtt); math.Abs(float64(got)-359.5e6) > 1e6 {
		t.Errorf("WindowRate = %v", got)
	}
	if w := WindowFor(WindowRate(1<<20, rtt), rtt); w != 1<<20 {
		t.Errorf("WindowFor(WindowRate(1 MiB)) = %d", w)
	}
	// 1 % loss at 20 ms with a 1448-byte MSS: about 7.1 Mbit/s.
	if got := Mathis(1448, 20*time.Millisecond, 0.01); math.Abs(float64(got)-7.093e6) > 1e4 {
		t.Errorf("Mathis = %v", got)
	}
	if Mathis(1448, 20*time.Millisecond, 0) != 0 || WindowRate(1, 0) != 0 {
		t.Error("no loss or no RTT must predict nothing")
	}
	if BufferFor(1<<20, 0) != 2<<20 || BufferFor(units.Size(750), 0.75) != 1000 {
		t.Error("BufferFor")
	}
}
