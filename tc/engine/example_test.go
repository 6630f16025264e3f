package engine_test

import (
	"fmt"

	"github.com/wanlab/wanlab/tc/engine"
	"github.com/wanlab/wanlab/tc/spec"
)

// The proxy's use of a pipeline, on a virtual clock: the reader stamps and
// enqueues, the release loop waits for NextDeparture and dequeues.
func ExamplePipeline() {
	s, _ := spec.Parse("delay 100ms | tbf rate 50mbit burst 50kb limit 500kb")
	pool := engine.NewPool(engine.Headroom + 1500)
	pl, _ := engine.NewPipeline(s, engine.Options{Direction: "eth1", Seed: 1})

	const ms = int64(1e6)
	for i := int64(0); i < 3; i++ {
		p := pool.Get()
		p.SetLen(1500) // a backend reads the IP packet into p.Buf()[engine.Headroom:]
		p.Arrival = 1000*ms + i*ms
		pl.Enqueue(p, p.Arrival) // returns the next departure, for release.Loop.Notify
	}
	var out []*engine.Packet
	for {
		next, ok := pl.NextDeparture()
		if !ok {
			break
		}
		out = pl.Dequeue(next, out[:0])
		for _, p := range out {
			fmt.Printf("packet %d: %d µs after arrival\n", p.Seq, (p.Depart-p.Arrival)/1000)
			pool.Put(p) // after sending it
		}
	}
	// Output:
	// packet 1: 100000 µs after arrival
	// packet 2: 100000 µs after arrival
	// packet 3: 100000 µs after arrival
}
