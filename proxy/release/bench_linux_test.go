package release

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// scheduleQueue releases a precomputed constant-rate schedule and records
// how late each packet left.
type scheduleQueue struct {
	mu     sync.Mutex
	depart []int64
	next   int
	late   []int64
	done   chan struct{}
}

func (q *scheduleQueue) Release(now int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.next < len(q.depart) && q.depart[q.next] <= now {
		q.late = append(q.late, MonotonicNow()-q.depart[q.next])
		q.next++
	}
	if q.next == len(q.depart) && q.done != nil {
		close(q.done)
		q.done = nil
	}
}

func (q *scheduleQueue) NextDeparture() (int64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.next < len(q.depart) {
		return q.depart[q.next], true
	}
	return 0, false
}

func cpuTime() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReleaseError measures how late the loop sends packets of a
// constant-rate schedule (b.N packets). Reported: p50/p99/max lateness in
// µs and the process CPU used, as % of one core.
//
//	go test -run '^$' -bench ReleaseError -benchtime 50000x ./proxy/release/
func BenchmarkReleaseError(b *testing.B) {
	for _, c := range []struct {
		pps int
		rt  bool
	}{{10_000, false}, {100_000, false}, {10_000, true}, {100_000, true}} {
		pps := c.pps
		b.Run(fmt.Sprintf("pps=%d/realtime=%v", pps, c.rt), func(b *testing.B) {
			q := &scheduleQueue{done: make(chan struct{})}
			done := q.done
			start := MonotonicNow() + int64(5*time.Millisecond)
			gap := int64(time.Second) / int64(pps)
			q.depart = make([]int64, b.N)
			for i := range q.depart {
				q.depart[i] = start + int64(i)*gap
			}
			q.late = make([]int64, 0, b.N)
			l, err := Start(q, Config{Realtime: c.rt, Early: benchEarly})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			if l.Realtime() != c.rt {
				b.Skipf("SCHED_FIFO not available")
			}
			b.ReportAllocs()
			cpu0, wall0 := cpuTime(), time.Now()
			b.ResetTimer()
			l.Notify(start)
			<-done
			b.StopTimer()
			cpu, wall := cpuTime()-cpu0, time.Since(wall0)
			slices.Sort(q.late)
			pct := func(p float64) float64 {
				return float64(q.late[int(p*float64(len(q.late)-1))]) / 1e3
			}
			b.ReportMetric(pct(0.50), "p50-µs")
			b.ReportMetric(pct(0.99), "p99-µs")
			b.ReportMetric(float64(q.late[len(q.late)-1])/1e3, "max-µs")
			b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "cpu-%")
			b.ReportMetric(loadAverage(), "load1")
		})
	}
}

// loadAverage is the machine's 1-minute load average, reported beside the
// figures because they depend on it (other processes competing for the
// CPUs).
func loadAverage() float64 {
	var info unix.Sysinfo_t
	if unix.Sysinfo(&info) != nil {
		return 0
	}
	return float64(info.Loads[0]) / (1 << unix.SI_LOAD_SHIFT)
}

// BenchmarkIdleCPU measures the CPU an idle loop costs (nothing queued)
// and one waiting for a packet 1 s ahead, as % of one core.
//
//	go test -run '^$' -bench IdleCPU -benchtime 1x ./proxy/release/
func BenchmarkIdleCPU(b *testing.B) {
	for _, far := range []bool{false, true} {
		b.Run(fmt.Sprintf("queued=%v", far), func(b *testing.B) {
			q := &scheduleQueue{}
			if far {
				q.depart = []int64{MonotonicNow() + int64(time.Second)}
			}
			l, err := Start(q, Config{})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			cpu0, wall0 := cpuTime(), time.Now()
			for range b.N {
				time.Sleep(500 * time.Millisecond)
			}
			b.ReportMetric(100*(cpuTime()-cpu0).Seconds()/time.Since(wall0).Seconds(), "cpu-%")
		})
	}
}

var benchEarly = func() time.Duration {
	d, _ := time.ParseDuration(os.Getenv("WANLAB_RELEASE_EARLY"))
	return d
}()
