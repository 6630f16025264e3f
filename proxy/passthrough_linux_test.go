package proxy

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/wanlab/wanlab/proxy/device"
)

// TestPassWhole: with an empty spec the offload backend passes the
// kernel's GSO super-packets whole, counts them as their segments, and a
// spec set while the link is idle applies to the very next packet.
func TestPassWhole(t *testing.T) {
	tp := newTopo(t)
	p := startIn(t, tp, device.Offload, [2]string{"", ""})
	ping := newPinger(t, tp.client, serverIP)
	ping.minRTT(t, 3)

	const size = 16 << 20
	tcpGoodput(t, tp, serverIP, size) // client to server: out of rb
	d := p.dirs[1]
	whole := d.passed.packets.Load()
	if !d.pass.Load() || whole == 0 {
		t.Fatalf("passing %v, %d segments passed whole: want super-packets passed whole with an empty spec", d.pass.Load(), whole)
	}
	tot := p.Stats().Directions[1].Engine.Totals
	if tot.PacketsIn != tot.PacketsOut || tot.BytesIn != tot.BytesOut || tot.BytesOut < size || tot.PacketsOut < size/1500 {
		t.Errorf("totals %d packets / %d bytes in, %d / %d out: want every segment of %d bytes counted once each way",
			tot.PacketsIn, tot.BytesIn, tot.PacketsOut, tot.BytesOut, size)
	}
	t.Logf("%d of %d segments passed whole (%d bytes out)", whole, tot.PacketsOut, tot.BytesOut)

	// A connection that went idle: both readers wait in a raw read, and
	// the first frame after the set is a super-packet of 256 KiB written
	// at once. The spec must reach it (the set interrupts the wait), and
	// the next echo.
	var ln net.Listener
	tp.server.in(t, func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(serverIP, "0"))
		return err
	})
	defer ln.Close()
	got := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, err = io.CopyN(io.Discard, c, 1+256<<10)
			c.Close()
		}
		got <- err
	}()
	var conn net.Conn
	tp.client.in(t, func() (err error) {
		conn, err = net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		return err
	})
	defer conn.Close()
	if _, err := conn.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	before := d.passed.packets.Load()
	if err := p.SetSpec("", "delay 20ms"); err != nil {
		t.Fatal(err)
	}
	if d.pass.Load() || p.dirs[0].pass.Load() {
		t.Fatal("still passing whole with a delay set")
	}
	if _, err := conn.Write(make([]byte, 256<<10)); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if n := d.passed.packets.Load(); n != before {
		t.Errorf("%d segments passed whole after delay 20ms was set: the spec must apply to the first frame", n-before)
	}
	rtt, err := ping.rtt(2 * time.Second)
	if err != nil || rtt < 40*time.Millisecond {
		t.Fatalf("echo after delay 20ms each way: %v, %v: want at least 40ms", rtt, err)
	}
	if err := p.SetSpec("", ""); err != nil {
		t.Fatal(err)
	}
	if rtt := ping.minRTT(t, 3); rtt > 20*time.Millisecond || !d.pass.Load() {
		t.Errorf("empty spec again: echo %v, passing %v", rtt, d.pass.Load())
	}
}
