package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/wanlab/wanlab/internal/testenv"
)

// TestWaitIfaces: the wait returns once both interfaces exist and are up
// (one added while it waits), and names what is missing when time runs
// out.
func TestWaitIfaces(t *testing.T) {
	n := testenv.NewNode(t)
	ifaces := [2]string{"wa0", "wb0"}
	err := waitIfaces(context.Background(), n.Name, ifaces, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "still missing wa0, wb0") {
		t.Fatalf("no interfaces: %v", err)
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "wa0"}, PeerName: "wb0"}
	if err := n.NL.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	err = waitIfaces(context.Background(), n.Name, ifaces, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "still missing wa0 (down), wb0 (down)") {
		t.Fatalf("interfaces down: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- waitIfaces(context.Background(), n.Name, ifaces, time.Minute) }()
	for _, name := range ifaces {
		n.Up(t, name)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not return within 30 s of both interfaces coming up")
	}
}
