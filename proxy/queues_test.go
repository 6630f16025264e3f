package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/proxy/device"
)

// TestQueuesKeepFlowsOnTheirQueue runs each direction over a device of
// three fake queues, a flow injected on each: every packet comes back out
// of the queue it went in by, each flow in order, through one pipeline
// per direction (the counters add up across queues).
func TestQueuesKeepFlowsOnTheirQueue(t *testing.T) {
	const queues, perFlow = 3, 200
	var devs [2]device.Device
	var fakes [2][]*device.Fake
	for i := range 2 {
		var qs []device.Device
		for range queues {
			f := device.NewFake("f"+string(rune('a'+i)), 1500, 8, 1024)
			fakes[i] = append(fakes[i], f)
			qs = append(qs, f)
		}
		m, err := device.NewMulti(qs)
		if err != nil {
			t.Fatal(err)
		}
		devs[i] = m
	}
	p, err := New(context.Background(), devs, Options{
		Ifaces: [2]string{"eth-a", "eth-b"}, Specs: mustSpecs(t, [2]string{"delay 5ms", "tbf rate 50mbit burst 20kb limit 1mb"}),
		Seed: 1, HasSeed: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Queues() != queues {
		t.Fatalf("Queues() = %d, want %d", p.Queues(), queues)
	}
	// flow q's packets carry (q, seq) in their payload.
	pkt := func(q, seq int) []byte {
		b := make([]byte, 200)
		binary.BigEndian.PutUint32(b[0:], uint32(q))
		binary.BigEndian.PutUint32(b[4:], uint32(seq))
		return ipv4(17, b, 0, false)
	}
	for dir := range 2 {
		for q, f := range fakes[dir] {
			go func() {
				for s := range perFlow {
					f.Inject(pkt(q, s))
				}
			}()
		}
		for q, f := range fakes[dir] {
			for s := range perFlow {
				got := receive(t, f, 10*time.Second)
				if want := pkt(q, s); !bytes.Equal(got, want) {
					gq, gs := binary.BigEndian.Uint32(got[20:]), binary.BigEndian.Uint32(got[24:])
					t.Fatalf("direction %d queue %d packet %d: got flow %d packet %d", dir, q, s, gq, gs)
				}
			}
		}
		// The count follows the last write the fakes delivered.
		testenv.WaitFor(t, "the direction's written count", func() bool {
			return p.Stats().Directions[dir].Device.Written == queues*perFlow
		})
	}
}
