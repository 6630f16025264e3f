package traffic_test

import (
	"context"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wanlab/wanlab/lab"
	"github.com/wanlab/wanlab/lab/labtest"
	"github.com/wanlab/wanlab/lab/traffic"
)

// threads is this process's OS thread count (/proc/self/status).
func threads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// TestManyDialsPinFewThreads: a load of 3,000 connections whose dials
// hang (an address of the server's subnet that no host answers: ARP
// never resolves) holds a few OS threads, not one per dial (12,000 dials
// once aborted Go with "thread exhaustion"), and ends at its context's
// deadline.
func TestManyDialsPinFewThreads(t *testing.T) {
	l := labtest.Lab(t, context.Background(), lab.Config{})
	a := l.Server.IPv4.As4()
	a[3] += 100 // in the server's subnet, no host
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	before := threads(t)
	done := make(chan error, 1)
	go func() {
		_, err := traffic.RequestResponse(ctx, l.Client.Handle, traffic.RRConfig{
			Server: netip.AddrPortFrom(netip.AddrFrom4(a), 80), Requests: 3000, Concurrency: 3000})
		done <- err
	}()
	most := before
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			t.Logf("threads: %d before, at most %d while dialling; the load ended with %v", before, most, err)
			if err == nil {
				t.Error("dials to an address no host answers succeeded")
			}
			if most > before+64 {
				t.Errorf("%d OS threads while dialling, %d before: more than a small pool", most, before)
			}
			return
		case <-tick.C:
			most = max(most, threads(t))
		case <-time.After(30 * time.Second):
			t.Fatal("the load did not end at its deadline")
		}
	}
}
