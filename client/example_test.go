package client_test

import (
	"fmt"
	"log"

	"github.com/wanlab/wanlab/client"
)

// A test run inside `wanlab shell` (which sets WANLAB_CONTROL) makes the
// link worse half-way and puts it back.
func Example() {
	link, err := client.Dial("") // $WANLAB_CONTROL
	if err != nil {
		log.Fatal(err)
	}
	defer link.Reset()
	// From here on, 200 ms more on the way in and 5 % loss on the way out.
	if err := link.Set("down", "delay 250ms"); err != nil {
		log.Fatal(err)
	}
	if err := link.Set("up", "loss 5%"); err != nil {
		log.Fatal(err)
	}
	// ... exercise the program under test, then look at what the link did.
	st, err := link.Stats()
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range st.Directions {
		fmt.Printf("%s: %s, %d packets dropped\n", d.Iface, d.Spec, d.Engine.Totals.Drops)
	}
}

// A proxy started with `wanlab proxy --iface eth0 --iface eth1` is reached
// at its socket; its directions are named by their egress interfaces.
func ExampleDial() {
	link, err := client.Dial("unix:/run/wanlab/eth0-eth1.sock")
	if err != nil {
		log.Fatal(err)
	}
	if err := link.Set("eth1", "delay 50ms | tbf rate 20mbit burst 32kb limit 200kb"); err != nil {
		log.Fatal(err)
	}
}

// A bad spec is refused with the parser's message; the link keeps its spec.
func ExampleBadSpec() {
	link, err := client.Dial("")
	if err != nil {
		log.Fatal(err)
	}
	if err := link.Set("up", "delay fast"); client.BadSpec(err) {
		fmt.Println("refused:", err)
	}
}
