//go:build linux

package analyzer

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/wanlab/wanlab/internal/testenv"
)

// TestVXLANCapture takes a capture in the lab: a TCP transfer between two
// namespaces of the test's own over a real `vxlan` device (VNI 42, UDP
// 4789), captured on the underlay veth. The connection is the inner
// 4-tuple, carried in "vxlan vni 42", and the analysis agrees with
// tshark's frame by frame.
func TestVXLANCapture(t *testing.T) {
	a, b := testenv.NewNode(t), testenv.NewNode(t)
	a.Veth(t, "u0", "u1", b)
	a.Addr(t, "u0", "192.168.77.1/24")
	b.Addr(t, "u1", "192.168.77.2/24")
	for _, n := range []struct {
		node        *testenv.Node
		under       string
		local, peer string
		overlay     string
	}{{a, "u0", "192.168.77.1", "192.168.77.2", "10.77.0.1/24"}, {b, "u1", "192.168.77.2", "192.168.77.1", "10.77.0.2/24"}} {
		under, err := n.node.NL.LinkByName(n.under)
		if err != nil {
			t.Fatal(err)
		}
		vx := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: "vx0"}, VxlanId: 42, VtepDevIndex: under.Attrs().Index,
			SrcAddr: net.ParseIP(n.local), Group: net.ParseIP(n.peer), Port: 4789, Learning: true}
		if err := n.node.NL.LinkAdd(vx); err != nil {
			testenv.Skip(t, "no vxlan device in this kernel: %v", err)
		}
		n.node.Addr(t, "vx0", n.overlay)
		n.node.Up(t, "vx0")
		// Segments on the wire as a NIC sends them, not GSO
		// super-packets: a frame per segment for the comparison.
		testenv.RequireCommand(t, "ethtool")
		for _, dev := range []string{"vx0", n.under} {
			run(t, "ip", "netns", "exec", n.node.Name, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off")
		}
	}
	path := t.TempDir() + "/vxlan.pcap"
	stop := testenv.Tcpdump(t, a.NS, "u0", path, "-s", "200", "udp", "port", "4789")

	const size = 1 << 20
	var ln net.Listener
	b.Do(t, func() (err error) {
		ln, err = net.Listen("tcp4", "10.77.0.2:0")
		return err
	})
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		buf := make([]byte, 64<<10)
		for left := size; left > 0; {
			k, err := c.Write(buf[:min(len(buf), left)])
			if err != nil {
				served <- err
				return
			}
			left -= k
		}
		served <- nil
	}()
	var conn net.Conn
	a.Do(t, func() (err error) {
		conn, err = net.DialTimeout("tcp4", ln.Addr().String(), 5*time.Second)
		return err
	})
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	got, err := io.Copy(io.Discard, conn)
	conn.Close()
	if err != nil || got != size {
		t.Fatalf("client read %d of %d bytes: %v", got, size, err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	waitForFINs(t, path, 2, 10*time.Second)
	stop()
	keep(t, path, "vxlan.pcap")

	// Under load some frames' timestamps step back a few microseconds
	// (the two ends' packets stamped on two CPUs, written out of order):
	// the ACK RTTs, timed by each frame's own time, still agree.
	res := sameAsTshark(t, path, Options{}, nil)
	t.Logf("%d frames, %d TCP inside the tunnel, %d stamped before the frame ahead of them", res.Frames, res.TCPPackets, res.TimeBackwards)
	if len(res.Connections) != 1 {
		t.Fatalf("%d connections, want the one inside the tunnel", len(res.Connections))
	}
	c := res.Connections[0]
	if fmt.Sprint(c.Encapsulation) != "[vxlan vni 42]" || c.Server.String() != ln.Addr().String() || c.Directions[1].UniqueBytes != size || c.State != "closed" {
		t.Errorf("connection %s -> %s carried in %q: %d unique bytes, %s", c.Client, c.Server, c.Encapsulation, c.Directions[1].UniqueBytes, c.State)
	}
}
