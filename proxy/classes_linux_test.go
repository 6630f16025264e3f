package proxy

import (
	"errors"
	"syscall"

	"fmt"
	"golang.org/x/sys/unix"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// seed004Tree is seed 004's htb tree (100 Mbit/s parent; 20, 50, 20
// children) with one destination per class, on the proxy's egress to
// the server. ceil is the children's ceil.
func seed004Tree(ceil string) string {
	c := func(id, rate string) string {
		s := "class 1:" + id + " parent 1:1 htb rate " + rate
		if ceil != "" {
			s += " ceil " + ceil
		}
		return s
	}
	return strings.Join([]string{
		"tc qdisc add dev rb root handle 1: htb default 2",
		"tc class add dev rb parent 1: classid 1:1 htb rate 100mbit ceil 100mbit",
		c("2", "20mbit"), c("3", "50mbit"), c("4", "20mbit"),
		"filter dst 10.93.2.2 flowid 1:2",
		"filter dst 10.93.2.3 flowid 1:3",
		"filter dst 10.93.2.4 flowid 1:4",
	}, "\n")
}

// bulkFlows runs one TCP transfer from the client to each destination
// until stop is closed; received counts what each receiver read.
type bulkFlows struct {
	stop     chan struct{}
	wg       sync.WaitGroup
	received []atomic.Int64
}

func startBulk(t *testing.T, tp *topo, dsts []string) *bulkFlows {
	t.Helper()
	b := &bulkFlows{stop: make(chan struct{}), received: make([]atomic.Int64, len(dsts))}
	for i, dst := range dsts {
		var ln net.Listener
		tp.server.in(t, func() (err error) {
			ln, err = net.Listen("tcp", net.JoinHostPort(dst, "0"))
			return err
		})
		t.Cleanup(func() { ln.Close() })
		b.wg.Add(2)
		go func() {
			defer b.wg.Done()
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			buf := make([]byte, 256<<10)
			for {
				n, err := c.Read(buf)
				b.received[i].Add(int64(n))
				if err != nil {
					return
				}
			}
		}()
		var conn net.Conn
		tp.client.in(t, func() (err error) {
			// Loss-based congestion control keeps each leaf queue
			// backlogged, as the seed's iperf flows of its time did
			// (bbr, the default here, paces at the rate it measures).
			d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
				var serr error
				err := rc.Control(func(fd uintptr) {
					serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, "cubic")
				})
				return errors.Join(err, serr)
			}}
			conn, err = d.Dial("tcp", ln.Addr().String())
			return err
		})
		go func() {
			defer b.wg.Done()
			defer conn.Close()
			buf := make([]byte, 128<<10)
			for {
				select {
				case <-b.stop:
					return
				default:
				}
				conn.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
				if _, err := conn.Write(buf); err != nil && !isTimeout(err) {
					return
				}
			}
		}()
	}
	return b
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func (b *bulkFlows) close() {
	close(b.stop)
	b.wg.Wait()
}

// classRates measures, over window after warm, each class's IP rate out
// of the engine (bit/s), the IP rate the flows offered it (into the
// engine) and each receiver's goodput.
func classRates(t *testing.T, p *Proxy, b *bulkFlows, classes []string, warm, window time.Duration) (ip, offered, goodput []float64, borrowed map[string]uint64) {
	ip, offered, goodput, borrowed, _ = classRatesGap(t, p, b, classes, warm, window)
	return ip, offered, goodput, borrowed
}

// classRatesGap is classRates also returning the longest gap between the
// measuring goroutine's 10 ms wake-ups: how long the machine took the CPU
// from this process (the proxy and the flows run in it) during the window.
func classRatesGap(t *testing.T, p *Proxy, b *bulkFlows, classes []string, warm, window time.Duration) (ip, offered, goodput []float64, borrowed map[string]uint64, gap time.Duration) {
	t.Helper()
	type counts struct{ in, out uint64 }
	take := func() (map[string]counts, []int64, time.Time) {
		m := map[string]counts{}
		for _, c := range p.Stats().Directions[1].Engine.Classes {
			m[c.Name] = counts{c.Totals.BytesIn, c.Totals.BytesOut}
		}
		r := make([]int64, len(b.received))
		for i := range b.received {
			r[i] = b.received[i].Load()
		}
		return m, r, time.Now()
	}
	deadline := time.Now().Add(warm)
	for time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // pacing the measurement, not waiting for an event
	}
	m0, r0, t0 := take()
	last := t0
	for time.Since(t0) < window {
		time.Sleep(10 * time.Millisecond)
		now := time.Now()
		gap = max(gap, now.Sub(last))
		last = now
	}
	m1, r1, t1 := take()
	secs := t1.Sub(t0).Seconds()
	for i, c := range classes {
		ip = append(ip, float64(m1[c].out-m0[c].out)*8/secs)
		offered = append(offered, float64(m1[c].in-m0[c].in)*8/secs)
		goodput = append(goodput, float64(r1[i]-r0[i])*8/secs)
	}
	borrowed = map[string]uint64{}
	{
		for _, s := range p.Stats().Directions[1].Engine.Scheduler {
			borrowed[s.ID] = s.BorrowedBytes
		}
	}
	return ip, offered, goodput, borrowed, gap
}

