package traffic

import (
	"context"
	"testing"
	"time"

	"github.com/wanlab/wanlab/units"
)

// TestPacerSchedule: write k goes out when the bytes before it took their
// time at the rate, from the first write; unpaced writes never wait.
func TestPacerSchedule(t *testing.T) {
	clock := time.Unix(0, 0)
	p := newPacer(8*units.Mbit, 0) // 1 MB/s: a 32 KiB chunk every 32.768 ms
	p.now = func() time.Time { return clock }
	if p.chunk() != uint64(DefaultWriteChunk) {
		t.Fatalf("chunk %d", p.chunk())
	}
	var dues []time.Duration
	for range 3 {
		start := p.start
		if err := p.wait(context.Background(), int(DefaultWriteChunk)); err != nil {
			t.Fatal(err)
		}
		if !start.IsZero() {
			dues = append(dues, p.rate.TxTime(p.sent-DefaultWriteChunk))
		}
		clock = clock.Add(p.rate.TxTime(DefaultWriteChunk)) // the timer fired on time
	}
	if want := []time.Duration{32768 * time.Microsecond, 65536 * time.Microsecond}; len(dues) != 2 || dues[0] != want[0] || dues[1] != want[1] {
		t.Errorf("writes due at %v, want %v", dues, want)
	}
	// Behind schedule (a late wake-up): the next write goes at once.
	clock = clock.Add(time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.wait(ctx, 10); err == nil {
		t.Error("a cancelled context while behind schedule: want its error")
	}
	free := newPacer(0, 0)
	if free.chunk() != 0 || free.wait(ctx, 1<<20) != nil {
		t.Error("an unpaced writer waited or was limited")
	}
}

// TestPacerSkip: after a pause the schedule moves by the pause, so the
// writes after it keep their pace instead of bursting to make it up.
func TestPacerSkip(t *testing.T) {
	clock := time.Unix(0, 0)
	p := newPacer(8*units.Mbit, 1000) // 1 MB/s: 1000 bytes a millisecond
	p.now = func() time.Time { return clock }
	p.skip(time.Second) // before the first write: nothing to move
	if !p.start.IsZero() {
		t.Fatalf("skip before the first write moved the start to %v", p.start)
	}
	ctx := context.Background()
	if err := p.wait(ctx, 1000); err != nil { // at 0, due at 0
		t.Fatal(err)
	}
	clock = clock.Add(time.Millisecond + 100*time.Millisecond) // a 100 ms pause after it
	p.skip(100 * time.Millisecond)
	if due := p.start.Add(p.rate.TxTime(p.sent)); !due.Equal(clock) {
		t.Errorf("the next write due at %v, want %v: the pause is not made up", due.Sub(time.Unix(0, 0)), clock.Sub(time.Unix(0, 0)))
	}
}
