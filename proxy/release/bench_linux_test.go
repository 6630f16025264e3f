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
// µs, the process CPU used (% of one core), the 1-minute load average
// and allocations (0: the loop allocates nothing). Run it for seconds,
// not packets: a SCHED_FIFO loop that spins without a break is stopped by
// the kernel's fair server for up to 50 ms about once a second, which a
// 0.5 s run at 100k packets/s does not show.
//
//	go test -run '^$' -bench ReleaseError -benchtime 5s ./proxy/release/
//
// Figures (2 vCPUs, Linux 6.18 PREEMPT_NONE, other helpers' test suites
// and benchmarks running; load = 1-minute load average; 5 s per case):
//
//	                      before (e6d1644)         now (3-6 runs)
//	                      load 3.0                 load 2.3-4.5
//	10k pps               p50 0.23  p99 38770 µs   p50 0.17-0.18  p99 294-1722 µs
//	100k pps              p50 0.12  p99 36228 µs   p50 0.11-0.12  p99 83-44985 µs
//	10k pps, realtime     p50 0.18  p99 25330 µs   p50 0.17       p99 58-78 µs
//	100k pps, realtime    p50 0.10  p99 30628 µs   p50 0.10-0.11  p99 61-66 µs (5 of 6
//	                                               runs; 423 µs in one, with a 55 ms stall)
//	idle (IdleCPU)        -                        0.05-0.07 % (nothing queued),
//	                                               0.06-0.12 % (packet 1 s ahead)
//
// Realtime meets the target (p50 <= 20 µs, p99 <= 100 µs) at both rates;
// without it no spin or sleep strategy can: the loop's thread shares the
// CPUs with everything else and waits out other tasks' time slices
// (milliseconds; it spins, so it uses more than its fair share and is
// not eligible to preempt them). Where the realtime tail came from, and
// what removed it (measured with runtime/trace and perf sched):
//   - 0.5-16 ms: waking from a runtime-aware poll(2), the thread found its
//     P taken, or its goroutine's scan bit held, by sysmon, a time-shared
//     thread that the busy machine did not run; the realtime thread
//     busy-waited for it. Now the wait is a raw ppoll the runtime never
//     sees, and each loop adds a P for the one its thread keeps.
//   - 0.25-1 ms every ~10 ms: sysmon preempts a goroutine that never
//     blocks; a locked goroutine then needs another thread to hand its P
//     back (on an idle vCPU that thread takes ~250 µs to wake). Now the
//     loop yields by itself, briefly unlocked, every 4-8 ms, and its own
//     thread picks it up again at once.
//   - 20-55 ms about once a second at 100k pps: the loop spun 97 % of a
//     CPU and the kernel's fair server stopped it to run starved
//     time-shared tasks. Now the spin is budgeted at 80 % of every 10 ms;
//     past that, packets leave 20 µs plus wake-up latency after their
//     time. Once in about six 5 s runs a 20-55 ms stall still showed up.
//   - Remaining (max 1-10 ms): the kernel. It is PREEMPT_NONE, so a
//     time-shared task inside a system call keeps the CPU until it
//     returns even when the realtime thread is due; booting with
//     preempt=full would remove that. Pinning the loop to either CPU
//     (sched_setaffinity) measured no better and is not done; a short
//     EEVDF slice for the time-shared case neither.
//
// A larger spin window does not help: with WANLAB_RELEASE_EARLY=120us the
// loop spins continuously at 10k pps; without the spin budget that
// brought the fair-server stalls back (p99 29-49 ms), with it the budget
// takes over (p99 80 µs against 64 µs with the default 50 µs, load 2.8).
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
