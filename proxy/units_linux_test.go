package proxy

import (
	"bytes"
	"crypto/sha256"
	"io"
	"net"
	"testing"

	"github.com/wanlab/wanlab/proxy/device"
)

// TestUnitsCarryTCP sends TCP through "delay 1ms loss 1%" toward the
// server with the offload backend: the direction reads GSO frames whole
// into the engine (units), the lost segments' units go on as segments the
// proxy cut (gsoSegmenter) into smaller units about the lost segments,
// which the kernel takes back, and the server receives every byte intact,
// while the engine counted losses.
func TestUnitsCarryTCP(t *testing.T) {
	tp := newTopo(t)
	p := startIn(t, tp, device.Offload, [2]string{"", "delay 1ms loss 1%"})
	if !p.dirs[1].whole.Load() || p.dirs[1].pass.Load() {
		t.Fatalf("toward the server: units read %v, frames passed %v; want units, not passing", p.dirs[1].whole.Load(), p.dirs[1].pass.Load())
	}
	data := make([]byte, 16<<20)
	for i := range data {
		data[i] = byte(i*31 + i>>12)
	}
	want := sha256.Sum256(data)
	var ln net.Listener
	tp.server.in(t, func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(serverIP, "0"))
		return err
	})
	defer ln.Close()
	got := make(chan [32]byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- [32]byte{}
			return
		}
		h := sha256.New()
		_, _ = io.Copy(h, c)
		c.Close()
		var sum [32]byte
		copy(sum[:], h.Sum(nil))
		got <- sum
	}()
	var conn net.Conn
	tp.client.in(t, func() (err error) {
		conn, err = net.Dial("tcp", ln.Addr().String())
		return err
	})
	if _, err := io.Copy(conn, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if sum := <-got; sum != want {
		t.Fatal("the server received other bytes than the client sent")
	}
	e := p.Stats().Directions[1].Engine
	if e.Totals.Drops.Loss == 0 || e.Totals.PacketsOut == 0 {
		t.Fatalf("engine toward the server: %d lost, %d out; want both positive", e.Totals.Drops.Loss, e.Totals.PacketsOut)
	}
	if p.dirs[1].cuts.Load() == 0 {
		t.Fatal("toward the server: no unit was cut about its lost segment")
	}
	if d := p.Stats().Directions[1].Device; d.Malformed != 0 || d.WriteErrors != 0 {
		t.Fatalf("device toward the server: %d malformed, %d write errors", d.Malformed, d.WriteErrors)
	}
}
