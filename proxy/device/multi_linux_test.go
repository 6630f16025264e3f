package device

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/wanlab/wanlab/internal/nsrun"
	"github.com/wanlab/wanlab/internal/testenv"
)

// TestMultiQueueSpreadsFlows opens a TUN as two queues with each backend
// and routes 40 UDP flows into it: every flow is read from exactly one
// queue, all of them arrive, and both queues take some (the kernel picks
// a flow's queue by its hash: all 40 on one queue has odds of 2^-39).
func TestMultiQueueSpreadsFlows(t *testing.T) {
	for _, backend := range Backends {
		t.Run(backend, func(t *testing.T) {
			_, ns := testenv.NetNS(t)
			d, err := OpenQueuesIn(ns, backend, "wlmq0", 1500, 2)
			if err != nil {
				if errors.Is(err, os.ErrPermission) {
					testenv.Skip(t, "%v (needs CAP_NET_ADMIN)", err)
				}
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			qs := QueuesOf(d)
			if len(qs) != 2 || qs[0].Name() != "wlmq0" || qs[1].Name() != "wlmq0" {
				t.Fatalf("queues %v", qs)
			}
			err = nsrun.Do(ns, func() error {
				l, err := netlink.LinkByName("wlmq0")
				if err != nil {
					return err
				}
				a, _ := netlink.ParseAddr("10.78.0.1/24")
				if err := netlink.AddrAdd(l, a); err != nil {
					return err
				}
				return netlink.LinkSetUp(l)
			})
			if err != nil {
				t.Fatal(err)
			}
			const flows, perFlow = 40, 3
			var mu sync.Mutex
			seen := map[uint16]map[int]int{} // source port -> queue -> packets
			total := 0
			var wg sync.WaitGroup
			for q, qd := range qs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					bufs := make([][]byte, qd.BatchSize())
					for i := range bufs {
						bufs[i] = make([]byte, 64+qd.MTU())
					}
					sizes := make([]int, len(bufs))
					for {
						n, err := qd.Read(bufs, sizes, 64)
						if err != nil {
							return // closed
						}
						for i := range n {
							p := bufs[i][64 : 64+sizes[i]]
							if len(p) < 28 || p[0]>>4 != 4 || p[9] != unix.IPPROTO_UDP || binary.BigEndian.Uint16(p[22:]) != 7300 {
								continue
							}
							sport := binary.BigEndian.Uint16(p[20:])
							mu.Lock()
							if seen[sport] == nil {
								seen[sport] = map[int]int{}
							}
							seen[sport][q]++
							total++
							mu.Unlock()
						}
					}
				}()
			}
			err = nsrun.Do(ns, func() error {
				for f := range flows {
					c, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 78, 0, 1), Port: 7400 + f},
						&net.UDPAddr{IP: net.IPv4(10, 78, 0, 2), Port: 7300})
					if err != nil {
						return err
					}
					for range perFlow {
						if _, err := c.Write([]byte("flow")); err != nil {
							c.Close()
							return err
						}
					}
					c.Close()
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			testenv.WaitFor(t, "every datagram read from the queues", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return total == flows*perFlow
			})
			d.Close()
			wg.Wait()
			perQueue := map[int]int{}
			for sport, byQ := range seen {
				if len(byQ) != 1 {
					t.Errorf("flow from port %d read from %d queues: %v", sport, len(byQ), byQ)
				}
				for q := range byQ {
					perQueue[q]++
				}
			}
			if len(seen) != flows || perQueue[0] == 0 || perQueue[1] == 0 {
				t.Errorf("%d flows seen, per queue %v: want %d flows over both queues", len(seen), perQueue, flows)
			}
		})
	}
}

func TestOpenQueuesBounds(t *testing.T) {
	for _, n := range []int{0, -1, MaxQueues + 1} {
		if _, err := OpenQueuesIn(0, Offload, "wlx", 1500, n); err == nil {
			t.Errorf("%d queues accepted", n)
		}
	}
}