// TestSeed004Tree runs seed 004's experiment through the proxy: three
// concurrent TCP transfers, one per destination, each class shaped to its
// rate within 5 %; then with ceil 100mbit and one class idle, the others
// borrow its share up to their ceil.
func TestSeed004Tree(t *testing.T) {
	tp := newTopo(t)
	tp.server.addr(t, "s0", "10.93.2.3/24")
	tp.server.addr(t, "s0", "10.93.2.4/24")
	p := startIn(t, tp, "", [2]string{"", seed004Tree("")})
	dsts := []string{"10.93.2.2", "10.93.2.3", "10.93.2.4"}
	classes := []string{"1:2", "1:3", "1:4"}
	limits := []float64{20e6, 50e6, 20e6}

	b := startBulk(t, tp, dsts)
	// htb holds a backlogged class at its rate over any window in which
	// the proxy ran; a window in which the machine stalled this process
	// (the proxy and the flows are in it) for longer than 200 ms says
	// nothing about htb (every class then comes out low alike, seen:
	// 0.70 of its rate after a 0.9 s stall), so it is measured again, up
	// to three windows.
	var ip, offered, good []float64
	for try := 1; ; try++ {
		var gap time.Duration
		ip, offered, good, _, gap = classRatesGap(t, p, b, classes, 2*time.Second, 3*time.Second)
		if gap < 200*time.Millisecond || try == 3 {
			break
		}
		t.Logf("window %d: the process was stalled for %v; measuring again", try, gap)
	}
	b.close()
	var lines []string
	for i, c := range classes {
		lines = append(lines, fmt.Sprintf("%s -> %s: IP %.2f Mbit/s (offered %.2f), goodput %.2f Mbit/s (class rate %.0f)", dsts[i], c, ip[i]/1e6, offered[i]/1e6, good[i]/1e6, limits[i]/1e6))
	}
	t.Logf("ceil = rate:\n%s", strings.Join(lines, "\n"))
	for i, c := range classes {
		if ip[i] < 0.95*limits[i] || ip[i] > 1.05*limits[i] {
			t.Errorf("class %s: %.2f Mbit/s of IP bytes (offered %.2f), want %.0f ±5%%", c, ip[i]/1e6, offered[i]/1e6, limits[i]/1e6)
		}
	}

	// Borrowing: children may reach 100mbit; 1:4 idle lends its 20.
	if err := p.SetSpec("rb", seed004Tree("100mbit")); err != nil {
		t.Fatal(err)
	}
	if got := p.Specs()["rb"]; !strings.Contains(got, "ceil 100mbit") {
		t.Fatalf("set did not replace the tree: %s", got)
	}
	b = startBulk(t, tp, dsts[:2])
	ip, offered, good, borrowed := classRates(t, p, b, classes[:2], 2*time.Second, 3*time.Second)
	b.close()
	t.Logf("ceil 100mbit, 1:4 idle: 1:2 IP %.2f (offered %.2f, goodput %.2f), 1:3 IP %.2f (offered %.2f, goodput %.2f) Mbit/s; borrowed bytes %v",
		ip[0]/1e6, offered[0]/1e6, good[0]/1e6, ip[1]/1e6, offered[1]/1e6, good[1]/1e6, borrowed)
	// The parent's 100 is what two backlogged classes get; flows that
	// offer less (their senders starved of CPU on a loaded machine, seen:
	// 94 Mbit/s) get what they offer, since borrowing holds nothing back
	// below the ceil. 5 %: the measurement's timing and the queues'
	// change over the window.
	sum, in := ip[0]+ip[1], offered[0]+offered[1]
	if want := min(100e6, in); sum < 0.95*want || sum > 105e6 {
		t.Errorf("1:2 + 1:3 = %.2f Mbit/s with 1:4 idle (offered %.2f), want the parent's 100 (or what was offered, if less) ±5%%", sum/1e6, in/1e6)
	}
	for i, c := range classes[:2] {
		if ip[i] < limits[i]*1.05 {
			t.Errorf("class %s: %.2f Mbit/s, want more than its rate %.0f (borrowing 1:4's share)", c, ip[i]/1e6, limits[i]/1e6)
		}
	}
	if borrowed["1:2"] == 0 || borrowed["1:3"] == 0 {
		t.Errorf("borrowed bytes %v, want 1:2 and 1:3 > 0", borrowed)
	}
}
