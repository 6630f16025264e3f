//go:build linux

package report

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/wanlab/wanlab/analyzer"
	"github.com/wanlab/wanlab/analyzer/plot"
	"github.com/wanlab/wanlab/internal/testenv"
	"github.com/wanlab/wanlab/tuner/sockopt"
	"github.com/wanlab/wanlab/units"
)

// TestReportOfARealCapture captures a transfer the way the seeds do (two
// namespaces joined by a veth pair, the server's egress shaped by tbf,
// the client's receive buffer pinned small, tcpdump -s 120 on the
// client's side) and checks the report and the plot files made from it.
func TestReportOfARealCapture(t *testing.T) {
	testenv.RequireRoot(t)
	client, server := testenv.NewNode(t), testenv.NewNode(t)
	client.Veth(t, "vzc", "vzs", server)
	client.Addr(t, "vzc", "10.78.0.2/24")
	server.Addr(t, "vzs", "10.78.0.1/24")
	// A 200 Mbit/s bottleneck on the data path, as the seeds' tbf.
	if out, err := exec.Command("tc", "-n", server.Name, "qdisc", "add", "dev", "vzs", "root", "tbf",
		"rate", "200mbit", "burst", "64kb", "latency", "20ms").CombinedOutput(); err != nil {
		t.Logf("no tbf (%v: %s); the transfer runs at veth speed", err, bytes.TrimSpace(out))
	}

	path := filepath.Join(t.TempDir(), "client.pcap")
	testenv.Tcpdump(t, client.NS, "vzc", path, "-s", "120", "tcp")

	const size = 16 << 20
	var ln net.Listener
	server.Do(t, func() (err error) {
		ln, err = net.Listen("tcp4", "10.78.0.1:0")
		return err
	})
	defer ln.Close()
	sent := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			sent <- err
			return
		}
		_, err = c.Write(make([]byte, size))
		c.Close()
		sent <- err
	}()
	var conn net.Conn
	dialer := net.Dialer{Control: sockopt.Options{RcvBuf: 128 * units.KiB}.Control}
	client.Do(t, func() (err error) {
		conn, err = dialer.Dial("tcp4", ln.Addr().String())
		return err
	})
	n, err := io.Copy(io.Discard, conn)
	conn.Close()
	if err != nil || n != size {
		t.Fatalf("received %d of %d bytes: %v", n, size, err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}

	// Wait until the capture holds the whole connection (both FINs).
	var res *analyzer.Result
	deadline := time.Now().Add(10 * time.Second)
	for tick := time.NewTicker(20 * time.Millisecond); ; <-tick.C {
		res, err = analyzer.AnalyzeFile(path, analyzer.Options{})
		if err == nil && len(res.Connections) == 1 && res.Connections[0].State == "closed" {
			tick.Stop()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("capture never showed the closed connection: %v", err)
		}
	}
	c := res.Connections[0]
	down := c.Directions[1]
	if down.UniqueBytes != size {
		t.Fatalf("capture shows %d unique bytes from the server, want %d", down.UniqueBytes, size)
	}

	var buf bytes.Buffer
	if err := Write(&buf, Page{Title: "real capture", Sections: []Section{{Title: "client side", Result: res}}}); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	parse(t, b)
	for _, k := range plot.Kinds {
		id := fmt.Sprintf("s1-c1-s2c-%s", k)
		if !bytes.Contains(b, []byte(`id="`+id+`"`)) || !bytes.Contains(b, []byte(`"id":"`+id+`"`)) {
			t.Errorf("graph %s missing", id)
		}
	}
	if bytes.Contains(b, []byte("http://")) || bytes.Contains(b, []byte("https://")) {
		t.Error("URL in the report")
	}
	// The graphs carry the transfer: the segments reach the last byte, the
	// throughput layer holds every byte sent, RTT samples exist.
	gs := plot.Graphs(c, 1)
	seg := gs[0].Layers[3]
	if seg.Label != "data segments" || seg.Len() == 0 || seg.Hi[seg.Len()-1] < size {
		t.Errorf("data segments layer %q: %d points, ends at %v", seg.Label, seg.Len(), seg.Hi[max(0, seg.Len()-1)])
	}
	if gs[2].Empty() {
		t.Error("no RTT samples drawn")
	}
	paths, err := plot.WriteDir(filepath.Join(t.TempDir(), "plots"), res.Connections)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 2*len(plot.Kinds) {
		t.Errorf("wrote %d plot files", len(paths))
	}
	t.Logf("%d packets, %s limited, %.1f Mbit/s; report %d bytes", res.TCPPackets, c.Diagnosis.Limit, down.DataRateBps/1e6, len(b))
}
